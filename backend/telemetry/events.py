"""Live events: sequence numbers in PostgreSQL, delivery through the Channels layer.

The database is the record; the channel layer is a courier that may drop messages. Every
message carries the object's increasing `seq`; a client that sees a gap re-syncs from REST
(docs/live.md). Sequence numbers are bumped with `UPDATE … RETURNING` so a message with a
higher seq always carries a newer (or equal) state.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Iterable
from typing import Any

import orjson
from channels.layers import get_channel_layer
from django.db import connection, transaction

from studies.choices import ACTIVE_STATES
from studies.models import Simulation, Study

log = logging.getLogger(__name__)

ACTIVE = {str(s) for s in ACTIVE_STATES}

RUN_FIELDS = (
    "state",
    "phase",
    "attempt",
    "end_reason",
    "message",
    "trust",
    "objectives",
    "wait_reason",
    "wait_detail",
    "iterations",
    "started_at",
    "finished_at",
)


def run_group(run_id) -> str:
    return f"run.{run_id}"


def study_group(study_id) -> str:
    return f"study.{study_id}"


def send(group: str, message: dict[str, Any]) -> None:
    """Hand a message to the channel layer; a failure loses only the courier, not the data."""
    send_many([(group, message)])


def send_many(messages: list[tuple[str, dict[str, Any]]]) -> None:
    """Hand messages to the channel layer, in order, without waiting for them to go out."""
    if messages:
        _courier.post(messages)


class _Courier:
    """One event-loop thread per process that sends live events to the channel layer.

    Callers are synchronous (request threads, Celery tasks). Running `group_send` through
    `async_to_sync` made each call wait for Redis, and outside the web server it built a new
    event loop, a thread and a Redis connection for every message. Here the messages go into
    one queue, drained in order by one task (a run's events keep their seq order), and the
    caller goes on at once: the channel layer is a courier that may drop messages, and clients
    repair gaps from REST (docs/live.md).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue | None = None
        self._pid = 0

    def post(self, messages: list[tuple[str, dict[str, Any]]]) -> None:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():  # first use, or a forked child
                self._start()
            loop, queue = self._loop, self._queue
        assert loop is not None and queue is not None
        try:
            loop.call_soon_threadsafe(queue.put_nowait, list(messages))
        except RuntimeError as exc:  # the loop is gone (interpreter shutdown)
            log.warning("live events not delivered: %s", exc)

    def _start(self) -> None:
        loop = asyncio.new_event_loop()
        queue: asyncio.Queue = asyncio.Queue()
        thread = threading.Thread(
            target=self._run, args=(loop, queue), name="live-courier", daemon=True
        )
        thread.start()
        self._loop, self._queue, self._pid = loop, queue, os.getpid()

    @staticmethod
    def _run(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue) -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(_Courier._drain(queue))

    @staticmethod
    async def _drain(queue: asyncio.Queue) -> None:
        layer = get_channel_layer()
        while True:
            for group, message in await queue.get():
                if layer is None:
                    continue
                try:
                    await layer.group_send(group, {"type": "event", "data": message})
                except Exception as exc:  # noqa: BLE001 — clients re-sync from REST on gaps
                    log.warning("live event to %s not delivered: %s", group, exc)


_courier = _Courier()


def publish_runs_changed(run_ids: Iterable, *, refresh_when_done: bool = False) -> None:
    """After commit: a `state` event per run and one `runs` event per study. With
    `refresh_when_done`, a study none of whose runs is active any more is refreshed (its
    state derived from its runs'): the event's progress counts say so, no query more."""
    ids = [str(i) for i in run_ids]
    if ids:
        transaction.on_commit(lambda: _publish_now(ids, refresh_when_done=refresh_when_done))


def _publish_now(ids: list[str], *, refresh_when_done: bool = False) -> None:
    """One statement takes the runs' event seqs and their studies' seqs and progress counts
    (this runs for every change of every run: admission, start, end)."""
    with connection.cursor() as cur:
        cur.execute(_PUBLISH_SQL, {"ids": ids})
        runs_json, studies_json = cur.fetchone()
    rows = _json(runs_json)
    studies = {str(s["id"]): s for s in _json(studies_json)}
    by_study: dict[str, list[dict[str, Any]]] = {}
    messages = []
    for row in rows:
        run = {k: v for k, v in row.items() if k not in ("study_id", "event_seq")}
        state = {"type": "state", "id": run["id"], "seq": row["event_seq"], "run": run}
        messages.append((run_group(run["id"]), state))
        by_study.setdefault(str(row["study_id"]), []).append(run)
    send_many(messages)
    for study_id, runs in by_study.items():
        study = studies.get(study_id)
        if study is not None:
            _send_study(study_id, kind="runs", row=study, payload={"runs": runs})
            if refresh_when_done and not set(_json(study["progress"])) & ACTIVE:
                from studies.tasks import refresh_study

                # of two last runs ending together, the later commit sees the other one ended
                refresh_study.delay(study_id)


def _json(value: Any) -> Any:
    return orjson.loads(value) if isinstance(value, str | bytes) else value


_RUN_COLUMNS = ", ".join(("id", "study_id", "index", "parameters", "event_seq", *RUN_FIELDS))
_PROGRESS = (  # a study's runs counted by state, as {"completed": 3, …}
    "(SELECT coalesce(json_object_agg(p.state, p.n), '{{}}') FROM (SELECT state, count(*) AS n"
    " FROM {runs} WHERE study_id = {study} GROUP BY state) AS p)"
)
_PUBLISH_SQL = f"""
WITH r AS (
    UPDATE {Simulation._meta.db_table} SET event_seq = event_seq + 1
    WHERE id = ANY(%(ids)s::uuid[]) RETURNING {_RUN_COLUMNS}
), s AS (
    UPDATE {Study._meta.db_table} st SET event_seq = st.event_seq + 1
    FROM (SELECT DISTINCT study_id FROM r) AS d WHERE st.id = d.study_id
    RETURNING st.id, st.event_seq, st.state,
        {_PROGRESS.format(runs=Simulation._meta.db_table, study="st.id")} AS progress
)
SELECT (SELECT coalesce(json_agg(r), '[]') FROM r), (SELECT coalesce(json_agg(s), '[]') FROM s)
"""


def publish_study(*, study_id, kind: str, payload: dict[str, Any]) -> None:
    """Send a study event now (callers are already after commit). One statement takes the
    event's seq and counts the study's runs by state."""
    runs = Simulation._meta.db_table
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
    send(
        study_group(study_id),
        {
            "type": kind,
            "id": str(study_id),
            "seq": int(row["event_seq"]),
            "state": row["state"],
            "progress": _json(row["progress"]),
            **payload,
        },
    )
