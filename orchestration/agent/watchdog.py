"""The run's watchdog: a solver that makes no progress, or a run past its wall time, is
stopped by the agent itself (it works on every backend, the portal reachable or not).

Progress is a new time step (`Time = …`) of a solve step. Before a solve step's first time
step (meshing, decomposition, the solver's own start-up) and in steps that count none, new
output in the step's log counts as progress. Heartbeats are not progress: a solver stopped
with SIGSTOP keeps its agent beating.

How long a run may go without progress (docs/live.md, "Runs that make no progress"):

- once its solver has counted time steps: max(floor, factor × the longest gap between two
  of its time steps so far) — a run's own pace, so a slow case is not cut short;
- before that (and in steps that count none): max(floor, start-up allowance).

The floor is the study's `stall_seconds`, else its backend's, else the portal's; the rest
come from the portal's settings. The checks are a few comparisons on each pass of the
supervisor's loop (no process, no extra poll).

Stdlib only (the run agent's).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

TYPE_CHECKING = False  # typing is not imported at run time (every Slurm job starts an agent)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["DEFAULTS", "Watchdog"]

DEFAULTS: dict[str, float | None] = {
    "stall_seconds": 120.0,  # the floor: no run is stopped after less time without progress
    "stall_factor": 10.0,  # × the longest gap between time steps seen so far
    "startup_seconds": 600.0,  # before the first time step: meshing, decomposition, start-up
    "wall_seconds": None,  # the run's wall-time limit (None: none)
}


def _number(config: Mapping[str, Any], key: str) -> float | None:
    """The positive number `config` gives for `key`, else its default (None: none)."""
    value = config.get(key)
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        value = DEFAULTS[key]
    return float(value) if value is not None and value > 0 else None


class Watchdog:
    """Tracks one attempt's progress step by step; `check()` says why to stop, or ""."""

    def __init__(self, config: Mapping[str, Any] | None, clock: Callable[[], float]) -> None:
        config = config or {}
        self.floor: float = _number(config, "stall_seconds") or 120.0
        self.factor: float = _number(config, "stall_factor") or 10.0
        self.startup: float = _number(config, "startup_seconds") or 600.0
        self.wall = _number(config, "wall_seconds")
        self.clock = clock
        self.started = clock()
        self.step = ""
        self.counts_steps = False
        self.last_progress = self.started
        self.iterations = 0
        self.longest_gap = 0.0
        self.log_bytes = 0
        self.message = ""  # why it stopped the run, once it did

    def step_started(self, name: str, *, solve: bool) -> None:
        """A new step: its start counts as progress; a solve step's pace is learnt anew."""
        self.step, self.counts_steps = name, solve
        self.last_progress = self.clock()
        self.iterations, self.longest_gap, self.log_bytes = 0, 0.0, 0

    def observe(self, *, iterations: int, log_bytes: int) -> None:
        """What the step's log has shown so far: its time steps and its size."""
        if iterations > self.iterations:
            now = self.clock()
            if self.iterations:  # the gap before the first time step is start-up, not pace
                self.longest_gap = max(
                    self.longest_gap, (now - self.last_progress) / (iterations - self.iterations)
                )
            self.iterations, self.last_progress = iterations, now
        elif log_bytes > self.log_bytes and not (self.counts_steps and self.iterations):
            self.last_progress = self.clock()
        self.log_bytes = log_bytes

    def stall_limit(self) -> float:
        """How long the step may go without progress now."""
        if self.counts_steps and self.iterations:
            return max(self.floor, self.factor * self.longest_gap)
        return max(self.floor, self.startup)

    def check(self) -> str:
        """ "stalled" or "wall" (with `message` saying why), or "" while all is well."""
        now = self.clock()
        if self.wall is not None and now - self.started > self.wall:
            self.message = (
                f"ran {now - self.started:.0f} s, over the {self.wall:g} s wall-time limit "
                f"(during {self.step})"
            )
            return "wall"
        quiet = now - self.last_progress
        limit = self.stall_limit()
        if quiet <= limit:
            return ""
        if self.counts_steps and self.iterations:
            rule = (
                f"after time step {self.iterations}; the limit, {limit:.0f} s, is the larger "
                f"of {self.floor:g} s and {self.factor:g} × its longest gap between time "
                f"steps ({self.longest_gap:.3g} s)"
            )
        elif self.counts_steps:
            rule = f"before its first time step; the start-up limit is {limit:.0f} s"
        else:
            rule = f"no new output; the limit is {limit:.0f} s"
        self.message = f"{self.step} made no progress for {quiet:.0f} s ({rule})"
        return "stalled"
