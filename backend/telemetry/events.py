"""Live events: sequence numbers in PostgreSQL, delivery through the Channels layer.

The database is the record; the channel layer is a courier that may drop messages. Every
message carries the object's increasing `seq`; a client that sees a gap re-syncs from REST
(docs/live.md). Sequence numbers are bumped with `UPDATE … RETURNING` so a message with a
higher seq always carries a newer (or equal) state.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from collections.abc import Iterable
from typing import Any

from channels.layers import get_channel_layer
from django.db import connection, transaction

from studies.models import Simulation, Study

log = logging.getLogger(__name__)

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


JSON_FIELDS = {"parameters", "objectives"}


def _jsonable(key: str, value: Any) -> Any:
    if key in JSON_FIELDS and isinstance(value, str):
        return json.loads(value)  # a raw cursor returns jsonb as text
    return value.isoformat() if hasattr(value, "isoformat") else value


def publish_runs_changed(run_ids: Iterable) -> None:
    """After commit: a `state` event per run and one `runs` event per study."""
    ids = [str(i) for i in run_ids]
    if ids:
        transaction.on_commit(lambda: _publish_now(ids))


def _publish_now(ids: list[str]) -> None:
    table = Simulation._meta.db_table
    cols = ", ".join(("id", "study_id", "index", "parameters", "event_seq", *RUN_FIELDS))
    with connection.cursor() as cur:
        cur.execute(
            f"UPDATE {table} SET event_seq = event_seq + 1 WHERE id = ANY(%s::uuid[]) RETURNING {cols}",
            [ids],
        )
        names = [c.name for c in cur.description]
        rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    by_study: dict[str, list[dict[str, Any]]] = {}
    messages = []
    for row in rows:
        run = {k: _jsonable(k, v) for k, v in row.items() if k not in ("study_id", "event_seq")}
        run["id"] = str(row["id"])
        state = {"type": "state", "id": run["id"], "seq": row["event_seq"], "run": run}
        messages.append((run_group(row["id"]), state))
        by_study.setdefault(str(row["study_id"]), []).append(run)
    send_many(messages)
    for study_id, runs in by_study.items():
        publish_study(study_id=study_id, kind="runs", payload={"runs": runs})


def publish_study(*, study_id, kind: str, payload: dict[str, Any]) -> None:
    """Send a study event now (callers are already after commit). One statement takes the
    event's seq and counts the study's runs by state."""
    runs = Simulation._meta.db_table
    with connection.cursor() as cur:
        cur.execute(
            f"UPDATE {Study._meta.db_table} SET event_seq = event_seq + 1 WHERE id = %s"
            " RETURNING event_seq, state, (SELECT coalesce(json_object_agg(state, n), '{}')"
            f" FROM (SELECT state, count(*) AS n FROM {runs} WHERE study_id = %s GROUP BY state)"
            " AS p)",
            [str(study_id), str(study_id)],
        )
        row = cur.fetchone()
    if not row:
        return
    progress = json.loads(row[2]) if isinstance(row[2], str | bytes) else row[2]
    send(
        study_group(study_id),
        {
            "type": kind,
            "id": str(study_id),
            "seq": int(row[0]),
            "state": row[1],
            "progress": progress,
            **payload,
        },
    )
