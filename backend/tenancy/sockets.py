"""A web process's watch over the credentials of its open websockets.

Whoever ends a credential (a revoked token, a sign-out, a deactivated account) orders its
websockets closed through the channel layer (tenancy.credentials). That order may be lost
(the layer is Redis pub/sub: at most once), and an expiry has nobody to give it. So each
web process also keeps the credentials of its open websockets and checks them all at once
every WEBSOCKET_RECHECK_SECONDS (at most three queries, whatever the number of sockets), and
each at the moment it expires: a socket whose credential ended is sent the same order, again
at each check until it has gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections.abc import Collection
from datetime import datetime

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.utils import timezone

from tenancy.credentials import ENDED, Credential, Verdict, credentials_check

log = logging.getLogger(__name__)

#: after a failed check (the database away), the next one waits this long at least
RETRY_AFTER = 1.0


def recheck_seconds() -> float:
    return float(settings.WINDTUNNEL["WEBSOCKET_RECHECK_SECONDS"])


class CredentialWatch:
    """The open websockets of one event loop (a web process), by channel name: their
    credentials, and when each expires."""

    def __init__(self) -> None:
        self.open: dict[str, Credential] = {}
        self.expires: dict[str, datetime] = {}
        self.changed = asyncio.Event()
        self.task: asyncio.Task | None = None

    def add(self, channel: str, credential: Credential, *, expires_at: datetime | None) -> None:
        self.open[channel] = credential
        if expires_at is not None:
            self.expires[channel] = expires_at
        self.changed.set()  # it may expire before the watch would have looked again
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self.run())

    def remove(self, channel: str) -> None:
        self.open.pop(channel, None)
        self.expires.pop(channel, None)

    async def run(self) -> None:
        """Until no socket is left: every socket at each recheck, a socket's credential at
        the moment it expires."""
        next_all = time.monotonic() + recheck_seconds()
        while self.open:
            wait = next_all - time.monotonic()
            if self.expires:
                soonest = min(self.expires.values())
                wait = min(wait, (soonest - timezone.now()).total_seconds())
            if wait > 0:
                self.changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.changed.wait(), wait)
                continue  # woken by a new socket, or due: work out what is due
            if time.monotonic() >= next_all:
                next_all = time.monotonic() + recheck_seconds()
                due = list(self.open)
            else:
                now = timezone.now()
                due = [channel for channel, at in self.expires.items() if at <= now]
            try:
                await self.check(due)
            except Exception:  # noqa: BLE001 — the watch outlives a database hiccup
                log.warning("websocket credentials not checked", exc_info=True)
                await asyncio.sleep(RETRY_AFTER)

    async def check(self, channels: Collection[str]) -> None:
        """Check these sockets' credentials (one round trip); order closed those that ended."""
        sockets = [(channel, self.open[channel]) for channel in channels if channel in self.open]
        if not sockets:
            return
        verdicts = await _verdicts({credential for _, credential in sockets})
        layer = get_channel_layer()
        for channel, credential in sockets:
            if channel not in self.open:
                continue  # gone meanwhile
            verdict = verdicts[credential]
            if verdict.ended:
                self.expires.pop(channel, None)
                if layer is not None:
                    await layer.send(channel, {"type": ENDED, "reason": verdict.ended})
            elif verdict.expires_at is not None:
                self.expires[channel] = verdict.expires_at  # a sign-in kept alive lives on
            else:
                self.expires.pop(channel, None)


@database_sync_to_async
def _verdicts(credentials: Collection[Credential]) -> dict[Credential, Verdict]:
    return credentials_check(credentials, now=timezone.now())


_watches: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, CredentialWatch] = (
    weakref.WeakKeyDictionary()
)


def watch() -> CredentialWatch:
    """The watch of the running event loop (one per web process)."""
    loop = asyncio.get_running_loop()
    found = _watches.get(loop)
    if found is None:
        found = _watches[loop] = CredentialWatch()
    return found
