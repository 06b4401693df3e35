"""admitted → provisioning → running: dispatch claims admitted runs (an attempt and its
token each) and records what their backends took; the agent's first report says running."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from catalog.models import Backend
from core import jobs
from core.jobs import Job
from studies.choices import RunState, StudyState
from studies.events import publish_runs_changed, publish_runs_taken
from studies.models import Run, Study
from studies.transitions.tokens import hash_run_token, run_token

# what starting a run reads of it (its spec, its agent's run.json, a start that fails): the
# other fields are loaded only if read (a query each); a run has some sixty
CLAIMED_FIELDS = (
    "id",
    "study",
    "tenant",
    "backend",
    "index",
    "context",
    "state",
    "attempt",
    "processes",
    "nodes",
    "memory_gb",
    "identity",
    "queued_at",
    "admitted_at",
    "started_at",
    "released_at",
    "handle",
    "dispatch_failures",
    "resume",
)


# the batch's rows, studies and backends read by plain statements made once (the ORM would
# compile each query anew, about as long as the rows take to load)
_CLAIMED_COLUMNS = [str(f.column) for f in Run._meta.concrete_fields if f.name in CLAIMED_FIELDS]
_CLAIM_SQL = (
    f"SELECT {', '.join(_CLAIMED_COLUMNS)}"
    f" FROM {Run._meta.db_table} WHERE id = ANY(%s::uuid[]) AND state = %s"
    " ORDER BY queued_at, index FOR UPDATE SKIP LOCKED"
)
_STUDIES_SQL = f"SELECT * FROM {Study._meta.db_table} WHERE id = ANY(%s::uuid[])"
_BACKENDS_SQL = f"SELECT * FROM {Backend._meta.db_table} WHERE id = ANY(%s::bigint[])"


def runs_claim(*, run_ids: Iterable[Any]) -> tuple[list[Run], dict[Any, str]]:
    """Claim admitted runs for a start: attempt + 1 and its token each (run_token; only its
    hash is stored). A redelivered dispatch finds them no longer admitted and claims nothing,
    so a run never starts twice. The claimed runs (CLAIMED_FIELDS, with study and backend,
    one instance of each for the runs that share it) and their tokens."""
    now = timezone.now()
    tokens: dict[Any, str] = {}
    with transaction.atomic():
        ids = [str(i) for i in run_ids]
        runs = list(Run.objects.raw(_CLAIM_SQL, [ids, RunState.ADMITTED.value]))
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
            # the rows are locked, and were admitted at the attempt read: fenced by it (a
            # fence by state would let the planner, whose statistics lag behind a large
            # admission, scan every admitted run for each batch)
            _update_from_arrays(
                "attempt = v.attempt, state = %s, provisioning_at = %s, heartbeat_at = NULL, "
                "token_hash = v.token_hash, handle = '', results_dir = '', results_at = NULL, "
                "phase = '', batch_seq = 0, updated_at = %s, event_seq = s.event_seq + 1",
                [RunState.PROVISIONING.value, now, now],
                ("id uuid", "attempt int", "token_hash text"),
                [(str(r.pk), r.attempt, r.token_hash) for r in runs],
                where="AND s.attempt = v.attempt - 1",
            )
    if not runs:
        return [], tokens
    studies = {
        s.pk: s for s in Study.objects.raw(_STUDIES_SQL, [sorted({str(r.study_id) for r in runs})])
    }
    backends = {
        b.pk: b for b in Backend.objects.raw(_BACKENDS_SQL, [sorted({r.backend_id for r in runs})])
    }
    for run in runs:
        run.study, run.backend = studies[run.study_id], backends[run.backend_id]
    publish_runs_taken([r.pk for r in runs])  # their event seqs taken by the claim
    return runs, tokens


def runs_record_handles(*, rows: list[tuple[str, int, str, str]]) -> set[str]:
    """The backend took these attempts: (run id, attempt, handle, results dir). Stored only
    where the attempt is still the run's and started; the ids stored."""
    if not rows:
        return set()
    return _update_from_arrays(
        "handle = v.handle, results_dir = v.results_dir",
        [],
        ("id uuid", "attempt int", "handle text", "results_dir text"),
        rows,
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


def _update_from_arrays(
    assignments: str,
    params: list[Any],
    columns: tuple[str, ...],
    rows: list[tuple[Any, ...]],
    *,
    where: str = "",
    where_params: list[Any] | None = None,
) -> set[str]:
    """One `UPDATE … FROM unnest(…) AS v(columns)` for many runs, a typed array per column
    (`columns`: "name type", the first the run's id; Django's bulk_update is far slower, and
    a statement of a few arrays is parsed once, not once per row)."""
    names = ", ".join(c.split()[0] for c in columns)
    arrays = ", ".join(f"%s::{c.split()[1]}[]" for c in columns)
    with connection.cursor() as cur:
        cur.execute(
            f"UPDATE {Run._meta.db_table} AS s SET {assignments} FROM unnest({arrays}) "
            f"AS v({names}) WHERE s.id = v.id {where} RETURNING s.id",
            [*params, *(list(column) for column in zip(*rows, strict=True)), *(where_params or [])],
        )
        return {str(r[0]) for r in cur.fetchall()}


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
