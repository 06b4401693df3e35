"""Token authentication for the REST API and the websocket routes."""

from __future__ import annotations

from typing import Any

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from django.utils import timezone
from rest_framework import authentication, exceptions

from tenancy.models import ApiToken, hash_token


def user_for_token(raw: str):
    try:
        token = ApiToken.objects.select_related("user").get(key_hash=hash_token(raw))
    except ApiToken.DoesNotExist:
        return None
    if not token.user.is_active:
        return None
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now())
    return token.user


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
        user = user_for_token(raw)
        if user is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked API token.")
        return user, None

    def authenticate_header(self, request) -> str:
        return "Token"


class WebsocketAuthMiddleware:
    """Session auth (cookies) as Channels does it, plus `?token=wt_…` for scripts."""

    def __init__(self, inner) -> None:
        self.inner = AuthMiddlewareStack(_TokenQueryMiddleware(inner))

    async def __call__(self, scope, receive, send):
        return await self.inner(scope, receive, send)


class _TokenQueryMiddleware:
    def __init__(self, inner) -> None:
        self.inner = inner

    async def __call__(self, scope, receive, send):
        from urllib.parse import parse_qs

        query = parse_qs(scope.get("query_string", b"").decode())
        raw = (query.get("token") or [""])[0]
        if raw:
            user = await database_sync_to_async(user_for_token)(raw)
            if user is not None:
                scope = dict(scope, user=user)
        return await self.inner(scope, receive, send)
