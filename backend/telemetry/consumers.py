"""Websocket streams of one run or one study, authorised like the HTTP API.

A subscription to an object outside the user's tenant is refused exactly like a missing
object (close code 4404), so the socket does not tell which ids exist.
"""

from __future__ import annotations

import asyncio

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from core.ids import parse_uuid
from core.live import run_group, study_group
from core.metrics import WEBSOCKET_CLIENTS
from studies.models import Run, Study
from telemetry.watch import mark_watched, stop_watching, watch_run
from tenancy.selectors import tenant_for_user

CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404


@database_sync_to_async
def _visible(model, user, pk) -> tuple[bool, int]:
    tenant = tenant_for_user(user=user)
    key = parse_uuid(pk)
    if tenant is None or key is None:
        return False, 0
    row = model.objects.filter(pk=key, tenant=tenant).values_list("event_seq", flat=True).first()
    return (row is not None), int(row or 0)


class _StreamConsumer(AsyncJsonWebsocketConsumer):
    model: type = Run
    kind = "run"
    counted = False  # in windtunnel_websocket_clients (core.metrics) while subscribed

    def group_for(self, pk) -> str:
        raise NotImplementedError

    async def connect(self) -> None:
        user = self.scope.get("user")
        pk = self.scope["url_route"]["kwargs"]["pk"]
        await self.accept()
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        ok, seq = await _visible(self.model, user, pk)
        if not ok:
            await self.close(code=CLOSE_NOT_FOUND)
            return
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
        if getattr(self, "group", None):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content, **kwargs) -> None:
        if isinstance(content, dict) and content.get("type") == "ping":
            await self.send_json({"type": "pong"})

    async def event(self, message) -> None:
        # encoded once per group by the publisher (core.live): sent as it is
        await self.send(text_data=message["text"])


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
