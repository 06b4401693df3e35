"""A run's attempt ends: completed, failed or stopped by a policy; or it goes back to the
queue (a retry, a backend that could not take it); or its image failed to build."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from django.db import connection
from django.db.models import F
from django.utils import timezone

from compute.drivers import traits_of
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
from studies.events import publish_runs_changed
from studies.models import Run, Study
from studies.transitions.continuation import requeue_resume
from studies.transitions.effects import (
    MESSAGE_MAX,
    PUBLISH_CHUNK,
    RESULT_FIELDS,
    USAGE_FIELDS,
    after_end,
    backend_kind,
    fields_assign,
    stop_started,
)


def run_end(
    *,
    run: Run,
    state: str,
    end_reason: str,
    message: str = "",
    exit_code: int | None = None,
    results: Mapping[str, Any] | None = None,
    disk_bytes: int | None = None,
    figures: Mapping[str, Any] | None = None,
) -> bool:
    """The attempt ended as its agent reported (or as its backend says): fenced by the
    attempt and a started state. `results` are the fields results_compute set (objectives,
    iterations, last time, trust); `disk_bytes` the size the agent last measured of its
    directory (None: as its last report said); `figures` what its steps used
    (peak_memory_bytes, cpu_seconds); the agent is done with its files from now on."""
    if state not in TERMINAL_STATES:
        raise ValueError(f"not a final state: {state}")
    now = timezone.now()
    fields: dict[str, Any] = {
        "state": state,
        "end_reason": end_reason,
        "exit_code": exit_code,
        "phase": "",
        "finished_at": now,
        "heartbeat_at": now,
        "started_at": run.started_at or now,
        "message": (message or "")[:MESSAGE_MAX],
        "results_at": now,
        "updated_at": now,
        **{k: v for k, v in (results or {}).items() if k in RESULT_FIELDS},
    }
    if disk_bytes is not None:
        fields["disk_bytes"] = disk_bytes
    fields.update({k: v for k, v in (figures or {}).items() if k in USAGE_FIELDS})
    updated = Run.objects.filter(pk=run.pk, attempt=run.attempt, state__in=STARTED_STATES).update(
        **fields
    )
    if not updated:
        return False
    fields_assign(run, fields)
    after_end(run)
    return True


def run_stop_by_policy(
    *, run: Run, outcome: str, detail: str, results: Mapping[str, Any] | None = None
) -> bool:
    """A convergence policy ended the attempt: its resources return to the queue at once;
    its agent sees `stop` on its next report and ends cleanly, keeping its results."""
    converged = outcome == "converged"
    reason = {"converged": EndReason.CONVERGED, "diverged": EndReason.DIVERGED}.get(
        outcome, EndReason.MAX_WALL_TIME
    )
    now = timezone.now()
    fields: dict[str, Any] = {
        "state": RunState.COMPLETED if converged else RunState.FAILED,
        "end_reason": reason,
        "stop_requested": True,
        "stop_reason": reason,
        "message": f"stopped by the convergence policy: {detail}"[:MESSAGE_MAX],
        "finished_at": now,
        "updated_at": now,
        **{k: v for k, v in (results or {}).items() if k in RESULT_FIELDS},
    }
    updated = Run.objects.filter(pk=run.pk, attempt=run.attempt, state__in=STARTED_STATES).update(
        **fields
    )
    if not updated:
        return False
    fields_assign(run, fields)
    stop_started(run)
    after_end(run)
    return True


def run_requeue(*, run: Run, message: str, as_seen: bool = False) -> bool:
    """The attempt ended without a result (agent lost, node failed): back to the queue.

    as_seen: only if the run is still as `run` was read (its state and last heartbeat), for a
    caller that judged it from that reading (the reaper, whose look can take a minute).

    Where its backend shows the next attempt this one's folder, the next attempt goes on
    from this one's latest write (studies.transitions.continuation.requeue_resume); the
    core-hours this one used are carried over (its start time becomes the next one's)."""
    now = timezone.now()
    fields = {
        "state": RunState.PENDING,
        "wait_reason": WaitReason.RETRY,
        "wait_detail": f"attempt {run.attempt} ended: {message}"[:200],
        "handle": "",
        "token_hash": "",
        "phase": "",
        "message": message[:MESSAGE_MAX],
        "updated_at": now,
        "resume": requeue_resume(run, keeps_attempts=traits_of(backend_kind(run)).keeps_attempts),
    }
    used = 0.0
    if run.started_at is not None:
        used = run.processes * max((now - run.started_at).total_seconds(), 0.0) / 3600.0
    carried = {"carried_core_hours": F("carried_core_hours") + used}
    if not _holding(run, as_seen=as_seen).update(**fields, **carried):
        return False
    fields_assign(run, fields)
    after_end(run, requeued=True)
    return True


def run_fail(*, run: Run, reason: str, message: str, as_seen: bool = False) -> bool:
    """The attempt failed and no retry is left (or none is due): the run is over (as_seen:
    as run_requeue's)."""
    now = timezone.now()
    fields = {
        "state": RunState.FAILED,
        "end_reason": reason,
        "message": message[:MESSAGE_MAX],
        "finished_at": now,
        "token_hash": "",
        "updated_at": now,
    }
    if not _holding(run, as_seen=as_seen).update(**fields):
        return False
    fields_assign(run, fields)
    after_end(run)
    return True


def run_dispatch_later(*, run: Run, message: str, tries: int, delay: float) -> bool:
    """Its backend could not take the attempt (unreachable, restarting): back to the queue
    until `delay` seconds from now, without using up a retry (the run never started)."""
    now = timezone.now()
    retry_at = now + timedelta(seconds=delay)
    fields = {
        "state": RunState.PENDING,
        "wait_reason": WaitReason.RETRY,
        "wait_detail": f"{message[:150]}; trying again at {retry_at:%H:%M:%S} UTC",
        "message": f"{message} (try {tries}; trying again in {delay:g} s)"[:MESSAGE_MAX],
        "handle": "",
        "token_hash": "",
        "phase": "",
        "dispatch_failures": tries,
        "retry_at": retry_at,
        "updated_at": now,
    }
    if not _holding(run).update(**fields):
        return False
    fields_assign(run, fields)
    publish_runs_changed([run.pk])
    jobs.enqueue(Job.SCHEDULE_TENANT, run.tenant_id, countdown=delay)
    return True


def runs_fail_waiting_for_image(*, image_id: int, message: str) -> int:
    """The image their study runs in failed to build: its queued runs cannot start."""
    now = timezone.now()
    with connection.cursor() as cur:
        cur.execute(
            f"UPDATE {Run._meta.db_table} r SET state = %s, end_reason = %s, message = %s,"
            " wait_reason = '', wait_detail = '', finished_at = %s, updated_at = %s"
            f" FROM {Study._meta.db_table} st WHERE st.id = r.study_id AND st.image_id = %s"
            " AND r.state = %s RETURNING r.id",
            [
                RunState.FAILED,
                EndReason.DISPATCH_FAILED,
                message[:MESSAGE_MAX],
                now,
                now,
                image_id,
                RunState.PENDING,
            ],
        )
        ids = [row[0] for row in cur.fetchall()]
    publish_runs_changed(ids, refresh_when_done=True)
    for i in range(0, len(ids), PUBLISH_CHUNK):
        jobs.enqueue(Job.NOTIFY_RUNS_FAILED, [str(x) for x in ids[i : i + PUBLISH_CHUNK]])
    return len(ids)


def _holding(run: Run, *, as_seen: bool = False) -> Any:
    """The run while this attempt holds its resources; as_seen: and unchanged since `run` was
    read (a run requeued and admitted again meanwhile keeps its attempt until it starts)."""
    holding = Run.objects.filter(pk=run.pk, attempt=run.attempt, state__in=HOLDING_STATES)
    return holding.filter(state=run.state, heartbeat_at=run.heartbeat_at) if as_seen else holding
