"""The agents' telemetry batches and `running` reports, served without Django's request
machinery when all is well.

A watched run's agent sends a batch as soon as a line comes (Nagle-style, at most one per
TELEMETRY_INTERVAL), so 20 watched runs make 200 requests a second at the 0.1 s floor, and
more at a shorter one. Through
Django's handler, its middleware and DRF, a batch cost the web process about three times the
CPU of its own work (checking and storing it). This ASGI layer in front of Django takes a
telemetry POST, reads its body and, in a thread, does exactly what IngestTelemetryView's
common case does: the body parsed and checked (message_of), the batch stored by the one
fenced statement (ingest.services.telemetry_report_fenced), the answer {stop, interval}. The
batch's live message goes to the process's courier at commit, as the view's does
(core.live): publishing from this event loop instead was tried and piled the messages up
behind the loop's other work (seconds behind, docs/benchmarks.md).

Anything else goes to Django, unchanged and with the body replayed: another path or method,
no bearer token, a body that is not JSON or does not check (Django's 400 names the field), a
body over DATA_UPLOAD_MAX_MEMORY_SIZE, or a batch the fence refused (nothing was stored: the
view tells a stranger, a stale attempt and a run the portal ended apart, as before). So
the answers are Django's for every case but the stored batch.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
from django.conf import settings
from django.db import close_old_connections

from core.exceptions import ApplicationError
from ingest import services
from ingest.api.views import message_of
from studies.choices import RunState
from studies.transitions import hash_run_token, run_report_running
from telemetry.ingest import batch_status
from telemetry.watch import interval_for, is_watched, telemetry_interval

log = logging.getLogger(__name__)

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

_PATH = re.compile(
    r"/api/v1/ingest/runs/([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}"
    r"-[0-9a-fA-F]{12})/(telemetry|state)/"
)
THREADS = 8  # batches stored at once (each holds one of the pool's 12 database connections)


class TelemetryFastPath:
    """ASGI middleware: the common telemetry batch and `running` report answered here, the
    rest by `app`."""

    def __init__(self, app: App) -> None:
        self.app = app
        self._executor = ThreadPoolExecutor(THREADS, "telemetry")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        match = _PATH.fullmatch(scope.get("path", "")) if scope["type"] == "http" else None
        if match is None or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or ())
        auth = headers.get(b"authorization", b"")
        json_body = headers.get(b"content-type", b"").split(b";")[0].strip() == b"application/json"
        if not (json_body and auth[:7].lower() == b"bearer " and len(auth) > 7):
            await self.app(scope, receive, send)
            return
        chunks, complete = await _read_body(receive, settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
        body = b"".join(chunks)
        answer = None
        if complete:
            loop = asyncio.get_running_loop()
            answer = await loop.run_in_executor(
                self._executor,
                _stored_answer if match.group(2) == "telemetry" else _running_answer,
                match.group(1),
                auth[7:].decode("latin-1"),
                body,
            )
        if answer is None:  # not the common case: Django answers it, from the same body
            await self.app(scope, _replay(body, complete, receive), send)
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(answer)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": answer})


async def _read_body(receive: Receive, limit: int) -> tuple[list[bytes], bool]:
    """The request body's chunks, and whether that is all of it (False past `limit`, or when
    the client went away: Django takes it from there)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return chunks, False
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body", False):
            return chunks, True
        if size > limit:
            return chunks, False


def _replay(body: bytes, complete: bool, receive: Receive) -> Receive:
    """`receive` as if nothing had been read: the body read so far, then the rest."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": not complete}
        return await receive()

    return replayed


def _running_answer(run_id: str, token: str, body: bytes) -> bytes | None:
    """The answer to an agent's `running` report that checks and that the fenced statement
    took (IngestStateView's common case for it: one statement); None for anything else (a
    final report, a body that does not check, a repeat, a stale attempt, a wrong token:
    Django's view answers those). When 20 runs start at once their reports come together,
    and through Django each cost the web process several times its own work, while the
    runs' first live lines waited behind them."""
    close_old_connections()
    try:
        try:
            data = message_of(orjson.loads(body), "StateReport")
        except (orjson.JSONDecodeError, ApplicationError):
            return None
        if not isinstance(data, dict) or data.get("state") != RunState.RUNNING:
            return None
        stop = run_report_running(
            run_id=run_id, attempt=data["attempt"], token_hash=hash_run_token(token)
        )
        if stop is None:
            return None
        return orjson.dumps({"stop": stop, "interval": telemetry_interval(run_id)})
    finally:
        close_old_connections()


def _stored_answer(run_id: str, token: str, body: bytes) -> bytes | None:
    """The answer to a batch that checks and that the fenced statement stored; None when it
    does not check or nothing was stored (Django's view then answers: it stores nothing
    twice, since the fence stored nothing)."""
    close_old_connections()  # as Django does around each request (request_started/finished)
    try:
        try:
            data = message_of(orjson.loads(body), "TelemetryBatch")
        except (orjson.JSONDecodeError, ApplicationError):
            return None
        if not isinstance(data, dict) or "attempt" not in data:
            return None
        watched = is_watched(run_id)
        try:
            stop = services.telemetry_report_fenced(
                run_id=run_id,
                attempt=data["attempt"],
                token_hash=hash_run_token(token),
                series=data.get("series") or {},
                log=data.get("log") or [],
                watched=watched,
                status=batch_status(data),
            )
        except ApplicationError:  # the series did not check: nothing was stored
            return None
        if stop is None:
            return None
        return orjson.dumps({"stop": stop, "interval": interval_for(watched=watched)})
    finally:
        close_old_connections()
