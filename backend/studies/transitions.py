"""The one place a run's state changes.

    pending → admitted → provisioning → running → completed | failed | cancelled
        ↑__________________________|  (requeued: a retry, or a backend that could not take it)

Every change here is a conditional UPDATE fenced by the state(s) it leaves and by the
attempt, so a stale worker or agent can never overwrite a newer attempt, and every change
publishes its live event (studies.events) in the same step, after commit. What a change
leaves to do elsewhere (schedule the tenant, kill or release what the backend holds,
refresh the study) is enqueued by name (core.jobs): those steps live in higher layers.

Callers decide *whether* (a retry left? the backend's words?); this module only writes.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

import orjson
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from django.utils.crypto import salted_hmac

from compute.drivers import traits_of
from core import jobs
from core.jobs import Job
from studies.choices import (
    HOLDING_STATES,
    STARTED_STATES,
    TERMINAL_STATES,
    EndReason,
    RunState,
    StudyState,
    WaitReason,
)
from studies.events import publish_runs_changed, publish_study
from studies.models import Run, Study

MESSAGE_MAX = 5000
RESULT_FIELDS = (  # what results_compute and an agent's final report set
    "objectives",
    "iterations",
    "last_time",
    "trust",
    "trust_detail",
)


def hash_run_token(token: str) -> str:
    """What is stored of a run attempt's bearer token (the agent holds the token itself)."""
    return hashlib.sha256(token.encode()).hexdigest()


def run_token(*, run_id: Any, attempt: int) -> str:
    """The bearer token of a run's attempt: an HMAC of the run and the attempt under the
    portal's SECRET_KEY. Only its hash is stored (the current attempt's, `token_hash`); being
    derived, the token of an earlier attempt can still be recognised, so that attempt's
    agent, if it is still alive, is told 409 (stop) while any other caller learns nothing
    (run_token_is_of)."""
    digest = salted_hmac("windtunnel.run-token", f"{run_id}:{attempt}", algorithm="sha256")
    return base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()


def run_token_is_of(token: str, *, run_id: Any, attempt: int) -> bool:
    """Whether `token` is the bearer token the portal gave this attempt of this run."""
    return hmac.compare_digest(token.encode(), run_token(run_id=run_id, attempt=attempt).encode())


# --- pending → admitted (scheduler) ------------------------------------------------------


def runs_admit(*, run_ids: list[Any], publish: bool = True) -> int:
    """Admitted within quotas: they hold their resources from now on (a requeued run holds
    them again). In the caller's transaction; how many were still pending."""
    if not run_ids:
        return 0
    with connection.cursor() as cur:
        cur.execute(_ADMIT_SQL, [RunState.ADMITTED, timezone.now(), run_ids, RunState.PENDING])
        count = cur.rowcount
    if publish:
        publish_runs_changed(run_ids)
    return count


_ADMIT_SQL = (
    f"UPDATE {Run._meta.db_table} SET state = %s, admitted_at = %s,"
    " released_at = NULL, retry_at = NULL,"  # a requeued run holds its resources again
    " wait_reason = '', wait_detail = '' WHERE id = ANY(%s) AND state = %s"
)


# --- pending → completed without computing: reused (a submission, an extension) --------


REUSED_MESSAGE = "reused: identical to an earlier completed run of your tenant (not computed)"


def runs_reuse(*, study: Study) -> int:
    """The study's queued runs whose identity matches a completed run of the same tenant
    (in a study with the same objectives) end at once as completed and reused: they point
    to the run that computed the results (the source's own source when it was reused
    itself), copy its small results (objectives, iterations, trust) and hold nothing, so
    they cost no quota and no core-hours. In the caller's transaction, right after the runs
    were written (with the study's `identity_inputs` set); how many.

    Two runs can only have one identity when their studies' part of it is the same (the
    hashed bytes are the study's canonical inputs, then the run's context: both JSON objects,
    so neither can end inside the other), so the tenant's studies with the same inputs and
    objectives and a completed run are found first (a few rows); with none, nothing else is
    read. Then one UPDATE joins the new runs with those studies' completed runs of the same
    identity."""
    table, studies = Run._meta.db_table, Study._meta.db_table
    now = timezone.now()
    with connection.cursor() as cur:
        # with a completed run each (a probe of the (study, state) index per such study):
        # an extension's own study too
        cur.execute(
            f"SELECT array_agg(st.id::text) FROM {studies} st WHERE st.tenant_id = %s"
            " AND st.identity_inputs = %s::jsonb AND st.objectives = %s::jsonb"
            f" AND EXISTS (SELECT 1 FROM {table} c WHERE c.study_id = st.id AND c.state = %s)",
            [
                study.tenant_id,
                orjson.dumps(study.identity_inputs).decode(),
                orjson.dumps(study.objectives).decode(),
                RunState.COMPLETED,
            ],
        )
        sources = cur.fetchone()[0] or []
        if not sources:
            return 0
        cur.execute(
            f"UPDATE {table} r SET state = %s, reused = true,"
            " reused_from_id = COALESCE(s.reused_from_id, s.id), objectives = s.objectives,"
            " iterations = s.iterations, last_time = s.last_time, trust = s.trust,"
            " trust_detail = s.trust_detail, exit_code = s.exit_code, end_reason = s.end_reason,"
            " attempt = s.attempt, message = %s, wait_reason = '', wait_detail = '',"
            " finished_at = %s, results_at = %s, updated_at = %s"
            f" FROM {table} s WHERE r.study_id = %s AND r.state = %s AND r.identity <> ''"
            " AND s.tenant_id = %s AND s.state = %s AND s.identity = r.identity"
            " AND s.study_id = ANY(%s::uuid[]) RETURNING r.id::text",
            [
                RunState.COMPLETED,
                REUSED_MESSAGE,
                now,
                now,
                now,
                str(study.pk),
                RunState.PENDING,
                study.tenant_id,
                RunState.COMPLETED,
                sources,
            ],
        )
        ids = [row[0] for row in cur.fetchall()]
    if not ids:
        return 0
    if len(ids) <= PUBLISH_INLINE:
        publish_runs_changed(ids)
    else:  # as a cancel of many: the study's counts now, each run's event from the worker
        transaction.on_commit(lambda: publish_study(study_id=study.pk, kind="study", payload={}))
        for i in range(0, len(ids), PUBLISH_CHUNK):
            jobs.enqueue(Job.PUBLISH_RUNS, ids[i : i + PUBLISH_CHUNK])
    jobs.enqueue(Job.REFRESH_STUDY, str(study.pk))  # every run reused: the study is done
    return len(ids)


def runs_hand_over_reused(*, study: Study) -> list[tuple[str, str]]:
    """Before a study is deleted: each of its runs whose results other studies' runs reuse
    hands them to one of those (its heir, the oldest reuser): the heir takes the source's
    attempt, archive and results directory (with its size, which the tenant's storage
    counts) and points nowhere (it holds the results now); the other reusers point to the
    heir. The (source, heir) pairs: the caller moves the series (telemetry) and keeps the
    source's files on disk."""
    table = Run._meta.db_table
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT DISTINCT ON (u.reused_from_id) u.reused_from_id::text, u.id::text"
            f" FROM {table} u JOIN {table} s ON s.id = u.reused_from_id"
            " WHERE s.study_id = %s AND u.study_id <> %s"
            " ORDER BY u.reused_from_id, u.created_at, u.id",
            [str(study.pk), str(study.pk)],
        )
        pairs = [(row[0], row[1]) for row in cur.fetchall()]
        if not pairs:
            return []
        values = ", ".join(["(%s::uuid, %s::uuid)"] * len(pairs))
        flat = [x for pair in pairs for x in pair]
        cur.execute(
            f"UPDATE {table} h SET reused_from_id = NULL, attempt = s.attempt,"
            " archive_path = s.archive_path, archive_bytes = s.archive_bytes,"
            " results_dir = s.results_dir, disk_bytes = s.disk_bytes, updated_at = now()"
            f" FROM (VALUES {values}) AS v(src, heir) JOIN {table} s ON s.id = v.src"
            " WHERE h.id = v.heir",
            flat,
        )
        cur.execute(
            f"UPDATE {table} u SET reused_from_id = v.heir FROM (VALUES {values}) AS v(src, heir)"
            " WHERE u.reused_from_id = v.src AND u.id <> v.heir",
            flat,
        )
    publish_runs_changed([heir for _, heir in pairs])
    return pairs


# --- admitted → provisioning (dispatch) --------------------------------------------------


def runs_claim(*, run_ids: Iterable[Any]) -> tuple[list[Run], dict[Any, str]]:
    """Claim admitted runs for a start: attempt + 1 and its token each (run_token; only its
    hash is stored). A redelivered dispatch finds them no longer admitted and claims nothing,
    so a run never starts twice. The claimed runs (with study and backend) and their tokens."""
    now = timezone.now()
    tokens: dict[Any, str] = {}
    with transaction.atomic():
        runs = list(
            Run.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("study", "backend")
            .filter(pk__in=list(run_ids), state=RunState.ADMITTED)
            .order_by("queued_at", "index")
        )
        for run in runs:
            run.attempt += 1
            tokens[run.pk] = run_token(run_id=run.pk, attempt=run.attempt)
            run.state = RunState.PROVISIONING
            run.provisioning_at = now
            run.heartbeat_at = None
            run.token_hash = hash_run_token(tokens[run.pk])
            run.handle = ""
            run.results_dir = ""
            run.results_at = None
            run.phase = ""
            run.batch_seq = 0  # the new attempt's agent numbers its batches from 1
            run.updated_at = now
        if runs:
            _update_from_values(
                "attempt = v.attempt, state = %s, provisioning_at = %s, heartbeat_at = NULL, "
                "token_hash = v.token_hash, handle = '', results_dir = '', results_at = NULL, "
                "phase = '', batch_seq = 0, updated_at = %s",
                [RunState.PROVISIONING.value, now, now],
                "(%s::uuid, %s::int, %s)",
                [(str(r.pk), r.attempt, r.token_hash) for r in runs],
                "v(id, attempt, token_hash)",
                where="AND s.state = %s",
                where_params=[RunState.ADMITTED.value],
            )
    publish_runs_changed([r.pk for r in runs])
    return runs, tokens


def runs_record_handles(*, rows: list[tuple[str, int, str, str]]) -> set[str]:
    """The backend took these attempts: (run id, attempt, handle, results dir). Stored only
    where the attempt is still the run's and started; the ids stored."""
    if not rows:
        return set()
    return _update_from_values(
        "handle = v.handle, results_dir = v.results_dir",
        [],
        "(%s::uuid, %s::int, %s, %s)",
        rows,
        "v(id, attempt, handle, results_dir)",
        where="AND s.attempt = v.attempt AND s.state IN (%s, %s)",
        where_params=[RunState.PROVISIONING.value, RunState.RUNNING.value],
    )


def run_record_provenance(*, run_id: Any, attempt: int, provenance: Mapping[str, Any]) -> bool:
    """What the agent reported of how it ran this attempt (host, OpenFOAM build, command
    lines, exit codes, versions), stored where the attempt is still the run's."""
    return bool(Run.objects.filter(pk=run_id, attempt=attempt).update(provenance=dict(provenance)))


def run_record_superseded_handle(*, run_id: Any, attempt: int, handle: str) -> None:
    """A start that succeeded after its attempt ended: its handle, for the record (the caller
    cancels it on the backend)."""
    Run.objects.filter(pk=run_id, attempt=attempt).update(handle=handle)


def _update_from_values(
    assignments: str,
    params: list[Any],
    row_sql: str,
    rows: list[tuple[Any, ...]],
    alias: str,
    *,
    where: str = "",
    where_params: list[Any] | None = None,
) -> set[str]:
    """One `UPDATE … FROM (VALUES …)` for many runs (Django's bulk_update is far slower)."""
    values = ", ".join([row_sql] * len(rows))
    with connection.cursor() as cur:
        cur.execute(
            f"UPDATE {Run._meta.db_table} AS s SET {assignments} FROM (VALUES {values}) AS {alias} "
            f"WHERE s.id = v.id {where} RETURNING s.id",
            [*params, *(x for row in rows for x in row), *(where_params or [])],
        )
        return {str(r[0]) for r in cur.fetchall()}


# --- provisioning → running (the agent's first report) -----------------------------------


def run_report_running(*, run_id: Any, attempt: int, token_hash: str | None) -> bool | None:
    """The agent's `running` report in one statement, fenced by the attempt and the state
    (and by the token's hash when given): whether the agent should stop, or None when the
    fence held (a repeat, a stale attempt, a wrong token: the caller tells apart)."""
    now = timezone.now()
    where = "r.id = %s AND r.attempt = %s AND r.state = %s"
    params: list[Any] = [str(run_id), attempt, RunState.PROVISIONING]
    if token_hash is not None:
        where += " AND r.token_hash = %s"
        params.append(token_hash)
    with connection.cursor() as cur:
        cur.execute(
            f"UPDATE {Run._meta.db_table} r SET state = %s, started_at = %s,"
            # no longer queued on its backend (the agent's heartbeats name its phase): the
            # status line goes, what was below it (an earlier attempt's end) stays
            " heartbeat_at = %s, phase = '', message = CASE WHEN r.phase <> 'queued' THEN"
            " r.message WHEN strpos(r.message, chr(10)) = 0 THEN ''"
            " ELSE substr(r.message, strpos(r.message, chr(10)) + 1) END"
            f" FROM {Study._meta.db_table} st WHERE {where}"
            " AND st.id = r.study_id RETURNING r.stop_requested, r.study_id, st.state",
            [RunState.RUNNING, now, now, *params],
        )
        row = cur.fetchone()
    if row is None:
        return None
    publish_runs_changed([run_id])
    if row[2] != StudyState.RUNNING:  # the study's first run to start
        jobs.enqueue(Job.REFRESH_STUDY, str(row[1]))
    return bool(row[0])


# --- started → completed | failed | cancelled ---------------------------------------------


def run_end(
    *,
    run: Run,
    state: str,
    end_reason: str,
    message: str = "",
    exit_code: int | None = None,
    results: Mapping[str, Any] | None = None,
    disk_bytes: int | None = None,
) -> bool:
    """The attempt ended as its agent reported (or as its backend says): fenced by the
    attempt and a started state. `results` are the fields results_compute set (objectives,
    iterations, last time, trust); `disk_bytes` the size the agent last measured of its
    directory (None: as its last report said); the agent is done with its files from now on."""
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
    updated = Run.objects.filter(pk=run.pk, attempt=run.attempt, state__in=STARTED_STATES).update(
        **fields
    )
    if not updated:
        return False
    _assign(run, fields)
    _after_end(run)
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
    _assign(run, fields)
    _stop_started(run)
    _after_end(run)
    return True


def run_cancel(*, run: Run, by: Any = None) -> bool:
    """Cancel a run: a queued one ends at once; a started one is killed on its backend (a
    running agent sees `stop` first and ends cleanly). False when it had ended already."""
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
        Run.objects.filter(pk=current.pk, attempt=current.attempt, state=before).update(**fields)
        _assign(current, fields)
        if before in STARTED_STATES and current.handle:
            if before == RunState.RUNNING:
                _stop_started(current)
            else:
                jobs.enqueue(Job.KILL_RUN, str(current.pk), current.attempt, current.handle)
        _after_end(current)
    _assign(run, fields)
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
    if len(ids) <= PUBLISH_INLINE:
        publish_runs_changed(ids)
    else:
        # a large set answers at once: the study's counts now, each run's own event from
        # the worker (an event per run of 100,000 would hold the request for seconds)
        transaction.on_commit(lambda: publish_study(study_id=study.pk, kind="study", payload={}))
        for i in range(0, len(ids), PUBLISH_CHUNK):
            jobs.enqueue(Job.PUBLISH_RUNS, ids[i : i + PUBLISH_CHUNK])
    for tenant_id in {r[1] for r in rows}:
        jobs.enqueue(Job.SCHEDULE_TENANT, tenant_id)
    return len(ids)


PUBLISH_INLINE = 500  # runs whose events a cancel sends itself; more are the worker's
PUBLISH_CHUNK = 2000


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


# --- back to the queue, or failed --------------------------------------------------------


def run_requeue(*, run: Run, message: str) -> bool:
    """The attempt ended without a result (agent lost, node failed): back to the queue."""
    fields = {
        "state": RunState.PENDING,
        "wait_reason": WaitReason.RETRY,
        "wait_detail": f"attempt {run.attempt} ended: {message}"[:200],
        "handle": "",
        "token_hash": "",
        "phase": "",
        "message": message[:MESSAGE_MAX],
        "updated_at": timezone.now(),
    }
    if not _holding(run).update(**fields):
        return False
    _assign(run, fields)
    _after_end(run, requeued=True)
    return True


def run_fail(*, run: Run, reason: str, message: str) -> bool:
    """The attempt failed and no retry is left (or none is due): the run is over."""
    now = timezone.now()
    fields = {
        "state": RunState.FAILED,
        "end_reason": reason,
        "message": message[:MESSAGE_MAX],
        "finished_at": now,
        "token_hash": "",
        "updated_at": now,
    }
    if not _holding(run).update(**fields):
        return False
    _assign(run, fields)
    _after_end(run)
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
    _assign(run, fields)
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


def _holding(run: Run) -> Any:
    return Run.objects.filter(pk=run.pk, attempt=run.attempt, state__in=HOLDING_STATES)


def _assign(run: Run, fields: Mapping[str, Any]) -> None:
    for name, value in fields.items():
        setattr(run, name, value)


# --- what a change leaves to do ----------------------------------------------------------


def _after_end(run: Run, *, requeued: bool = False) -> None:
    """Publish, and enqueue what the end of an attempt leaves to do elsewhere."""
    if requeued:
        publish_runs_changed([run.pk])
        jobs.enqueue(Job.REFRESH_STUDY, str(run.study_id))
    else:  # the study's state changes only when its last active run ends
        publish_runs_changed([run.pk], refresh_when_done=True)
    if requeued or run.released_at is None:  # else its cores went back (and were scheduled)
        jobs.enqueue(Job.SCHEDULE_TENANT, run.tenant_id)
    if run.state == RunState.FAILED:  # failed or diverged: its subscribers are told
        jobs.enqueue(Job.NOTIFY_RUNS_FAILED, [str(run.pk)])
    if run.handle and traits_of(_backend_kind(run)).frees_on_end:
        # the server (or stack) of a finished run costs money until deleted: at once
        jobs.enqueue(Job.RELEASE_RUN, str(run.pk), run.attempt, run.handle)


def _backend_kind(run: Run) -> str:
    if Run.backend.is_cached(run):
        return run.backend.kind
    return str(Run.objects.filter(pk=run.pk).values_list("backend__kind", flat=True).first() or "")


def _stop_started(run: Run) -> None:
    """A running agent sees `stop` on its next report and ends cleanly, keeping its results;
    the backend kill follows after STOP_GRACE as a safety net. One not yet running is killed."""
    if not run.handle:
        return
    countdown = (
        settings.WINDTUNNEL["STOP_GRACE"]
        if run.state == RunState.RUNNING or run.started_at
        else None
    )
    jobs.enqueue(Job.KILL_RUN, str(run.pk), run.attempt, run.handle, countdown=countdown)
