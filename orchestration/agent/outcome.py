"""How a run's steps ended, as the supervisor tells the agent's main loop."""

from __future__ import annotations

import collections

__all__ = ["Outcome", "Stale", "StepResult", "over_disk", "over_memory"]


class Stale(Exception):
    """The portal answered 409: this attempt is over."""


class Outcome(
    collections.namedtuple(
        "Outcome",
        "state exit_code reason message solver_converged",
        defaults=(None, "", "", False),
    )
):
    """state: completed | failed | cancelled; exit_code: int or None; reason, message: str;
    solver_converged: the solver itself said so (e.g. SIMPLE residualControl)."""

    __slots__ = ()


class StepResult(
    collections.namedtuple(
        "StepResult", "returncode interrupted fatal_error converged", defaults=("", None, False)
    )
):
    """returncode: int; interrupted: "" | "stop" | "terminated" | "disk" | "stalled" | "wall"
    (the last two the watchdog's); fatal_error: str or None; converged: bool."""

    __slots__ = ()


def over_disk(step: str, *, budget: int, used: int | None) -> Outcome:
    """A run whose directory outgrew its disk budget (bytes) during `step`."""
    return Outcome(
        state="failed",
        reason="disk_budget",
        message=(
            f"disk budget of {budget / 1024**3:.3g} GB exceeded: the run's directory took "
            f"{(used or 0) / 1024**3:.3g} GB during {step}; write less (fewer write times, "
            "purgeWrite in controlDict) or ask an admin for a larger storage quota"
        ),
    )


def over_memory(step: str, *, limit: int, exit_code: int) -> Outcome:
    """A run whose cgroup's memory limit (bytes) stopped `step`."""
    return Outcome(
        state="failed",
        exit_code=exit_code,
        reason="memory_limit",
        message=(
            f"memory limit of {limit / 1024**3:.3g} GB exceeded: {step} was stopped by the "
            "kernel; ask for more memory per run (resources.memory_gb) or a smaller mesh"
        ),
    )
