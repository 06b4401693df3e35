"""Background reporting: heartbeats and telemetry batches with retries and a bounded buffer."""

from __future__ import annotations

import collections
import math
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from orchestration.agent.client import (
    Backoff,
    PortalClient,
    PortalError,
    StaleAttempt,
    TransientError,
    json_safe,
)
from orchestration.logparse import Point

__all__ = ["Reporter"]

MAX_BUFFERED_POINTS = 200_000
MAX_BATCH_POINTS = 20_000
MAX_LOG_LINES = 200  # per telemetry batch
MAX_BUFFERED_LOG_LINES = 5_000
MAX_LOG_LINE_CHARS = 2_000
INTERVAL_BOUNDS = (0.05, 60.0)  # what the portal may ask for as the telemetry interval


class Reporter:
    """Owns every non-final call to the portal while the run goes on (one thread).

    `stop_requested` is set when an answer carries ``"stop": true``; `stale` on a 409.
    Call `close()` then `flush(deadline=…)` to send what is left synchronously.
    """

    def __init__(
        self,
        *,
        client: PortalClient,
        heartbeat_interval: float,
        telemetry_interval: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.heartbeat_interval = heartbeat_interval
        self.telemetry_interval = telemetry_interval
        self.clock = clock
        self.stop_requested = threading.Event()
        self.stale = threading.Event()
        self.phase = "preparing"
        self.resources: dict[str, float | int] = {"cpu_percent": 0.0, "rss_bytes": 0}
        self._lock = threading.Lock()
        # by series: its x and y values as two columns, sent as {"x": [...], "y": [...]}
        self._series: dict[str, tuple[list[float | str], list[float | str]]] = {}
        self._points = 0
        self._dropped_points = 0
        self._log: collections.deque[str] = collections.deque()
        self._skipped_lines = 0
        self._closing = threading.Event()
        self._wakeup = threading.Event()  # new data while a batch is due: send it now
        self._thread = threading.Thread(target=self._loop, name="reporter", daemon=True)
        self._last_accepted = clock()
        self._next_telemetry = clock()
        self._retry_at = 0.0
        self._backoff = Backoff()

    # -- producers (any thread) -----------------------------------------------------------

    def add_points(self, points: Iterable[Point]) -> None:
        # the agent's busiest loop (every parsed value passes here): local names, one lock,
        # and the NaN/Infinity spelling only for the rare value that needs it
        isfinite = math.isfinite
        buffers = self._series
        added = 0
        with self._lock:
            for name, x, y in points:
                columns = buffers.get(name)
                if columns is None:
                    columns = buffers[name] = ([], [])
                if isfinite(y) and isfinite(x):
                    columns[0].append(x)
                    columns[1].append(y)
                else:
                    columns[0].append(json_safe(x))
                    columns[1].append(json_safe(y))
                added += 1
            self._points += added
            if self._points > MAX_BUFFERED_POINTS:
                self._shed_points()
        self._nudge()

    def _nudge(self) -> None:
        """Wake the sender when a batch is due (it would otherwise notice within 0.1 s)."""
        now = self.clock()
        if now >= self._next_telemetry and now >= self._retry_at:
            self._wakeup.set()

    def add_log(self, lines: Iterable[str]) -> None:
        with self._lock:
            for line in lines:
                self._log.append(line[:MAX_LOG_LINE_CHARS])
            while len(self._log) > MAX_BUFFERED_LOG_LINES:
                self._log.popleft()
                self._skipped_lines += 1
        self._nudge()

    def set_interval(self, seconds: Any) -> None:
        """Follow the portal's pace for telemetry (answers carry ``interval``: short while the
        run is watched live, long while it is not); anything but a number is ignored."""
        if type(seconds) not in (int, float) or not math.isfinite(seconds):
            return
        low, high = INTERVAL_BOUNDS
        seconds = min(max(float(seconds), low), high)
        with self._lock:
            # a faster pace applies to the wait already begun; a slower one from the next batch
            self._next_telemetry += min(0.0, seconds - self.telemetry_interval)
            self.telemetry_interval = seconds
        self._wakeup.set()

    def set_phase(self, phase: str) -> None:
        self.phase = phase

    def set_resources(self, *, cpu_percent: float, rss_bytes: int) -> None:
        self.resources = {"cpu_percent": round(cpu_percent, 1), "rss_bytes": int(rss_bytes)}

    def has_pending(self) -> bool:
        with self._lock:
            return bool(self._points or self._log or self._skipped_lines)

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        """Stop the background thread (pending data stays for `flush`)."""
        self._closing.set()
        self._wakeup.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.client.timeout + 5)

    def flush(self, *, deadline: float, sleep: Callable[[float], Any] = time.sleep) -> bool:
        """Send everything left, retrying until `deadline`; True when all was accepted."""
        backoff = Backoff()
        while self.has_pending():
            try:
                self._send_telemetry()
                backoff.reset()
            except TransientError as exc:
                if self.clock() >= deadline:
                    print(f"agent: giving up on telemetry: {exc}", file=sys.stderr)
                    return False
                sleep(min(backoff.next(), max(deadline - self.clock(), 0.0)))
            except PortalError as exc:
                print(f"agent: telemetry refused, dropped: {exc}", file=sys.stderr)
        return True

    # -- the thread -----------------------------------------------------------------------

    def _loop(self) -> None:
        while not self._closing.is_set() and not self.stale.is_set():
            now = self.clock()
            if now >= self._retry_at:
                try:
                    if now >= self._next_telemetry and self.has_pending():
                        self._next_telemetry = now + self.telemetry_interval
                        self._send_telemetry()
                    elif now - self._last_accepted >= self.heartbeat_interval:
                        self._send_heartbeat()
                    self._backoff.reset()
                except TransientError as exc:
                    delay = self._backoff.next()
                    self._retry_at = self.clock() + delay
                    print(f"agent: report failed ({exc}); retry in {delay:.1f} s", file=sys.stderr)
                except PortalError as exc:
                    print(f"agent: report refused: {exc}", file=sys.stderr)
                except StaleAttempt:
                    return  # `stale` is set; the supervisor kills the solver
                except Exception as exc:  # never let the reporter die silently
                    print(f"agent: reporter error: {exc!r}", file=sys.stderr)
            self._wakeup.wait(0.1)
            self._wakeup.clear()

    def _answer(self, answer: dict[str, Any]) -> None:
        self._last_accepted = self.clock()
        if "interval" in answer:
            self.set_interval(answer["interval"])
        if answer.get("stop"):
            self.stop_requested.set()

    def _call(self, path: str, body: dict[str, Any]) -> None:
        try:
            answer = self.client.post(path, body)
        except StaleAttempt:
            self.stale.set()
            raise
        self._answer(answer)

    def _send_heartbeat(self) -> None:
        self._call("heartbeat/", {"phase": self.phase, "resources": dict(self.resources)})

    def _send_telemetry(self) -> None:
        series, log, count = self._take_batch()
        try:
            self._call("telemetry/", {"series": series, "log": log})
        except TransientError:
            self._put_back(series, log, count)
            raise
        except StaleAttempt:
            raise
        except PortalError:
            raise  # the batch is dropped: resending what was refused would loop forever

    # -- buffer ---------------------------------------------------------------------------

    def _take_batch(self) -> tuple[dict[str, dict[str, list]], list[str], int]:
        with self._lock:
            batch: dict[str, dict[str, list]] = {}
            taken = 0
            for name in list(self._series):
                room = MAX_BATCH_POINTS - taken
                if room <= 0:
                    break
                xs, ys = self._series[name]
                batch[name] = {"x": xs[:room], "y": ys[:room]}
                taken += len(batch[name]["x"])
                if len(xs) > room:
                    self._series[name] = (xs[room:], ys[room:])
                else:
                    del self._series[name]
            self._points -= taken
            skipped = self._skipped_lines + max(len(self._log) - MAX_LOG_LINES, 0)
            lines = list(self._log)[-MAX_LOG_LINES:]
            if skipped:
                lines.insert(0, f"[… {skipped} lines skipped …]")
            self._log.clear()
            self._skipped_lines = 0
            if self._dropped_points:
                lines.append(f"[… {self._dropped_points} telemetry points dropped …]")
                self._dropped_points = 0
            return batch, lines, taken

    def _put_back(self, batch: dict[str, dict[str, list]], lines: list[str], count: int) -> None:
        """A failed batch goes back in front of what arrived since."""
        with self._lock:
            self._log.extendleft(reversed(lines))
            while len(self._log) > MAX_BUFFERED_LOG_LINES:
                self._log.popleft()
                self._skipped_lines += 1
            for name, columns in batch.items():
                xs, ys = self._series.get(name, ([], []))
                self._series[name] = (columns["x"] + xs, columns["y"] + ys)
            self._points += count
            if self._points > MAX_BUFFERED_POINTS:
                self._shed_points()

    def _shed_points(self) -> None:
        """Over the bound: drop every other point of the oldest half of the largest series."""
        while self._points > MAX_BUFFERED_POINTS:
            name = max(self._series, key=lambda n: len(self._series[n][0]))
            xs, ys = self._series[name]
            half = len(xs) // 2
            if half < 2:
                break
            kept = (xs[:half:2] + xs[half:], ys[:half:2] + ys[half:])
            removed = len(xs) - len(kept[0])
            self._series[name] = kept
            self._points -= removed
            self._dropped_points += removed
