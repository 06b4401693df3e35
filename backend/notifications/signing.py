"""Webhook signatures: `Windtunnel-Signature: t=<unix time>,v1=<hex HMAC-SHA256>`, the HMAC of
`"<t>.<body>"` under the webhook's secret (the scheme Stripe made familiar). The timestamp is
signed with the body, so a receiver that refuses old timestamps refuses replays too.
docs/notifications.md shows a receiver's check; `signature_verify` is the same check."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

SECRET_PREFIX = "whsec_"
HEADER = "Windtunnel-Signature"
TOLERANCE_SECONDS = 300


def secret_generate() -> str:
    """A new signing secret (shown to its creator once, stored encrypted)."""
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def signature_of(*, secret: str, timestamp: int, body: bytes) -> str:
    """The hex HMAC-SHA256 of `"<timestamp>.<body>"` under `secret`."""
    message = str(timestamp).encode() + b"." + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signature_header(*, secret: str, timestamp: int, body: bytes) -> str:
    """The value of the Windtunnel-Signature header for `body` sent at `timestamp`."""
    return f"t={timestamp},v1={signature_of(secret=secret, timestamp=timestamp, body=body)}"


def signature_verify(
    *,
    secret: str,
    header: str,
    body: bytes,
    tolerance: float = TOLERANCE_SECONDS,
    now: float | None = None,
) -> bool:
    """Whether `header` signs `body` under `secret`, with a timestamp at most `tolerance`
    seconds from `now`."""
    parts: dict[str, list[str]] = {}
    for item in header.split(","):
        name, _, value = item.strip().partition("=")
        parts.setdefault(name, []).append(value)
    try:
        timestamp = int(parts["t"][0])
    except (KeyError, ValueError):
        return False
    if abs((time.time() if now is None else now) - timestamp) > tolerance:
        return False
    expected = signature_of(secret=secret, timestamp=timestamp, body=body)
    return any(hmac.compare_digest(expected, given) for given in parts.get("v1", []))
