"""The live courier: messages to websocket subscribers through the Channels layer.

The database is the record; the channel layer is a courier that may drop messages. Every
message carries its object's increasing `seq` (taken in PostgreSQL by whoever publishes,
studies.events for runs and studies); a client that sees a gap re-syncs from REST
(docs/live.md).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import threading
from collections.abc import Sequence
from typing import Any, cast

import orjson
import redis
from channels.layers import get_channel_layer
from django.conf import settings

log = logging.getLogger(__name__)


def run_group(run_id) -> str:
    return f"run.{run_id}"


def study_group(study_id) -> str:
    return f"study.{study_id}"


def watch_key(run_id) -> str:
    """The Redis key that marks a run as followed by a websocket client (telemetry.watch
    sets it while a run subscription lasts)."""
    return f"wt:watched:run:{run_id}"


@functools.cache
def redis_client() -> redis.Redis:
    """One process-wide Redis client for the watch marks (Django's cache would connect anew
    for every request under ASGI)."""
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)


def runs_watched(run_ids: Sequence[str]) -> set[str]:
    """Of these runs (ids as text), those a websocket client follows now, in one Redis round
    trip; all of them when Redis cannot say."""
    if not run_ids:
        return set()
    try:
        keys = [watch_key(run_id) for run_id in run_ids]
        marks = cast(list[Any], redis_client().mget(keys))  # the sync client: a list
    except redis.RedisError as exc:  # when in doubt, publish
        log.warning("cannot tell which runs are watched: %s", exc)
        return set(run_ids)
    return {run_id for run_id, mark in zip(run_ids, marks, strict=True) if mark is not None}


def send(group: str, message: dict[str, Any]) -> None:
    """Hand a message to the channel layer; a failure loses only the courier, not the data."""
    send_many([(group, message)])


def send_many(messages: list[tuple[str, dict[str, Any]]]) -> None:
    """Hand messages to the channel layer, in order, without waiting for them to go out."""
    if messages:
        _courier.post(messages)


def send_to_consumers(messages: list[tuple[str, dict[str, Any]]]) -> None:
    """Hand the consumers of groups a message each, as it is (its `type` names the consumer's
    handler): orders to the consumers, not events for their clients. The same courier and
    order as live events, and the same lot: a message may be lost (tenancy.sockets says
    what repairs it)."""
    if messages:
        _courier.post(messages, raw=True)


class Courier:
    """One event-loop thread per process that sends live events to the channel layer.

    Callers are synchronous (request threads, Celery tasks). Running `group_send` through
    `async_to_sync` made each call wait for Redis, and outside the web server it built a new
    event loop, a thread and a Redis connection for every message. Here the messages go into
    one queue, drained in order by one task (a run's events keep their seq order), and the
    caller goes on at once: the channel layer is a courier that may drop messages, and clients
    repair gaps from REST (docs/live.md).

    A message is encoded to JSON here, once, and travels as text: the channel layer makes
    one PUBLISH per group, and each subscriber sends the text as it is (no encoding per
    client).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue | None = None
        self._pid = 0

    def post(self, messages: list[tuple[str, dict[str, Any]]], *, raw: bool = False) -> None:
        """Queue (group, message) pairs: live events (encoded and sent as `event`), or
        with `raw` channel-layer messages sent as they are."""
        with self._lock:
            if self._loop is None or self._pid != os.getpid():  # first use, or a forked child
                self._start()
            loop, queue = self._loop, self._queue
        assert loop is not None and queue is not None
        try:
            loop.call_soon_threadsafe(queue.put_nowait, (raw, list(messages)))
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
        loop.run_until_complete(Courier._drain(queue))

    @staticmethod
    async def _drain(queue: asyncio.Queue) -> None:
        layer = get_channel_layer()
        while True:
            raw, messages = await queue.get()
            for group, message in messages:
                if layer is None:
                    continue
                try:
                    # encoded once for the whole group: every subscriber sends the same text
                    sent = message if raw else {"type": "event", "text": encoded(message)}
                    await layer.group_send(group, sent)
                except Exception as exc:  # noqa: BLE001 — clients re-sync from REST on gaps
                    log.warning("live event to %s not delivered: %s", group, exc)


def warm_up() -> None:
    """Start the courier now (its thread, event loop and Redis connection) with a message to
    a group nobody subscribes to: at a process's start-up, not with the first live events
    (when 20 runs start at once, those waited behind it)."""
    send("windtunnel.startup", {"type": "startup"})


def encoded(message: dict[str, Any]) -> str:
    """A live message as the JSON text its subscribers receive (orjson: NaN/Inf never occur,
    the payloads carry None for them)."""
    return orjson.dumps(message).decode()


_courier = Courier()
