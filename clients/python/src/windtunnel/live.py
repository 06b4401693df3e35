"""A study's live stream: the portal's websocket (`/ws/studies/{id}/`, docs/live.md) with its
sequence numbers and gap repair, or polling the REST snapshot where websockets are not
installed or the socket fails.

The protocol: connect, load the REST snapshot (its `last_seq`), apply events with a higher
seq, and on a gap (an event whose seq is not the last + 1) load the snapshot again. The
channel layer may drop messages, so a stream that stays quiet for `resync` seconds loads the
snapshot too: a lost final event cannot leave a watcher waiting.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from .models import STUDY_TERMINAL_STATES, StudyRecord, build

if TYPE_CHECKING:
    from .client import Client

try:  # optional: pip install 'windtunnel-client[live]'
    from websockets.exceptions import WebSocketException
    from websockets.sync.client import ClientConnection, connect
except ImportError:  # pragma: no cover - exercised where websockets is not installed
    connect = None  # type: ignore[assignment]


@dataclasses.dataclass(frozen=True)
class StudyEvent:
    """A change of a study: `snapshot` (loaded from REST: `study` is set), `runs` (runs
    changed state: `runs` holds them) or `study` (the study's own state)."""

    type: str
    seq: int
    state: str
    by_state: dict[str, int]
    runs: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    study: StudyRecord | None = None

    @property
    def finished(self) -> bool:
        return self.state in STUDY_TERMINAL_STATES


class StudyStream:
    """Events of one study, in order and without gaps: `next(timeout)` answers the next one,
    or None when nothing changed within `timeout` seconds. The first is a snapshot."""

    def __init__(
        self, client: Client, study_id: str, *, live: bool = True, resync: float = 10.0
    ) -> None:
        self.client = client
        self.study_id = study_id
        self.resync = resync
        self.last_seq = -1
        self.state = ""
        self.record: StudyRecord | None = None
        self.mode = "polling"
        self._ws: ClientConnection | None = None
        self._open = contextlib.ExitStack()  # the socket, closed by close()
        self._need_snapshot = True
        self._quiet_since = time.monotonic()
        if live and connect is not None and client.token:
            self._connect()

    def _connect(self) -> None:
        scheme = "wss" if self.client.url.startswith("https") else "ws"
        host = self.client.url.split("://", 1)[1]
        token = quote(self.client.token or "", safe="")
        url = f"{scheme}://{host}/ws/studies/{quote(self.study_id, safe='')}/?token={token}"
        try:
            ws = self._open.enter_context(
                connect(url, open_timeout=self.client.timeout, close_timeout=2)
            )
            first = json.loads(ws.recv(timeout=self.client.timeout))
        except (OSError, TimeoutError, ValueError, WebSocketException):
            self._open.close()
            return  # refused (4401, 4404), unreachable, or a proxy without websockets: poll
        if not isinstance(first, dict) or first.get("type") != "subscribed":
            self._open.close()
            return
        self._ws = ws
        self.mode = "websocket"

    def close(self) -> None:
        self._ws = None
        self._open.close()

    def __enter__(self) -> StudyStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def next(self, timeout: float) -> StudyEvent | None:
        """The next change within `timeout` seconds, or None."""
        if self._need_snapshot:
            self._need_snapshot = False
            return self._snapshot()
        if self._ws is None:
            time.sleep(timeout)
            return self._snapshot_if_changed()
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                if time.monotonic() - self._quiet_since >= self.resync:
                    return self._snapshot_if_changed()
                return None
            try:
                message = json.loads(self._ws.recv(timeout=left))
            except TimeoutError:
                continue
            except (OSError, ValueError, WebSocketException):
                self.close()  # the socket went away: poll from now on
                self.mode = "polling"
                return self._snapshot_if_changed()
            seq = message.get("seq")
            if message.get("type") not in ("runs", "study") or not isinstance(seq, int):
                continue  # pong, subscribed
            if seq <= self.last_seq:
                continue  # the snapshot holds it already
            if seq != self.last_seq + 1:
                return self._snapshot()  # a gap: events were dropped
            self.last_seq = seq
            self.state = str(message.get("state") or self.state)
            self._quiet_since = time.monotonic()
            return StudyEvent(
                type=str(message["type"]),
                seq=seq,
                state=self.state,
                by_state=dict(message.get("progress") or {}),
                runs=list(message.get("runs") or []),
            )

    def _snapshot(self) -> StudyEvent:
        record = build(StudyRecord, self.client.get_json("/api/v1/studies/{id}/", id=self.study_id))
        self.record = record
        self.last_seq = record.last_seq
        self.state = record.state
        self._quiet_since = time.monotonic()
        return StudyEvent(
            type="snapshot",
            seq=record.last_seq,
            state=record.state,
            by_state=dict(record.progress.by_state),
            study=record,
        )

    def _snapshot_if_changed(self) -> StudyEvent | None:
        before = (self.last_seq, self.state)
        event = self._snapshot()
        return event if (event.seq, event.state) != before else None
