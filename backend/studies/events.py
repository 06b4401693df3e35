"""Live events of runs and studies: sequence numbers in PostgreSQL, then the courier.

Every message carries the object's increasing `seq`; a client that sees a gap re-syncs from
REST (docs/live.md). Sequence numbers are bumped with `UPDATE … RETURNING` so a message with
a higher seq always carries a newer (or equal) state. Run events are published by the run's
transitions (studies.transitions), in the same step as the change.

A run's `state` event goes to its own group only while a websocket client follows the run
(core.live.runs_watched, the mark a run subscription sets before it answers `subscribed`):
most runs of a large study are never looked at, and an event to nobody cost the worker a
`PUBLISH` per run and change. Its seq is taken all the same, so a later subscriber's REST
snapshot holds every change whose event it did not get. The study's group gets every change
(its `runs` event lists them).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson
from django.db import connection, transaction

from core import jobs
from core.jobs import Job
from core.live import run_group, runs_watched, send, send_many, study_group
from studies.choices import ACTIVE_STATES, StudyState
from studies.figures import CORE_HOURS_SQL, WALL_SECONDS_SQL
from studies.models import Run, Study

ACTIVE = {str(s) for s in ACTIVE_STATES}

RUN_FIELDS = (
    "state",
    "phase",
    "attempt",
    "end_reason",
    "message",
    "trust",
    "objectives",
    "partial_objectives",
    "wait_reason",
    "wait_detail",
    "iterations",
    "started_at",
    "finished_at",
    "peak_memory_bytes",
    "cpu_seconds",
)


def publish_runs_changed(run_ids: Iterable, *, refresh_when_done: bool = False) -> None:
    """After commit: a `state` event per run and one `runs` event per study. With
    `refresh_when_done`, a study none of whose runs is active any more is refreshed (its
    state derived from its runs'): the event's progress counts say so, no query more."""
    ids = [str(i) for i in run_ids]
    if ids:
        transaction.on_commit(lambda: _publish_now(ids, refresh_when_done=refresh_when_done))


def publish_runs_taken(run_ids: Iterable) -> None:
    """After commit: as publish_runs_changed, for runs whose next seqs the caller's own
    UPDATE took with the change (`event_seq = event_seq + 1`): their rows are read, not
    written again (nor locked: a dispatch that claims runs with SKIP LOCKED never finds
    them held by their events)."""
    ids = [str(i) for i in run_ids]
    if ids:
        transaction.on_commit(lambda: _publish_now(ids, taken=True))


def publish_runs_now(ids: list[str]) -> None:
    """The events of runs that changed, sent now (a worker's job, after the commit)."""
    _publish_now([str(i) for i in ids])


def _publish_now(ids: list[str], *, refresh_when_done: bool = False, taken: bool = False) -> None:
    """One statement takes the runs' event seqs (unless their change `taken` them) and their
    studies' seqs and progress counts (this runs for every change of every run: admission,
    start, end)."""
    with connection.cursor() as cur:
        cur.execute(_PUBLISH_TAKEN_SQL if taken else _PUBLISH_SQL, {"ids": ids})
        runs_json, studies_json = cur.fetchone()
    rows = _json(runs_json)
    studies = {str(s["id"]): s for s in _json(studies_json)}
    watched = runs_watched([str(row["id"]) for row in rows])
    by_study: dict[str, list[dict[str, Any]]] = {}
    messages = []
    for row in rows:
        run = {k: v for k, v in row.items() if k not in ("study_id", "event_seq")}
        if str(run["id"]) in watched:
            state = {"type": "state", "id": run["id"], "seq": row["event_seq"], "run": run}
            messages.append((run_group(run["id"]), state))
        by_study.setdefault(str(row["study_id"]), []).append(run)
    send_many(messages)
    for study_id, runs in by_study.items():
        study = studies.get(study_id)
        if study is not None:
            _send_study(study_id, kind="runs", row=study, payload={"runs": runs})
            if refresh_when_done and not set(_json(study["progress"])) & ACTIVE:
                # of two last runs ending together, the later commit sees the other one ended
                jobs.send(Job.REFRESH_STUDY, study_id)


def _json(value: Any) -> Any:
    return orjson.loads(value) if isinstance(value, str | bytes) else value


# with the resource figures the run's page and table show (studies.figures), computed as the
# REST answer computes them: a run's row updated from its events shows what a reload would
_RUN_COLUMNS = ", ".join(
    (
        "id",
        "study_id",
        "index",
        "parameters",
        "event_seq",
        *RUN_FIELDS,
        f"{CORE_HOURS_SQL} AS core_hours",
        f"{WALL_SECONDS_SQL} AS wall_seconds",
    )
)
_PROGRESS = (  # a study's runs counted by state, as {"completed": 3, …}
    "(SELECT coalesce(json_object_agg(p.state, p.n), '{{}}') FROM (SELECT state, count(*) AS n"
    " FROM {runs} WHERE study_id = {study} GROUP BY state) AS p)"
)


def _publish_sql(runs: str) -> str:
    """The publishing statement over `runs` (the runs' event rows: a CTE's statement)."""
    return f"""
WITH r AS ({runs}), s AS (
    UPDATE {Study._meta.db_table} st SET event_seq = st.event_seq + 1
    FROM (SELECT DISTINCT study_id FROM r) AS d WHERE st.id = d.study_id
    RETURNING st.id, st.event_seq, st.state,
        {_PROGRESS.format(runs=Run._meta.db_table, study="st.id")} AS progress
)
SELECT (SELECT coalesce(json_agg(r), '[]') FROM r), (SELECT coalesce(json_agg(s), '[]') FROM s)
"""


_PUBLISH_SQL = _publish_sql(
    f"UPDATE {Run._meta.db_table} SET event_seq = event_seq + 1"
    f" WHERE id = ANY(%(ids)s::uuid[]) RETURNING {_RUN_COLUMNS}"
)
# the runs' seqs taken by their change's own UPDATE: read as they are now (a later change's
# seq and state, if one came between: a run's state and seq are written together)
_PUBLISH_TAKEN_SQL = _publish_sql(
    f"SELECT {_RUN_COLUMNS} FROM {Run._meta.db_table} WHERE id = ANY(%(ids)s::uuid[])"
)


def publish_study(*, study_id, kind: str, payload: dict[str, Any]) -> None:
    """Send a study event now (callers are already after commit). One statement takes the
    event's seq and counts the study's runs by state."""
    runs = Run._meta.db_table
    with connection.cursor() as cur:
        cur.execute(
            f"UPDATE {Study._meta.db_table} SET event_seq = event_seq + 1 WHERE id = %s"
            " RETURNING event_seq, state, "
            + _PROGRESS.format(runs=runs, study="%s").replace("{{}}", "{}"),
            [str(study_id), str(study_id)],
        )
        row = cur.fetchone()
    if row:
        _send_study(
            study_id,
            kind=kind,
            row={"event_seq": row[0], "state": row[1], "progress": row[2]},
            payload=payload,
        )


def _send_study(study_id, *, kind: str, row: dict[str, Any], payload: dict[str, Any]) -> None:
    progress = _json(row["progress"])
    if row["state"] == StudyState.CANCELLED and progress.get("pending"):
        # a cancelled study's queued runs never start: cancelled, as the REST progress says
        # (selectors.study_progress), while the cancel ends them in the background
        progress = {**progress, "cancelled": progress.get("cancelled", 0) + progress["pending"]}
        progress.pop("pending")
    send(
        study_group(study_id),
        {
            "type": kind,
            "id": str(study_id),
            "seq": int(row["event_seq"]),
            "state": row["state"],
            "progress": progress,
            **payload,
        },
    )
