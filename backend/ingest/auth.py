"""Who calls the agents' API, and how large a body it may send: decided from the request's
headers and URL, before a byte of its body is read.

A run's agent holds its attempt's bearer token, an HMAC of the run and the attempt under the
portal's key (studies.transitions.run_token). An agent that names its attempt in the URL
(`?attempt=N`, every call of agents since 1.2) is checked by recomputing that HMAC: no
database, no body. An older agent names it only in the body; its token is then checked
against the run's row (the current attempt's hash, or an earlier attempt's token, whose agent
the fences tell 409 to stop). Anyone else is a 401 whatever the body holds, and the body stays
unread.

An authenticated caller's body is then capped by its declared length (`Content-Length`):
missing, a 411; above the endpoint's limit, a 413 naming the limit; never read past it.
Both the ASGI gate (ingest.api.gate) and the views apply these, the same way.
"""

from __future__ import annotations

import hmac
from typing import Any

from django.conf import settings

from core.exceptions import ApplicationError, ErrorCode
from core.ids import parse_uuid
from dispatch.pilots import WorkerAuth, worker_token
from studies.models import Run
from studies.transitions import hash_run_token, run_token_is_of

MAX_ATTEMPT = 2**31 - 1  # the attempt column's range (agent-messages.json's Attempt)
# a heartbeat is ~100 bytes, a pilot's heartbeat with 4,096 attempts and its cache ~300 kB
MESSAGE_MAX_BYTES = 1024 * 1024


class RunTokenRefused(ApplicationError):
    """401: no token, or not a token the portal gave this run (telling nothing of the run)."""

    status = 401

    def __init__(self) -> None:
        super().__init__("missing or wrong run token", code=ErrorCode.UNAUTHENTICATED)


def bearer_token(authorization: str) -> str:
    """The token of an `Authorization: Bearer …` header ('' for anything else)."""
    return authorization[7:].strip() if authorization[:7].lower() == "bearer " else ""


def attempt_named(raw: str | None) -> int | None:
    """The attempt a URL names (`?attempt=N`), or None when it names none or not a whole
    number from 1 to MAX_ATTEMPT (the caller is then authenticated as an older agent, and
    told what was wrong with it only afterwards: attempt_required)."""
    if raw is None or not raw.isascii() or not raw.isdigit() or len(raw) > 10:
        return None
    attempt = int(raw)
    return attempt if 1 <= attempt <= MAX_ATTEMPT else None


def attempt_required(raw: str | None) -> int:
    """The attempt a URL must name (archive/, case/), or a 400 saying what to send."""
    attempt = attempt_named(raw)
    if attempt is not None:
        return attempt
    if raw is None or not raw.lstrip("-").isdigit():
        raise ApplicationError(
            f"give ?attempt=N, the attempt the agent was started for; got {(raw or '')[:20]!r}",
            field="attempt",
        )
    raise ApplicationError(
        f"attempt must be a whole number from 1 to {MAX_ATTEMPT}, got {raw[:20]}",
        field="attempt",
    )


def run_caller(*, run_id: Any, token: str, attempt: int | None) -> int:
    """The attempt of the run `run_id` whose token `token` is; RunTokenRefused (401) for any
    other caller. With `attempt` (named by the URL) the token must be that attempt's, and no
    database is asked; without, it may be any attempt's so far (the run's row says how many).
    Whether that attempt still takes reports is the fences' to say (409: views,
    studies.transitions, telemetry.ingest), once the report is read: a report must name the
    same attempt (reported_attempt_check)."""
    pk = parse_uuid(run_id)
    if not token or pk is None:
        raise RunTokenRefused()
    if attempt is not None:
        if run_token_is_of(token, run_id=pk, attempt=attempt):
            return attempt
        raise RunTokenRefused()
    row = Run.objects.filter(pk=pk).values_list("token_hash", "attempt").first()
    if row is None:
        raise RunTokenRefused()
    token_hash, current = row
    if token_hash and hmac.compare_digest(hash_run_token(token), token_hash):
        return current
    for earlier in range(current - 1, 0, -1):  # its agent, if still alive, is told to stop
        if run_token_is_of(token, run_id=pk, attempt=earlier):
            return earlier
    raise RunTokenRefused()


def reported_attempt_check(*, reported: Any, attempt: int) -> None:
    """A report names the attempt its token is of (RunTokenRefused otherwise: a token opens
    its own attempt only)."""
    if reported != attempt:
        raise RunTokenRefused()


def worker_caller(*, worker_id: Any, token: str) -> None:
    """WorkerAuth (401) unless `token` is the pool worker's (an HMAC of its id under the
    portal's key: no database; whether the worker still exists is the view's to ask)."""
    pk = parse_uuid(worker_id)
    if pk is None or not token or not hmac.compare_digest(token, worker_token(worker_id=pk)):
        raise WorkerAuth()


def body_limit(action: str) -> int:
    """The largest body an ingest endpoint takes, in bytes (`action`: the URL's last part)."""
    if action in ("telemetry", "state"):  # up to 200,000 points and 5,000 log lines
        return settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    if action == "archive":
        return settings.WINDTUNNEL["ARCHIVE_MAX_MB"] * 1024 * 1024
    if action == "case":
        return 0  # a GET: no body
    return MESSAGE_MAX_BYTES


def _size(limit: int) -> str:
    if limit >= 1024 * 1024:
        return f"{limit / (1024 * 1024):g} MB ({limit:,} bytes)"
    return f"{limit:,} bytes"


BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def body_length(*, declared: str | None, method: str, limit: int, action: str) -> int:
    """The body length a request declares, checked against `limit` before anything is read:
    a POST or PUT without a Content-Length (a chunked body has none) is a 411, a body above
    the limit a 413. A GET without one has no body (0)."""
    if declared is None or declared == "":
        if method not in BODY_METHODS:
            return 0
        raise ApplicationError(
            f"the {action} endpoint takes a body of declared length: send Content-Length "
            f"(at most {_size(limit)}), not a chunked body",
            code=ErrorCode.LENGTH_REQUIRED,
            status=411,
        )
    if not declared.isascii() or not declared.strip().isdigit():
        raise ApplicationError(
            f"Content-Length must be a whole number of bytes, got {declared[:20]!r}",
            code=ErrorCode.LENGTH_REQUIRED,
            status=411,
        )
    length = int(declared)
    if length > limit:
        what = "takes no body" if limit == 0 else f"takes at most {_size(limit)}"
        raise ApplicationError(
            f"the body is {_size(length)}; the {action} endpoint {what}"
            + (
                " (a telemetry batch holds at most 200,000 points and 5,000 log lines: send "
                "smaller batches)"
                if action in ("telemetry", "state")
                else ""
            ),
            code=ErrorCode.BODY_TOO_LARGE,
            status=413,
        )
    return length
