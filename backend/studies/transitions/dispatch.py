"""admitted → provisioning → running: dispatch claims admitted runs (an attempt and its
token each) and records what their backends took; the agent's first report says running."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from core import jobs
from core.jobs import Job
from studies.choices import RunState, StudyState
from studies.events import publish_runs_changed
from studies.models import Run, Study
from studies.transitions.tokens import hash_run_token, run_token


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
