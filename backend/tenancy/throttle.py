"""Throttling: sign-in attempts, for every way to sign in: an API token (POST
/api/v1/auth/token/), the web UI's session (POST /api/v1/auth/login/), and the login forms of
the Django admin and of the browsable API (`login_throttled`); and costly requests per tenant
(`tenant_rate_check`: study previews).

Two limits, both answered 429 with Retry-After and a message that says when to try again:

- Per client address: at most LOGIN_ATTEMPTS_PER_MINUTE attempts a minute, whatever the
  usernames (one place guessing many accounts' passwords).
- Per username, from anywhere: after LOGIN_FAILURES_BEFORE_BACKOFF failures in a row, each
  further failure locks the username for twice as long as the one before (15 s, 30 s, 1 min,
  … up to LOGIN_BACKOFF_MAX_SECONDS); a success starts it afresh. While locked even the right
  password is refused, or the answers would tell an attacker which guess was right.

The client address is REMOTE_ADDR, unless that is one of WINDTUNNEL_TRUSTED_PROXIES (addresses
or networks; none by default): then it is the rightmost address in X-Forwarded-For that is not
a trusted proxy, i.e. the one the closest trusted proxy saw. A client that sends
X-Forwarded-For itself changes nothing.

Per tenant, a costly kind of request (a study preview checks and lays out a whole parameter
space): at most so many a minute from all the tenant's members and tokens together, counted
per calendar minute; one more is answered 429 with Retry-After (the minute's end) and a
message. Another tenant is not affected.

The counts live in the cache (Redis), shared by every process of the portal.
"""

from __future__ import annotations

import functools
import hashlib
import ipaddress
import math
import time
import unicodedata
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse, HttpResponseBase

from core.exceptions import Throttled
from orchestration.backoff import backoff_delay

KEY_PREFIX = "wt-login:"
RATE_PREFIX = "wt-rate:"  # of tenant_rate_check
WINDOW_SECONDS = 60  # of the per-address limit
BACKOFF_FIRST_SECONDS = 15
FAILURES_REMEMBERED_SECONDS = 24 * 3600  # after the last failure
clock = time.time  # seconds since the epoch (tests move it on)

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@functools.cache
def _networks(entries: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(e.strip(), strict=False) for e in entries if e.strip())


def _is_trusted_proxy(address: str) -> bool:
    networks = _networks(tuple(settings.WINDTUNNEL["TRUSTED_PROXIES"]))
    if not networks:
        return False
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in networks)


def client_address(request: Any) -> str:
    """The address a request came from: REMOTE_ADDR, or behind trusted proxies the address
    the closest of them saw (X-Forwarded-For read from the right)."""
    remote = request.META.get("REMOTE_ADDR") or ""
    if not _is_trusted_proxy(remote):
        return remote
    hops = [h.strip() for h in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
    hops = [h for h in hops if h]
    for hop in reversed(hops):
        if not _is_trusted_proxy(hop):
            return hop
    return hops[0] if hops else remote


def _username_digest(username: str) -> str:
    """One key for every spelling of a username that could sign in as the same user."""
    name = unicodedata.normalize("NFKC", username).strip().casefold()
    return hashlib.sha256(name.encode()).hexdigest()[:32]


def _count(key: str, timeout: int) -> int:
    """Add one to a counter that expires `timeout` seconds after it was made."""
    cache.add(key, 0, timeout)
    try:
        return cache.incr(key)
    except ValueError:  # it expired in between
        cache.set(key, 1, timeout)
        return 1


def _in(seconds: float) -> str:
    """When to try again, as a message says it: in 40 seconds (after 14:05:12 UTC)."""
    wait = math.ceil(seconds)
    at = datetime.fromtimestamp(clock() + wait, tz=UTC).strftime("%H:%M:%S UTC")
    span = (
        f"{wait} second{'s' if wait != 1 else ''}"
        if wait < 120
        else f"{math.ceil(wait / 60)} minutes"
    )
    return f"in {span} (after {at})"


def _address_wait(address: str) -> float | None:
    """Count an attempt from `address`; the seconds to wait when it is one too many."""
    limit = settings.WINDTUNNEL["LOGIN_ATTEMPTS_PER_MINUTE"]
    if limit <= 0:
        return None
    now = clock()
    start_key = f"{KEY_PREFIX}addr-start:{address}"
    cache.add(start_key, now, WINDOW_SECONDS)
    if _count(f"{KEY_PREFIX}addr:{address}", WINDOW_SECONDS) <= limit:
        return None
    start = cache.get(start_key) or now
    return max(start + WINDOW_SECONDS - now, 1.0)


def _username_wait(username: str) -> float | None:
    until = cache.get(f"{KEY_PREFIX}locked:{_username_digest(username)}")
    now = clock()
    return until - now if until is not None and until > now else None


def login_check(*, request: Any, username: str) -> None:
    """Before checking a password: count the attempt, and raise Throttled (429) when its
    address has tried too often this minute or its username is locked after failures."""
    wait = _address_wait(client_address(request)[:100])
    if wait is not None:
        raise Throttled(
            f"too many sign-in attempts from your address; try again {_in(wait)}",
            retry_after=math.ceil(wait),
        )
    wait = _username_wait(username)
    if wait is not None:
        raise Throttled(
            f"too many failed sign-ins for {username.strip()!r}; try again {_in(wait)}",
            retry_after=math.ceil(wait),
        )


def login_failed(*, username: str) -> None:
    """A wrong password (or an unknown username): past the free failures, lock the username
    for twice as long as the last time."""
    digest = _username_digest(username)
    key = f"{KEY_PREFIX}failures:{digest}"
    failures = _count(key, FAILURES_REMEMBERED_SECONDS)
    cache.touch(key, FAILURES_REMEMBERED_SECONDS)
    over = failures - settings.WINDTUNNEL["LOGIN_FAILURES_BEFORE_BACKOFF"]
    if over >= 0:
        delay = backoff_delay(
            over + 1,
            first=BACKOFF_FIRST_SECONDS,
            cap=settings.WINDTUNNEL["LOGIN_BACKOFF_MAX_SECONDS"],
        )
        cache.set(f"{KEY_PREFIX}locked:{digest}", clock() + delay, math.ceil(delay))


def login_succeeded(*, username: str) -> None:
    """The right password: the username's failures are forgotten."""
    digest = _username_digest(username)
    cache.delete_many([f"{KEY_PREFIX}failures:{digest}", f"{KEY_PREFIX}locked:{digest}"])


def login_throttled(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """A Django login form view (the admin's, the browsable API's) under the same limits: a
    POST is checked before the form sees it, and counts as a success only when it signed that
    username in (the form redirects); anything else is a failure."""

    @functools.wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if request.method != "POST":
            return view(request, *args, **kwargs)
        username = str(request.POST.get("username", ""))
        try:
            login_check(request=request, username=username)
        except Throttled as exc:
            return HttpResponse(
                exc.message,
                status=exc.status,
                content_type="text/plain; charset=utf-8",
                headers=exc.headers,
            )
        response = view(request, *args, **kwargs)
        user = getattr(request, "user", None)
        signed_in = (
            response.status_code in (301, 302, 303)
            and user is not None
            and user.is_authenticated
            and _username_digest(user.get_username()) == _username_digest(username)
        )
        if signed_in:
            login_succeeded(username=username)
        else:
            login_failed(username=username)
        return response

    return wrapped


def tenant_rate_check(*, tenant_id: Any, what: str, per_minute: int) -> None:
    """Count one request of a costly kind (`what`, e.g. "preview") from a tenant, and raise
    Throttled (429) when it is one more than `per_minute` this minute (0: no limit)."""
    if per_minute <= 0:
        return
    now = clock()
    minute = int(now // WINDOW_SECONDS)
    if _count(f"{RATE_PREFIX}{what}:{tenant_id}:{minute}", WINDOW_SECONDS + 1) <= per_minute:
        return
    wait = max((minute + 1) * WINDOW_SECONDS - now, 1.0)
    raise Throttled(
        f"too many {what}s from your tenant: at most {per_minute} a minute; try again {_in(wait)}",
        retry_after=math.ceil(wait),
    )
