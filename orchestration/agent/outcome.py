"""How a run's steps ended, as the supervisor tells the agent's main loop."""

from __future__ import annotations

import collections

__all__ = ["Outcome", "Stale", "StepResult"]


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
