"""pending → completed without computing: runs identical to a completed run of their tenant
reuse its results (a submission, an extension); and, before a study is deleted, the results
its runs lend to other studies' runs handed over to them (docs/reuse.md)."""

from __future__ import annotations

import orjson
from django.db import connection
from django.utils import timezone

from core import jobs
from core.jobs import Job
from studies.choices import RunState
from studies.events import publish_runs_changed
from studies.models import Run, Study
from studies.transitions.effects import runs_changed_publish

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
    runs_changed_publish(study_id=study.pk, run_ids=ids)
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
