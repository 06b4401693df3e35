"""Background reporting: heartbeats and telemetry batches with retries and a bounded buffer.

Series travel packed: each column as the base64 of its little-endian float64 values (a few
C-level passes, where writing 20,000 floats as JSON text cost the agent ~12 ms, or an import
of orjson at every start, and the portal as much again to read them). NaN and infinities
need no spelling there; a column that is not all numbers goes as a JSON list.
"""

from __future__ import annotations

import array
import binascii
import collections
import math
import sys
import threading
import time

from orchestration.agent.client import (
    PortalClient,
    PortalError,
    StaleAttempt,
    TransientError,
    json_safe,
    with_retries,
)
from orchestration.backoff import Backoff

TYPE_CHECKING = False  # typing is not imported at run time (every Slurm job starts an agent)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

    from orchestration.results.logparse import Columns, Point

    # a telemetry batch: series → {"x": [...], "y": [...]}
    Batch = dict[str, dict[str, list[float]]]

__all__ = ["Reporter"]

MAX_BUFFERED_POINTS = 200_000
MAX_BATCH_POINTS = 20_000
MAX_LOG_LINES = 200  # per telemetry batch
MAX_BUFFERED_LOG_LINES = 5_000
MAX_LOG_LINE_CHARS = 2_000
INTERVAL_BOUNDS = (0.05, 60.0)  # what the portal may ask for as the telemetry interval
# once due, a batch goes with the next data; data up to EARLY intervals before the due time
# counts as after it, and waiting data goes alone after LONGEST_WAIT intervals (Reporter._sendable)
EARLY = 0.25
LONGEST_WAIT = 1.25


_SWAP = sys.byteorder != "little"


def _pack(values: list[float]) -> str | list[float | str]:
    """A column as the base64 of its little-endian float64s; a JSON list (NaN and infinities
    spelled as strings) when it holds anything but numbers."""
    try:
        packed = array.array("d", values)
    except TypeError:
        return [json_safe(v) if isinstance(v, float) else v for v in values]
    if _SWAP:
        packed.byteswap()
    return binascii.b2a_base64(packed.tobytes(), newline=False).decode("ascii")


def pack_columns(batch: Batch) -> dict[str, dict[str, Any]]:
    return {name: {"x": _pack(c["x"]), "y": _pack(c["y"])} for name, c in batch.items()}


class Reporter:
    """Owns every non-final call to the portal while the run goes on (one thread).

    `stop_requested` is set when an answer carries ``"stop": true``; `stale` on a 409.
    Call `close()` then `flush(deadline=…)` to send what is left synchronously.

    Telemetry goes Nagle-style: a batch starts about once per `telemetry_interval` at most
    (the portal's pace: 0.1 s while the run is watched, 2 s while not) and only after the one
    in flight was answered. New data on an idle link goes at once; what arrives while a batch
    is in flight (or within the interval) waits and goes as one batch, with the next data
    once the pace allows (`_sendable`): batches grow with the load instead of the requests
    multiplying.

    Each batch is numbered (`batch_seq`: 1, 2, … in the attempt). A batch whose answer did
    not come (a timeout, a network error, a 5xx) is sent again as it was, with its number,
    before anything newer: the portal stored it or not, and stores it once either way. The
    final report carrying the last batch carries its number too.
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
        self.running_done = threading.Event()  # the `running` report went (or gave up)
        self._running_deadline: float | None = None
        self._running_thread: threading.Thread | None = None
        self.phase = "preparing"
        # the process tree's use at the last sample (none before the first)
        self.resources: dict[str, float | int] = {}
        self.disk_bytes: int | None = None
        self.iterations: int | None = None  # the solver's time steps so far
        self._lock = threading.Lock()
        # by series: its x and y values as two columns, sent as {"x": [...], "y": [...]}
        self._series: Columns = {}
        self._points = 0
        self._dropped_points = 0
        # log text as it came, in blocks of whole lines: (text, number of lines); only the last
        # MAX_LOG_LINES of a batch are sent, so lines are split out when a batch is taken
        self._log: collections.deque[tuple[str, int]] = collections.deque()
        self._log_lines = 0
        self._skipped_lines = 0
        self._closing = threading.Event()
        self._wakeup = threading.Event()  # new data while a batch is due: send it now
        self._thread = threading.Thread(target=self._loop, name="reporter", daemon=True)
        self._last_accepted = clock()
        # the first batch after one interval (the answer to `running` sets the pace: a run
        # nobody watches sends every 2 s, and a short one only its final batch)
        self._next_telemetry = clock() + telemetry_interval
        self._sent_any = False
        self._last_arrival = float("-inf")  # when data last came
        self._oldest: float | None = None  # when the oldest data waiting came
        self._retry_at = 0.0
        self._backoff = Backoff(first=0.5, cap=10.0)
        self._batch_seq = 0  # the number of the last batch taken
        # a batch sent whose answer did not come: sent again, as it is, before anything newer
        self._unsent: dict[str, Any] | None = None
        self._announce = False  # a phase to send at once (announce)

    # -- producers (any thread) -----------------------------------------------------------

    def add_points(self, points: Iterable[Point]) -> None:
        columns: Columns = {}
        for name, x, y in points:
            found = columns.get(name)
            if found is None:
                found = columns[name] = ([], [])
            found[0].append(x)
            found[1].append(y)
        self.add_columns(columns)

    def add_columns(self, columns: Columns) -> None:
        """Take new points as columns (the lists become the reporter's: do not reuse them)."""
        if not columns:
            return
        buffers = self._series
        added = 0
        with self._lock:
            for name, (xs, ys) in columns.items():
                found = buffers.get(name)
                if found is None:
                    buffers[name] = (xs, ys)
                else:
                    found[0].extend(xs)
                    found[1].extend(ys)
                added += len(xs)
            self._points += added
            if self._points > MAX_BUFFERED_POINTS:
                self._shed_points()
        self._nudge()

    def _nudge(self) -> None:
        """New data: note when it came, and wake the sender when a batch is due (it would
        otherwise notice within 0.1 s), or when a full batch is waiting: a fast solver is
        never held to the pace (its points would pile up and be thinned)."""
        now = self.clock()
        self._last_arrival = now
        if self._oldest is None:
            self._oldest = now
        if (now >= self._opens() or self._backlogged()) and now >= self._retry_at:
            self._wakeup.set()

    def _backlogged(self) -> bool:
        return self._points >= MAX_BATCH_POINTS

    def _opens(self) -> float:
        """When the pace allows the next batch: data that comes a quarter interval before
        the due time counts as coming after it (see _sendable)."""
        return self._next_telemetry - self.telemetry_interval * EARLY

    def _longest_wait(self) -> float:
        """How long data waits for a companion once a batch may go (see _sendable)."""
        return self.telemetry_interval * LONGEST_WAIT

    def _sendable(self, now: float) -> bool:
        """Whether the waiting data goes now. Once the pace allows a batch, it goes with the
        next data to come, or when what waits has waited an interval and a quarter (not an
        exact interval: a steady writer's next line would come just after it, every time).
        Data that comes a quarter interval before the pace allows counts as coming after it.
        A solver that writes a line every 50 ms at a 0.1 s pace then sends every other line
        as it is written, the one between waiting 50 ms; sending at the pace's own instants
        made lines wait 0-100 ms (100 at the 95th percentile)."""
        if self._backlogged():
            return True
        opens = self._opens()
        if now < opens:
            return False
        oldest = self._oldest
        return self._last_arrival >= opens or oldest is None or now - oldest >= self._longest_wait()

    def add_log(self, lines: Iterable[str]) -> None:
        lines = list(lines)
        if lines:
            self.add_log_text("\n".join(lines), len(lines))

    def add_log_text(self, text: str, count: int | None = None) -> None:
        """Take whole log lines joined by newlines (`count` of them, when known)."""
        count = text.count("\n") + 1 if count is None else count
        with self._lock:
            self._log.append((text, count))
            self._log_lines += count
            # the oldest blocks go once the newer ones hold the buffer's worth of lines
            while self._log_lines - self._log[0][1] >= MAX_BUFFERED_LOG_LINES:
                _, dropped = self._log.popleft()
                self._log_lines -= dropped
                self._skipped_lines += dropped
        self._nudge()

    def set_interval(self, seconds: Any) -> None:
        """Follow the portal's pace for telemetry (answers carry ``interval``: short while the
        run is watched live, long while it is not); anything but a number is ignored."""
        if type(seconds) not in (int, float) or not math.isfinite(seconds):
            return
        low, high = INTERVAL_BOUNDS
        seconds = min(max(float(seconds), low), high)
        with self._lock:
            # a faster pace applies to the wait already begun; a slower one from the next
            # batch, or to the first if none went yet
            if seconds < self.telemetry_interval or not self._sent_any:
                self._next_telemetry += seconds - self.telemetry_interval
            self.telemetry_interval = seconds
        self._wakeup.set()

    def set_phase(self, phase: str) -> None:
        self.phase = phase

    def announce(self, phase: str) -> None:
        """Set the phase and have it reach the portal now, as a heartbeat ahead of any batch
        (a run handing its cores over: orchestration/agent/handover.py)."""
        self.phase = phase
        self._announce = True
        self._wakeup.set()

    def set_resources(self, *, cpu_percent: float, rss_bytes: int) -> None:
        self.resources = {"cpu_percent": round(cpu_percent, 1), "rss_bytes": int(rss_bytes)}
        if self.disk_bytes is not None:
            self.resources["disk_bytes"] = self.disk_bytes

    def set_disk(self, disk_bytes: int) -> None:
        """What the run's directory takes on disk now (the storage quota counts it)."""
        self.disk_bytes = int(disk_bytes)
        self.resources = {**self.resources, "disk_bytes": self.disk_bytes}

    def set_iterations(self, iterations: int) -> None:
        self.iterations = iterations

    def status(self) -> dict[str, Any]:
        """What a heartbeat says (phase, resources) and the iterations so far: every batch
        carries it too, since batches stand for heartbeats while the solver writes."""
        out: dict[str, Any] = {"phase": self.phase, "resources": dict(self.resources)}
        if self.iterations is not None:
            out["iterations"] = self.iterations
        return out

    def has_pending(self) -> bool:
        if self._unsent is not None:
            return True
        with self._lock:
            return bool(self._points or self._log or self._skipped_lines)

    # -- lifecycle ------------------------------------------------------------------------

    def start(self, *, running_deadline: float | None = None) -> None:
        """Start the thread; with `running_deadline`, its first call reports the attempt as
        running (retried until then) while the agent goes on preparing and starting steps:
        the answer's `stop` and pace apply once it comes (`running_done` is set then)."""
        self._running_deadline = running_deadline
        if running_deadline is None:
            self.running_done.set()
        self._thread.start()

    def _report_running(self) -> None:
        body = {"state": "running", "exit_code": None, "reason": "", "message": ""}
        try:
            deadline = self._running_deadline
            assert deadline is not None
            self._call_with(
                lambda: with_retries(
                    lambda: self.client.post("state/", body),
                    deadline=deadline,
                    what="state running",
                )
            )
        except StaleAttempt:
            pass  # `stale` is set: the supervisor stops the steps
        except (TransientError, PortalError) as exc:
            print(f"agent: could not report running ({exc}); going on", file=sys.stderr)
        finally:
            self.running_done.set()

    def close(self) -> None:
        """Stop the background thread (pending data stays for `flush`)."""
        self._closing.set()
        self._wakeup.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.client.timeout + 5)
        # the `running` report goes before whatever the caller sends next (the final one)
        if self._running_thread is not None and self._running_thread.is_alive():
            self._running_thread.join(
                timeout=max(0.0, (self._running_deadline or 0) - self.clock())
                + self.client.timeout
                + 5
            )

    def flush(
        self,
        *,
        deadline: float,
        sleep: Callable[[float], Any] = time.sleep,
        keep_last: bool = False,
    ) -> bool:
        """Send everything left, retrying until `deadline`; True when all was accepted. With
        `keep_last`, the last batch stays for `take_batch()` (the final report carries it)."""
        backoff = Backoff(first=0.5, cap=10.0)
        while self.has_pending() and not (
            keep_last and self._unsent is None and self._fits_one_batch()
        ):
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

    def _fits_one_batch(self) -> bool:
        with self._lock:
            return self._points <= MAX_BATCH_POINTS

    def take_batch(self) -> dict[str, Any]:
        """What is left, as the fields of a telemetry batch (`batch_seq`, `series`, `log`),
        for a report that carries it; empty when nothing is. A batch still unanswered (flush
        gave up on it) goes first, with its number."""
        unsent, self._unsent = self._unsent, None
        if unsent is not None:
            return unsent
        if not self.has_pending():
            return {}
        return self._numbered_batch()

    def _numbered_batch(self) -> dict[str, Any]:
        series, log, _ = self._take_batch()
        self._batch_seq += 1
        return {"batch_seq": self._batch_seq, "series": pack_columns(series), "log": log}

    # -- the thread -----------------------------------------------------------------------

    def _loop(self) -> None:
        if not self.running_done.is_set():
            # on a thread (and connection) of its own: the first lines do not wait for its
            # answer (the portal takes telemetry from a run still provisioning). When 20 runs
            # start at once, their `running` reports queue in the portal for up to half a
            # second, and each run's first batch waited behind its own.
            self._running_thread = threading.Thread(
                target=self._report_running, name="report-running", daemon=True
            )
            self._running_thread.start()
        while not self._closing.is_set() and not self.stale.is_set():
            now = self.clock()
            if now >= self._retry_at:
                try:
                    if self._announce:
                        self._announce = False
                        try:
                            self._send_heartbeat()
                        except TransientError:
                            self._announce = True  # sent again after the backoff
                            raise
                    elif self.has_pending() and self._sendable(now):
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
            self._wakeup.wait(self._idle_wait())
            self._wakeup.clear()

    def _idle_wait(self) -> float:
        """How long the thread may sleep: until a batch may go when data waits (a short live
        interval is kept to the millisecond, not rounded up to the 0.1 s tick), else a tick
        (new data wakes it through `_nudge`)."""
        if not self.has_pending():
            return 0.1
        now = self.clock()
        opens = self._opens()
        if now < opens:
            until = opens
        else:  # due: the next data wakes it, or what waits has waited long enough
            oldest = self._oldest if self._oldest is not None else now
            until = oldest + self._longest_wait()
        return min(0.1, max(until - now, self._retry_at - now, 0.0))

    def _answer(self, answer: dict[str, Any]) -> None:
        self._last_accepted = self.clock()
        if "interval" in answer:
            self.set_interval(answer["interval"])
        if answer.get("stop"):
            self.stop_requested.set()

    def _call(self, path: str, body: dict[str, Any]) -> None:
        self._call_with(lambda: self.client.post(path, body))

    def _call_with(self, call: Callable[[], dict[str, Any]]) -> None:
        try:
            answer = call()
        except StaleAttempt:
            self.stale.set()
            raise
        self._answer(answer)

    def _send_heartbeat(self) -> None:
        status = self.status()
        self._call("heartbeat/", {"phase": status["phase"], "resources": status["resources"]})

    def _send_telemetry(self) -> None:
        """Send the batch still unanswered, else the next one. Unanswered (TransientError) it
        stays to be sent again as it is; refused (PortalError) it is dropped: resending what
        was refused would loop forever."""
        batch = self._unsent
        if batch is None:
            batch = self._unsent = self._numbered_batch()
        try:
            self._call("telemetry/", {**batch, **self.status()})
        except (StaleAttempt, PortalError):
            self._unsent = None
            raise
        self._unsent = None
        self._sent_any = True

    # -- buffer ---------------------------------------------------------------------------

    def _take_batch(self) -> tuple[Batch, list[str], int]:
        with self._lock:
            batch: Batch = {}
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
            lines = self._log_tail()
            skipped = self._skipped_lines + self._log_lines - len(lines)
            if skipped:
                lines.insert(0, f"[… {skipped} lines skipped …]")
            self._log.clear()
            self._log_lines = 0
            self._skipped_lines = 0
            if self._dropped_points:
                lines.append(f"[… {self._dropped_points} telemetry points dropped …]")
                self._dropped_points = 0
            # what is left (of a backlog beyond one batch) counts as waiting from now
            self._oldest = self.clock() if self._points else None
            return batch, lines, taken

    def _log_tail(self) -> list[str]:
        """The last MAX_LOG_LINES buffered lines, each cut to MAX_LOG_LINE_CHARS."""
        blocks, count = [], 0
        for text, lines in reversed(self._log):
            blocks.append(text)
            count += lines
            if count >= MAX_LOG_LINES:
                break
        if not blocks:
            return []
        tail = "\n".join(reversed(blocks)).split("\n")[-MAX_LOG_LINES:]
        return [line[:MAX_LOG_LINE_CHARS] for line in tail]

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
