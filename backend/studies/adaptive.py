"""An adaptive study's plan (combine: adaptive, docs/study-spec.md "Adaptive sampling").

The plan is read from the spec's `adaptive` block and checked here (a 400 naming the field);
the batches are made by studies.batches, the surrogate read by studies.surrogate_map.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Mapping
from typing import Any

from core.exceptions import ApplicationError
from studies.space import Space

DEFAULT_BATCH = 4


@dataclasses.dataclass(frozen=True, kw_only=True)
class AdaptivePlan:
    goal: str  # map | optimise
    objectives: tuple[str, ...]
    direction: str  # max | min (optimise)
    initial: int
    batch: int
    budget: int
    tolerance: float | None
    seed: int

    @property
    def max_batches(self) -> int:
        """The most batches the budget allows, the initial design included."""
        return 1 + math.ceil(max(0, self.budget - self.initial) / self.batch)

    def batch_of(self, index: int) -> int:
        """The batch (1 = the initial design) a run's index belongs to."""
        return 1 if index < self.initial else 2 + (index - self.initial) // self.batch


def default_initial(varied: int) -> int:
    """The initial design's size when the spec gives none: 2 runs per varied parameter and
    one more, at least 4."""
    return max(4, 2 * varied + 1)


def adaptive_initial(spec: Mapping[str, Any], *, varied: int) -> int:
    """The initial design's size the spec asks for (its runs at submission); a 400 naming
    the field when it exceeds the budget."""
    raw = spec.get("adaptive")
    if not isinstance(raw, Mapping):
        raise ApplicationError(
            "combine: adaptive needs an adaptive block with at least a budget, e.g. "
            '"adaptive": {"goal": "map", "budget": 40, "batch": 4}',
            field="adaptive",
        )
    budget = int(raw["budget"])
    if "initial" in raw:
        initial = int(raw["initial"])
        if budget < initial:
            raise ApplicationError(
                f"adaptive.budget ({budget}) is below the initial design ({initial} runs): "
                f"raise the budget to at least {initial} or make adaptive.initial smaller",
                field="adaptive.budget",
            )
        return initial
    initial = default_initial(varied)
    if budget < 2:
        raise ApplicationError(
            f"adaptive.budget ({budget}) leaves no room for a surrogate: give at least 2 runs "
            f"(the default initial design here is {initial})",
            field="adaptive.budget",
        )
    return min(initial, budget)


def adaptive_plan(
    spec: Mapping[str, Any], *, space: Space, objectives: Collection[str]
) -> AdaptivePlan:
    """The plan of an adaptive spec whose space is parsed and objectives resolved; a 400
    naming the field when its goal names objectives the study does not have."""
    raw = spec["adaptive"]
    goal = raw.get("goal", "map")
    direction = raw.get("direction", "max")
    if not objectives:
        raise ApplicationError(
            "adaptive sampling learns the study's objectives, and it has none: add objectives "
            '(e.g. "Cl": {"series": "forceCoeffs.Cl", "reduce": "last"})',
            field="objectives",
        )
    chosen = tuple(raw.get("objectives") or ())
    unknown = [name for name in chosen if name not in objectives]
    if unknown:
        raise ApplicationError(
            f"adaptive.objectives: the study has no objective {unknown[0]!r}; it has "
            f"{', '.join(objectives)}",
            field="adaptive.objectives",
        )
    if goal == "optimise":
        if len(chosen) != 1:
            raise ApplicationError(
                "adaptive.objectives: goal optimise needs exactly one objective to maximise "
                f"or minimise (one of {', '.join(objectives)})",
                field="adaptive.objectives",
            )
    elif "direction" in raw:
        raise ApplicationError(
            "adaptive.direction is for goal optimise; goal map learns the objectives everywhere",
            field="adaptive.direction",
        )
    tolerance = raw.get("tolerance")
    return AdaptivePlan(
        goal=goal,
        objectives=chosen or tuple(objectives),
        direction=direction,
        initial=space.samples,
        batch=int(raw.get("batch", DEFAULT_BATCH)),
        budget=int(raw["budget"]),
        tolerance=None if tolerance is None else float(tolerance),
        seed=space.seed,
    )
