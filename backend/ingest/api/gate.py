"""The agents' API guarded before Django: who calls, and how much it may send, decided from
the request's headers and URL before a byte of its body is read.

Django's ASGI handler reads a request's whole body before any view runs, so a view that
checks the caller first still lets anyone make the server take up to the body limit (and a
telemetry body of 20 MB is parsed into several times that). Every request under
/api/v1/ingest/ passes here first:

1. its caller is authenticated (ingest.auth): a run's agent by its token and the attempt its
   URL names (an HMAC, no database) or, for agents that name it only in the body, the run's
   row; a pool worker's pilot by its token. Anyone else: 401;
2. its body is capped by its declared length (`Content-Length`): missing on a POST or PUT, a
   411; above the endpoint's limit, a 413 naming the limit;
3. a telemetry batch or a state report is then read, exactly its declared length, and handed
   to the quick path (ingest.api.fastpath); anything else goes to Django unchanged (which
   reads at most the declared length: the server frames the body by it), an archive upload
   into Django's spooled file on disk.

A refusal is answered here with the JSON error the views would give, its body unread, and
`Connection: close`: the server takes nothing more of it.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import parse_qs

import orjson
from django.db import close_old_connections

from core.exceptions import ApplicationError, NotFound, error_body
from ingest.api.fastpath import running_answer, telemetry_answer
from ingest.auth import (
    attempt_named,
    bearer_token,
    body_length,
    body_limit,
    run_caller,
    worker_caller,
)

log = logging.getLogger(__name__)

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

PREFIX = "/api/v1/ingest/"
_PATH = re.compile(r"/api/v1/ingest/(runs|workers)/([^/]{1,100})/([a-z]{1,20})/")
ENDPOINTS = {
    "runs": frozenset({"state", "heartbeat", "telemetry", "archive", "case"}),
    "workers": frozenset({"register", "lease", "heartbeat", "release"}),
}
THREADS = 8  # batches stored at once (each holds one of the pool's 12 database connections)


class IngestGate:
    """ASGI middleware: requests to the agents' API authenticated and capped before their
    bodies are read; the common telemetry batch and `running` report answered here, the rest
    by `app`."""

    def __init__(self, app: App) -> None:
        self.app = app
        self._executor = ThreadPoolExecutor(THREADS, "ingest")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not path.startswith(PREFIX):
            await self.app(scope, receive, send)
            return
        match = _PATH.fullmatch(path)
        if match is None or match.group(3) not in ENDPOINTS[match.group(1)]:
            await _refuse(send, NotFound("no such endpoint of the agents' API"))
            return
        kind, ident, action = match.groups()
        headers = dict(scope.get("headers") or ())
        token = bearer_token(headers.get(b"authorization", b"").decode("latin-1"))
        method = scope.get("method", "")
        try:
            attempt = await self._caller(kind, ident, token, _query_attempt(scope))
            length = body_length(
                declared=_header(headers, b"content-length"),
                method=method,
                limit=body_limit(action if kind == "runs" else "pilot"),
                action=action,
            )
        except ApplicationError as exc:
            await _refuse(send, exc)
            return
        quick = (
            kind == "runs"
            and action in ("telemetry", "state")
            and method == "POST"
            and _header(headers, b"content-type").split(";")[0].strip() == "application/json"
        )
        if not quick:
            await self.app(scope, receive, send)
            return
        assert attempt is not None  # a run's caller
        body, complete = await _read_body(receive, length)
        if len(body) > length:
            await _refuse(send, ApplicationError("the body is longer than its Content-Length"))
            return
        answer = None
        if complete:
            answer = await asyncio.get_running_loop().run_in_executor(
                self._executor,
                telemetry_answer if action == "telemetry" else running_answer,
                ident,
                token,
                attempt,
                body,
            )
        if answer is None:  # not the common case: Django answers it, from the same body
            await self.app(scope, _replay(body, complete, receive), send)
            return
        await _answer(send, 200, answer)

    async def _caller(self, kind: str, ident: str, token: str, attempt: int | None) -> int | None:
        """The attempt a run's caller is authenticated as (None for a pool worker), or the
        refusal (ingest.auth). The database is asked only for an agent that names its attempt
        in the body alone (in a thread: not on the event loop)."""
        if kind == "workers":
            worker_caller(worker_id=ident, token=token)
            return None
        if attempt is not None or not token:
            return run_caller(run_id=ident, token=token, attempt=attempt)
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, _run_caller_in_thread, ident, token
        )


def _run_caller_in_thread(run_id: str, token: str) -> int:
    close_old_connections()  # as Django does around each request
    try:
        return run_caller(run_id=run_id, token=token, attempt=None)
    finally:
        close_old_connections()


def _header(headers: dict[bytes, bytes], name: bytes) -> str:
    value = headers.get(name)
    return value.decode("latin-1") if value is not None else ""


def _query_attempt(scope: Scope) -> int | None:
    query = scope.get("query_string") or b""
    if b"attempt=" not in query:
        return None
    values = parse_qs(query.decode("latin-1")).get("attempt")
    return attempt_named(values[-1]) if values else None  # the last, as Django reads it


async def _read_body(receive: Receive, length: int) -> tuple[bytes, bool]:
    """The request body, and whether that is all of it (False when the client went away:
    Django takes it from there). Reading stops past `length` (the server frames the body by
    its Content-Length, so it never is)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), False
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body", False) or size > length:
            return b"".join(chunks), size <= length


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


async def _answer(send: Send, status: int, body: bytes, *, close: bool = False) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _refuse(send: Send, exc: ApplicationError) -> None:
    """The error as the views' exception handler answers it, the body left unread and the
    connection closed after the answer (so nothing more of the body is taken)."""
    body = orjson.dumps(error_body(exc.code, exc.message, exc.field, exc.details))
    await _answer(send, exc.status, body, close=True)
