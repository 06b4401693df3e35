"""A run cancelled by its user, or a study's runs cancelled: queued ones end at once, started
ones are killed on their backends (a running agent is told to stop first)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from core import jobs
from core.jobs import Job
from studies.choices import (
    HOLDING_STATES,
    STARTED_STATES,
    TERMINAL_STATES,
    EndReason,
    RunState,
    WaitReason,
)
from studies.models import Run, Study
from studies.transitions.effects import (
    PUBLISH_CHUNK,
    after_end,
    fields_assign,
    runs_changed_publish,
    stop_started,
)


def run_cancel(*, run: Run, by: Any = None, reason: str = "") -> bool:
    """Cancel a run: a queued one ends at once; a started one is killed on its backend (a
    running agent sees `stop` first and ends cleanly). False when it had ended already.

    With `reason`, an administrator stopped it (the operations page): its end reason says so
    and its message, which its owner sees, gives the reason."""
    now = timezone.now()
    who = getattr(by, "username", None) or "the system"
    with transaction.atomic():
        current = (
            Run.objects.select_for_update(of=("self",))
            .select_related("backend")
            .filter(pk=run.pk)
            .exclude(state__in=TERMINAL_STATES)
            .first()
        )
        if current is None:
            return False
        before = current.state
        fields = _cancel_fields(who, now)
        if reason:
            fields["end_reason"] = EndReason.CANCELLED_BY_ADMIN
            fields["message"] = f"stopped by an administrator ({who}): {reason}"
        Run.objects.filter(pk=current.pk, attempt=current.attempt, state=before).update(**fields)
        fields_assign(current, fields)
        if before in STARTED_STATES and current.handle:
            if before == RunState.RUNNING:
                stop_started(current)
            else:
                jobs.enqueue(Job.KILL_RUN, str(current.pk), current.attempt, current.handle)
        after_end(current)
    fields_assign(run, fields)
    return True


def runs_cancel_for_study(*, study: Study, by: Any = None, queued: bool = True) -> int:
    """Cancel every queued or started run of a study in one statement; started ones are
    killed on their backends as run_cancel does. How many were cancelled.

    `queued=False` leaves the queued runs alone: those of a large study are ended in
    chunks in the background (runs_cancel_queued) while admission skips them."""
    now = timezone.now()
    who = getattr(by, "username", None) or "the system"
    fields = _cancel_fields(who, now)
    states = (RunState.PENDING, *HOLDING_STATES) if queued else HOLDING_STATES
    sets = ", ".join(f"{name} = %s" for name in fields)
    table = Run._meta.db_table
    with connection.cursor() as cur:
        # the runs that hold resources (at most a quota's worth) first, locked so none moves
        # on meanwhile, with their state before: the started ones are killed on their
        # backends; the queued ones need nothing but the UPDATE, which then joins nothing
        # (a self-join for 100,000 rows' old state cost a second)
        cur.execute(
            f"SELECT id, attempt, handle, state FROM {table}"
            " WHERE study_id = %s AND state = ANY(%s) FOR UPDATE",
            [str(study.pk), [str(s) for s in HOLDING_STATES]],
        )
        started = cur.fetchall()
        cur.execute(
            f"UPDATE {table} SET {sets} WHERE study_id = %s AND state = ANY(%s)"
            " RETURNING id::text, tenant_id",
            [
                *fields.values(),
                str(study.pk),
                [str(s) for s in states],
            ],
        )
        rows = cur.fetchall()
    if not rows:
        return 0
    grace = settings.WINDTUNNEL["STOP_GRACE"]
    for run_id, attempt, handle, before in started:
        if before in STARTED_STATES and handle:
            countdown = grace if before == RunState.RUNNING else None
            jobs.enqueue(Job.KILL_RUN, str(run_id), attempt, handle, countdown=countdown)
    ids = [r[0] for r in rows]
    runs_changed_publish(study_id=study.pk, run_ids=ids)
    for tenant_id in {r[1] for r in rows}:
        jobs.enqueue(Job.SCHEDULE_TENANT, tenant_id)
    return len(ids)


def runs_cancel_queued(
    *, study_id: Any, who: str, cancelled_at: datetime, start: int, stop: int
) -> list[str]:
    """The queued runs of a cancelled study with an index in [start, stop), queued before
    its cancel, cancelled in one statement (a range of the (study, index) index: a chunk
    costs its own rows, however far the flip has got). Their ids; each run's event is the
    worker's (PUBLISH_RUNS). Runs queued after the cancel (an extension) are not touched."""
    fields = _cancel_fields(who, timezone.now())
    fields["finished_at"] = cancelled_at  # they ended when their study was cancelled
    sets = ", ".join(f"{name} = %s" for name in fields)
    with connection.cursor() as cur:
        cur.execute(
            f"UPDATE {Run._meta.db_table} SET {sets} WHERE study_id = %s"
            " AND index >= %s AND index < %s AND state = %s AND queued_at <= %s RETURNING id::text",
            [*fields.values(), str(study_id), start, stop, RunState.PENDING, cancelled_at],
        )
        ids = [r[0] for r in cur.fetchall()]
    for i in range(0, len(ids), PUBLISH_CHUNK):
        jobs.enqueue(Job.PUBLISH_RUNS, ids[i : i + PUBLISH_CHUNK])
    return ids


def _cancel_fields(who: str, now: datetime) -> dict[str, Any]:
    return {
        "state": RunState.CANCELLED,
        "end_reason": EndReason.CANCELLED_BY_USER,
        "message": f"cancelled by {who}",
        "finished_at": now,
        "stop_requested": True,
        "wait_reason": WaitReason.NONE,
        "wait_detail": "",  # it waits for nothing any more
        "updated_at": now,
    }
