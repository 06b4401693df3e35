"""Handing a run's cores to the next run on the same host without a gap between them.

On a backend whose runs share the portal's own cores (the local driver: trait `hands_over`),
each run's agent holds an exclusive lock on `handover.lock` in its work directory while its
steps run (`Baton`). Shortly before its last step is expected to end (`Countdown`: the
solver's simulated time against the case's `endTime`, at the pace it has kept), the agent
tells the portal (phase `finishing`), which gives the run's cores to the next queued run at
once. That run's agent is told, in its `after`, the lock of every run whose cores went that
way and may still be solving on the host: it renders its case, makes its sandbox and cgroup,
and waits on those locks (`wait_for`) before its first step. The lock goes when the last
step's processes are gone, so the next solver starts within a millisecond of the last one's
end, never beside it, and the portal's round trips happen while the last step still runs.

A last step whose end cannot be foreseen (no plain `endTime`, not a solver) hands over
nothing early: its cores go back with the final report, as on every other backend.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import threading
import time

from orchestration import nofollow

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["LEAD", "LOCK_NAME", "Baton", "Countdown", "Handover", "times_of", "wait_for"]

LOCK_NAME = "handover.lock"
# how long before its expected end a last step hands its cores over (the portal's
# HANDOVER_LEAD sets it in run.json): the next run's admission, start and preparation (tens
# of milliseconds on a loaded 2-core machine) fit well within it
LEAD = 0.5
# the pace is read over at least this much simulated progress: the first time steps
# (start-up, the first writes) say little about the rest
MIN_PROGRESS = 0.1
_CONTROL_DICT_MAX = 256 * 1024
_NUMBER = rb"\s+([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*;"
_END_TIME = re.compile(rb"^\s*endTime" + _NUMBER, re.M)
_START_TIME = re.compile(rb"^\s*startTime" + _NUMBER, re.M)
_STOP_AT = re.compile(rb"^\s*stopAt\s+(\w+)\s*;", re.M)
_START_FROM = re.compile(rb"^\s*startFrom\s+(\w+)\s*;", re.M)
_WAIT_TICK = 0.05  # how often a waiting agent looks whether it should stop instead


class Baton:
    """The run's own handover lock, held (exclusive) from the agent's start until its last
    step's processes are gone; `release()` is idempotent."""

    def __init__(self, work_dir: str) -> None:
        self.path = os.path.join(work_dir, LOCK_NAME)
        self._fd = -1
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held by an earlier attempt's agent still alive: no handover
            os.close(fd)
            return
        self._fd = fd

    @property
    def held(self) -> bool:
        return self._fd >= 0

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # the lock goes with the descriptor
            self._fd = -1


def wait_for(
    paths: Sequence[str],
    *,
    should_stop: Callable[[], str],
    on_wait: Callable[[], None],
) -> str:
    """Wait until no run named in `paths` (their `Baton` locks) holds its lock: "" then, or
    what `should_stop` answered (non-empty) while waiting. A lock file that is gone belongs to
    a run that has ended; `on_wait` is called once, when the first lock is still held."""
    waited = False
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                continue
            except BlockingIOError:
                pass
            except OSError:
                continue
            if not waited:
                waited = True
                on_wait()
            got = threading.Event()

            def take(fd: int = fd, got: threading.Event = got) -> None:
                with contextlib.suppress(OSError):
                    fcntl.flock(fd, fcntl.LOCK_SH)  # blocks until the holder lets go
                got.set()

            # the blocking call on a thread of its own: this one wakes at once when the lock
            # goes, and still looks every _WAIT_TICK whether the run was stopped meanwhile
            threading.Thread(target=take, name="handover-wait", daemon=True).start()
            while not got.wait(_WAIT_TICK):
                reason = should_stop()
                if reason:
                    fd = -1  # the waiting thread still holds it; the process's end closes it
                    return reason
        finally:
            if fd >= 0:
                os.close(fd)
    return ""


def times_of(case_fd: int) -> tuple[float | None, float] | None:
    """(startTime, endTime) of the case's `system/controlDict` when it gives its end as a plain
    number and the run stops there (`stopAt endTime`, the default); startTime None unless the
    run starts from a plain one (`startFrom startTime`). None: the end is not foreseeable."""
    try:
        text = nofollow.read_file(case_fd, "system/controlDict", max_bytes=_CONTROL_DICT_MAX)
    except (OSError, ValueError):
        return None
    stop = _STOP_AT.findall(text)
    if stop and stop != [b"endTime"]:
        return None
    found = _END_TIME.findall(text)
    if len(found) != 1:  # none, or several (a macro or a conditional chooses): unforeseeable
        return None
    start = _START_TIME.findall(text)
    start_from = _START_FROM.findall(text)
    plain_start = len(start) == 1 and start_from in ([], [b"startTime"])
    return (float(start[0]) if plain_start else None), float(found[0])


class Countdown:
    """When the last step is within `lead` seconds of its end: its simulated time's pace since
    the step started (from `start_time`) or, where that is not known, since the first time
    step it printed, carried forward to `end_time`. Made when the step starts."""

    def __init__(
        self,
        end_time: float,
        *,
        start_time: float | None = None,
        lead: float = LEAD,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.end_time = end_time
        self.lead = lead
        self.clock = clock
        # (simulated time, clock) the pace is measured from: the solver's start-up counts in
        # it, which only makes the handover later
        self._first = None if start_time is None else (start_time, clock())

    def due(self, sim_time: float | None) -> bool:
        if sim_time is None:
            return False
        now = self.clock()
        if self._first is None:
            self._first = (sim_time, now)
            return sim_time >= self.end_time
        t0, w0 = self._first
        if sim_time >= self.end_time:
            return True
        span = self.end_time - t0
        done = sim_time - t0
        if span <= 0 or done < MIN_PROGRESS * span or now <= w0:
            return False
        remaining = (self.end_time - sim_time) * (now - w0) / done
        return remaining <= self.lead


class Handover:
    """One run's side of it: its own lock (held from the start, when `lead` > 0), the wait for
    the runs in `after` before its first step, and its announcement (`announce("finishing")`)
    once its last step is foreseen to end within `lead`."""

    def __init__(
        self,
        *,
        work_dir: str,
        lead: float,
        after: Sequence[str],
        announce: Callable[[str], None],
        set_phase: Callable[[str], None],
        log: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.baton = Baton(work_dir) if lead > 0 else None
        self.lead = lead
        self.after = tuple(after)
        self.announce = announce
        self.set_phase = set_phase
        self.log = log
        self.clock = clock
        self._countdown: Countdown | None = None

    def wait(self, should_stop: Callable[[], str]) -> str:
        """Before the first step: wait until the runs whose cores this one took have ended
        their last step; why it stopped waiting instead, if it did."""
        if not self.after:
            return ""

        def on_wait() -> None:
            self.set_phase("waiting")
            self.log("waiting for the cores it was given to be free")

        began = self.clock()
        stopped = wait_for(self.after, should_stop=should_stop, on_wait=on_wait)
        waited = self.clock() - began
        if waited >= 0.001:
            self.log(f"the cores were free after {waited * 1000:.0f} ms")
        return stopped

    def last_step_started(self, case_fd: int) -> None:
        """The last step, a solver, has started: count down to its end when the case says
        where that is."""
        if self.baton is None or not self.baton.held:
            return
        times = times_of(case_fd)
        if times is not None:
            self._countdown = Countdown(times[1], start_time=times[0], lead=self.lead)

    def observe(self, sim_time: float | None) -> None:
        """The last step's simulated time, as it goes: announce once the end is near."""
        if self._countdown is not None and self._countdown.due(sim_time):
            self._countdown = None
            self.log("the last step is about to end: its cores go to the next run")
            self.announce("finishing")

    def release(self) -> None:
        """The last step's processes are gone (or no step will run): the next run may start."""
        self._countdown = None
        if self.baton is not None:
            self.baton.release()
