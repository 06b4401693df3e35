"""Websocket streams of one run or one study, authorised like the HTTP API.

A subscription to an object outside the user's tenant is refused exactly like a missing
object (close code 4404), so the socket does not tell which ids exist. A socket lives as
long as the credential that opened it: when that token is revoked or expires, that sign-in
is signed out or expires, or its user loses access, it is closed with 4401 and the reason
(tenancy.credentials, tenancy.sockets; docs/live.md).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.utils import timezone

from core.ids import parse_uuid
from core.live import run_group, study_group
from core.metrics import WEBSOCKET_CLIENTS
from studies.models import Run, Study
from telemetry.watch import mark_watched, stop_watching, watch_run
from tenancy.authentication import close_reason
from tenancy.credentials import Credential, Verdict, credential_in_scope, credentials_check
from tenancy.selectors import tenant_for_user
from tenancy.sockets import watch as credential_watch

# every message the streams send, one $defs entry per type (published to the API's schema, so
# the web UI's client is typed from it; the live tests validate what they receive with it)
LIVE_MESSAGES = Path(__file__).resolve().parent / "schemas" / "live-messages.json"

CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404


@database_sync_to_async
def _admit(model, user, pk, credential: Credential) -> tuple[Verdict, bool, int]:
    """Whether the credential still opens the API (checked after the socket joined its
    groups: an end ordered meanwhile is not missed), and whether the object is the user's
    (its seq)."""
    verdict = credentials_check([credential], now=timezone.now())[credential]
    if verdict.ended:
        return verdict, False, 0
    tenant = tenant_for_user(user=user)
    key = parse_uuid(pk)
    if tenant is None or key is None:
        return verdict, False, 0
    row = model.objects.filter(pk=key, tenant=tenant).values_list("event_seq", flat=True).first()
    return verdict, (row is not None), int(row or 0)


class _StreamConsumer(AsyncJsonWebsocketConsumer):
    model: type = Run
    kind = "run"
    counted = False  # in windtunnel_websocket_clients (core.metrics) while subscribed
    credential_groups: tuple[str, ...] = ()
    watched = False  # in the process's watch over credentials (tenancy.sockets)
    ended = False  # closed because its credential ended: nothing more is sent

    def group_for(self, pk) -> str:
        raise NotImplementedError

    async def connect(self) -> None:
        user = self.scope.get("user")
        pk = self.scope["url_route"]["kwargs"]["pk"]
        await self.accept()
        credential = credential_in_scope(self.scope)
        if user is None or not user.is_authenticated or credential is None:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.credential_groups = credential.groups
        for group in self.credential_groups:
            await self.channel_layer.group_add(group, self.channel_name)
        verdict, ok, seq = await _admit(self.model, user, pk, credential)
        if verdict.ended:
            await self.credential_ended({"reason": verdict.ended})
            return
        if not ok:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        credential_watch().add(self.channel_name, credential, expires_at=verdict.expires_at)
        self.watched = True
        self.group = self.group_for(pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        self.watching = await self.watch(pk)
        WEBSOCKET_CLIENTS.labels(stream=self.kind).inc()
        self.counted = True
        # the seq at subscription time: later events continue from here
        await self.send_json({"type": "subscribed", "id": str(pk), "object": self.kind, "seq": seq})

    async def watch(self, pk) -> asyncio.Task | None:
        """What a subscriber changes while it stays (nothing by default)."""
        return None

    async def disconnect(self, code: int) -> None:
        if self.counted:
            self.counted = False
            WEBSOCKET_CLIENTS.labels(stream=self.kind).dec()
        await stop_watching(getattr(self, "watching", None))
        if self.watched:
            self.watched = False
            credential_watch().remove(self.channel_name)
        for group in (*self.credential_groups, getattr(self, "group", None)):
            if group:
                await self.channel_layer.group_discard(group, self.channel_name)

    async def receive_json(self, content, **kwargs) -> None:
        if isinstance(content, dict) and content.get("type") == "ping":
            await self.send_json({"type": "pong"})

    async def event(self, message) -> None:
        # encoded once per group by the publisher (core.live): sent as it is
        if not self.ended:
            await self.send(text_data=message["text"])

    async def credential_ended(self, message) -> None:
        """The credential that opened this socket opens nothing any more (revoked, expired,
        signed out, its user's access ended): closed with 4401 and the reason, once."""
        if self.ended:
            return
        self.ended = True
        await self.close(code=CLOSE_UNAUTHENTICATED, reason=close_reason(message["reason"]))


class RunConsumer(_StreamConsumer):
    model = Run
    kind = "run"

    def group_for(self, pk) -> str:
        return run_group(pk)

    async def watch(self, pk) -> asyncio.Task:
        # the run's agent reports live (every 0.1 s, not 2 s) and its batches are published
        # while someone is subscribed: marked before `subscribed` goes out
        await mark_watched(parse_uuid(pk))
        return asyncio.create_task(watch_run(parse_uuid(pk)))


class StudyConsumer(_StreamConsumer):
    model = Study
    kind = "study"

    def group_for(self, pk) -> str:
        return study_group(pk)
