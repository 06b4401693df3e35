"""Who is watching a run, so that its agent reports live only while someone looks.

A run's agent sends its telemetry every TELEMETRY_INTERVAL (0.1 s) while a websocket client
is subscribed to the run, and every TELEMETRY_IDLE_INTERVAL (2 s) while nobody is: on a
loaded machine most runs of a big study are never watched, and each batch costs the portal a
request. The ingest API tells the agent which interval applies in every answer
(docs/agent-protocol.md); a new subscriber gets live points within one idle interval.

A subscription marks the run as watched in Redis for WATCH_TTL seconds and renews the mark
every WATCH_REFRESH seconds while the socket is open. The mark is not removed when a socket
closes (another may still be open): it runs out within WATCH_TTL. The marks (core.live's
`watch_key`) use core.live's one process-wide Redis client; studies.events reads them too,
to publish a run's state events only while it is watched.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import redis
from django.conf import settings

from core.live import redis_client, watch_key

log = logging.getLogger(__name__)

WATCH_TTL = 30.0
WATCH_REFRESH = 10.0


def _mark(run_id) -> None:
    redis_client().set(watch_key(run_id), 1, ex=int(WATCH_TTL))


async def mark_watched(run_id) -> None:
    """Mark the run as watched now (a subscriber awaits this before it is told `subscribed`,
    so every batch stored after its REST snapshot is published to it)."""
    try:
        await asyncio.to_thread(_mark, run_id)
    except redis.RedisError as exc:  # without the mark the agent is only slower
        log.warning("cannot mark run %s as watched: %s", run_id, exc)


async def watch_run(run_id) -> None:
    """Keep the run marked as watched until cancelled (the socket's lifetime)."""
    while True:
        await asyncio.sleep(WATCH_REFRESH)
        await mark_watched(run_id)


async def stop_watching(task: asyncio.Task | None) -> None:
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


# runs found watched, by id: until when this process takes that answer without asking Redis
_seen_watched: dict[str, float] = {}
SEEN_WATCHED_FOR = 1.0


def is_watched(run_id) -> bool:
    """Whether a websocket client follows the run (True when Redis cannot say).

    A yes is remembered by the process for SEEN_WATCHED_FOR seconds: a watched run's agent
    sends a batch every few tens of milliseconds, and a Redis round trip for each cost the
    request more than its points did. A mark outlives its last watcher by up to WATCH_TTL
    anyway, so a remembered yes only publishes (and paces) for up to a second more. A no is
    never remembered: a new subscriber's mark counts from the next batch on, as before.
    """
    key, now = str(run_id), time.monotonic()
    if _seen_watched.get(key, 0.0) > now:
        return True
    try:
        watched = bool(redis_client().exists(watch_key(run_id)))
    except redis.RedisError as exc:  # when in doubt, stay live
        log.warning("cannot tell whether run %s is watched: %s", run_id, exc)
        return True
    if watched:
        if len(_seen_watched) > 10_000:  # old answers go now and then (never many runs live)
            for stale in [k for k, until in list(_seen_watched.items()) if until <= now]:
                _seen_watched.pop(stale, None)
        _seen_watched[key] = now + SEEN_WATCHED_FOR
    return watched


def telemetry_interval(run_id) -> float:
    """The interval the run's agent should send telemetry at, from now on."""
    return interval_for(watched=is_watched(run_id))


def interval_for(*, watched: bool) -> float:
    key = "TELEMETRY_INTERVAL" if watched else "TELEMETRY_IDLE_INTERVAL"
    return settings.WINDTUNNEL[key]
