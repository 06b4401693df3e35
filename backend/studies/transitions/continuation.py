"""An ended run goes back to the queue to go on from one of its writes: continued for more
iterations, or restarted from an earlier time with changed settings (studies.continuation
decides whether, and what its next attempt's agent is told)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import connection
from django.utils import timezone

from core import jobs
from core.jobs import Job
from studies.choices import TERMINAL_STATES, RunState
from studies.events import publish_runs_changed
from studies.models import Run
from studies.transitions.effects import MESSAGE_MAX

# what the next attempt's agent is told of a resume (run.json's resume)
AGENT_KEYS = (
    "source",
    "source_index",
    "blend",
    "map",
    "attempt",
    "time",
    "iterations",
    "end_time",
    "keep_end",
    "settings",
    "required",
    "fallback",
)


def runs_resume(
    *, resumes: Mapping[Any, tuple[int, Mapping[str, Any]]], tenant_id: int
) -> list[str]:
    """Queue the ended runs of `resumes` ({run id: (the attempt it ended, its resume)})
    again, each fenced by that attempt and an ended state; the ids queued. What its earlier
    attempts used is kept (carried_core_hours: its start and end times become its next
    attempt's); it is queued as new work (queued_at now); its retries count afresh."""
    if not resumes:
        return []
    now = timezone.now()
    table = Run._meta.db_table
    rows = [(str(pk), attempt, _json(resume)) for pk, (attempt, resume) in resumes.items()]
    ended = [s.value for s in TERMINAL_STATES]
    with connection.cursor() as cur:
        cur.execute(
            f"UPDATE {table} r SET state = %s, resume = v.resume::jsonb, queued_at = %s,"
            " updated_at = %s, wait_reason = '', wait_detail = '', end_reason = '',"
            " exit_code = NULL, finished_at = NULL, released_at = NULL, admitted_at = NULL,"
            " provisioning_at = NULL, heartbeat_at = NULL, stop_requested = false,"
            " stop_reason = '', retry_at = NULL, dispatch_failures = 0, phase = '',"
            " message = %s, carried_core_hours = r.carried_core_hours + CASE WHEN"
            " r.started_at IS NULL THEN 0 ELSE r.processes * GREATEST(EXTRACT(EPOCH FROM"
            " (COALESCE(r.released_at, r.finished_at, %s) - r.started_at)), 0) / 3600.0 END"
            " FROM unnest(%s::uuid[], %s::int[], %s::text[]) AS v(id, attempt, resume)"
            " WHERE r.id = v.id AND r.attempt = v.attempt AND r.state = ANY(%s::text[])"
            " AND r.tenant_id = %s RETURNING r.id, r.study_id",
            [
                RunState.PENDING.value,
                now,
                now,
                "queued to go on from its write"[:MESSAGE_MAX],
                now,
                [r[0] for r in rows],
                [r[1] for r in rows],
                [r[2] for r in rows],
                ended,
                tenant_id,
            ],
        )
        done = cur.fetchall()
    ids = [str(row[0]) for row in done]
    if ids:
        publish_runs_changed(ids)
        for study_id in sorted({str(row[1]) for row in done}):  # ended: running again
            jobs.enqueue(Job.REFRESH_STUDY, study_id)
        jobs.enqueue(Job.SCHEDULE_TENANT, tenant_id)
    return ids


def requeue_resume(run: Run, *, keeps_attempts: bool) -> dict[str, Any] | None:
    """Run.resume for an attempt that ended without a result (its agent or node lost) going
    back to the queue: on a backend whose next attempt sees this one's folder, it goes on
    from this attempt's latest complete write, else from the write the run was continued
    from (`fallback`), else from the beginning (`required` false)."""
    before = run.resume if isinstance(run.resume, dict) else None
    if not keeps_attempts:
        return before
    fallback = {k: v for k, v in (before or {}).items() if k in AGENT_KEYS}
    # the lost attempt's own end (its controlDict's endTime: a continuation's moved end)
    resume: dict[str, Any] = {
        "attempt": run.attempt,
        "time": "latest",
        "required": False,
        "keep_end": True,
    }
    if fallback:
        resume["fallback"] = fallback
    if before:  # what the user asked stays on record, and applies again; retries count on
        resume.update({k: before[k] for k in ("retry_base", "by", "at") if k in before})
        resume["settings"] = before.get("settings") or {}
    return resume


def runs_record_warm_sources(*, rows: list[tuple[Run, Mapping[str, Any], str]]) -> None:
    """Dispatched runs that start warm (studies.warm): (run, its resume naming the source,
    its identity with the source's), written in one statement, fenced by the attempt."""
    if not rows:
        return
    with connection.cursor() as cur:
        cur.execute(
            f"UPDATE {Run._meta.db_table} r SET resume = v.resume::jsonb, identity = v.identity"
            " FROM unnest(%s::uuid[], %s::int[], %s::text[], %s::text[])"
            " AS v(id, attempt, resume, identity) WHERE r.id = v.id AND r.attempt = v.attempt",
            [
                [str(run.pk) for run, _, _ in rows],
                [run.attempt for run, _, _ in rows],
                [_json(resume) for _, resume, _ in rows],
                [identity for _, _, identity in rows],
            ],
        )


def _json(value: Mapping[str, Any]) -> str:
    import json

    return json.dumps(dict(value), sort_keys=True, default=str)
