"""Token authentication for the REST API and the websocket routes."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone
from rest_framework import authentication, exceptions

from tenancy.models import TOKENS_PAGE, ApiToken, hash_token, utc_text

#: the close code of a websocket whose `?token=` is refused (as the streams' own 4401)
CLOSE_TOKEN_REFUSED = 4401
#: a close frame's reason is at most 123 bytes (RFC 6455)
CLOSE_REASON_MAX = 123
#: last_used_at is written at most this often per token (not on every request)
LAST_USED_PRECISION = timedelta(seconds=60)


class TokenRefused(Exception):
    """A key that opens nothing; the message says why and where to get a new one, `short`
    the same within a websocket close frame's 123 bytes."""

    def __init__(self, message: str, *, short: str, code: str) -> None:
        super().__init__(message)
        self.message = message
        self.short = short
        self.code = code


def api_token_authenticate(*, raw: str) -> AbstractBaseUser:
    """The user a raw key signs in (its use noted in last_used_at), or TokenRefused saying
    why: unknown or revoked (or its user deactivated), or expired (when)."""
    return api_token_check(raw=raw).user


def api_token_check(*, raw: str) -> ApiToken:
    """The token of a raw key, its user loaded and its use noted, or TokenRefused (as
    api_token_authenticate)."""
    token = ApiToken.objects.select_related("user").filter(key_hash=hash_token(raw)).first()
    if token is None or not token.user.is_active:
        raise TokenRefused(
            "Invalid or revoked API token. Make a new one under API tokens in the dashboard "
            f"({TOKENS_PAGE}), or sign in again (windtunnel login).",
            short=f"Invalid or revoked API token; make a new one at {TOKENS_PAGE}",
            code="authentication_failed",
        )
    now = timezone.now()
    if token.expires_at is not None and token.expired(now):
        when = utc_text(token.expires_at)
        raise TokenRefused(
            f"This API token ({token.name!r}) expired {when}. Make a new one under API tokens "
            f"in the dashboard ({TOKENS_PAGE}), or sign in again (windtunnel login).",
            short=f"API token expired {when}; make a new one at {TOKENS_PAGE}",
            code="token_expired",
        )
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_PRECISION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token


class ApiTokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Token wt_…` (or `Bearer wt_…`)."""

    keywords = ("token", "bearer")

    def authenticate(self, request) -> tuple[Any, None] | None:
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower().decode() not in self.keywords:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Authorization header must be 'Token <key>'.")
        raw = header[1].decode(errors="replace")
        if not raw.startswith(ApiToken.PREFIX):
            return None  # not ours (e.g. a run token on the ingest API)
        try:
            user = api_token_authenticate(raw=raw)
        except TokenRefused as exc:
            raise exceptions.AuthenticationFailed(exc.message, code=exc.code) from None
        return user, None

    def authenticate_header(self, request) -> str:
        return "Token"


class WebsocketAuthMiddleware:
    """Session auth (cookies) as Channels does it, plus `?token=wt_…` for scripts. A token
    that is given but refused (unknown, revoked, expired) closes the socket with 4401 and the
    reason, whatever the session: as on HTTP, a bad credential is not ignored."""

    def __init__(self, inner) -> None:
        self.inner = AuthMiddlewareStack(TokenQueryMiddleware(inner))

    async def __call__(self, scope, receive, send):
        return await self.inner(scope, receive, send)


class TokenQueryMiddleware:
    """`?token=wt_…` on a websocket's URL: its user in the scope (and the token, as
    `api_token`: tenancy.credentials), or the socket closed."""

    def __init__(self, inner) -> None:
        self.inner = inner

    async def __call__(self, scope, receive, send):
        query = parse_qs(scope.get("query_string", b"").decode(errors="replace"))
        raw = (query.get("token") or [""])[0]
        if raw:
            try:
                token = await database_sync_to_async(api_token_check)(raw=raw)
            except TokenRefused as exc:
                await refuse(receive, send, reason=exc.short)
                return None
            scope = dict(scope, user=token.user, api_token=token)
        return await self.inner(scope, receive, send)


async def refuse(receive, send, *, reason: str) -> None:
    """Accept the websocket's handshake, then close it with CLOSE_TOKEN_REFUSED and `reason`
    (cut to what a close frame holds): a browser or script can read why, which a refused
    handshake (HTTP 403) would not tell it."""
    message = await receive()
    if message.get("type") != "websocket.connect":
        return
    await send({"type": "websocket.accept"})
    await send(
        {"type": "websocket.close", "code": CLOSE_TOKEN_REFUSED, "reason": close_reason(reason)}
    )


def close_reason(text: str) -> str:
    """`text` cut to what a close frame holds (CLOSE_REASON_MAX bytes of UTF-8)."""
    data = text.encode()
    if len(data) > CLOSE_REASON_MAX:
        data = data[: CLOSE_REASON_MAX - 3].decode(errors="ignore").encode() + "…".encode()
    return data.decode()
