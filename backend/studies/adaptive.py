"""An adaptive study's plan (combine: adaptive, docs/study-spec.md "Adaptive sampling").

The plan is read from the spec's `adaptive` block and checked here (a 400 naming the field);
the batches are made by studies.batches, the surrogate read by studies.surrogate_map.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from core.exceptions import ApplicationError
from orchestration.planning import pareto
from studies.space import Space

DEFAULT_BATCH = 4
MAX_BATCH = 1000  # the spec's largest batch, and batch auto's


@dataclasses.dataclass(frozen=True, kw_only=True)
class AdaptivePlan:
    goal: str  # map | optimise | pareto
    objectives: tuple[str, ...]
    directions: tuple[str, ...] = ()  # optimise and pareto: max | min per objective
    constraints: tuple[pareto.Constraint, ...] = ()  # optimise and pareto
    initial: int
    batch: int  # runs per batch after the initial design (batch_auto: the most, 1000)
    batch_auto: bool = False  # each batch as large as what can run when it is made
    budget: int
    tolerance: float | None
    seed: int

    @property
    def goals(self) -> tuple[pareto.Objective, ...]:
        """optimise and pareto: each objective with the way it is better."""
        return tuple(
            pareto.Objective(name=n, direction=d)
            for n, d in zip(self.objectives, self.directions, strict=True)
        )

    @property
    def direction(self) -> str:
        """optimise: its objective's direction (max for a goal that has none)."""
        return self.directions[0] if self.directions else "max"

    def direction_of(self, objective: str) -> str:
        """Which way `objective` is better under this plan (max when the goal does not say)."""
        if objective in self.objectives and self.directions:
            return self.directions[self.objectives.index(objective)]
        return "max"

    @property
    def uses_front(self) -> bool:
        """Batches placed by the hypervolume (orchestration/planning/pareto.py): a pareto
        goal, or an optimise goal with constraints."""
        return self.goal == "pareto" or bool(self.constraints)

    @property
    def learned(self) -> tuple[str, ...]:
        """Every quantity a surrogate is fitted to: the objectives, then the constrained ones."""
        extra = [c.name for c in self.constraints if c.name not in self.objectives]
        return (*self.objectives, *dict.fromkeys(extra))

    def goal_terms(self) -> dict[str, Any]:
        """Each objective's direction and the constraints, as the API shows them."""
        return {
            "directions": (
                dict(zip(self.objectives, self.directions, strict=True)) if self.directions else {}
            ),
            "constraints": [
                {"objective": c.name, "min": c.low, "max": c.high} for c in self.constraints
            ],
        }

    @property
    def max_batches(self) -> int | None:
        """The most batches the budget allows, the initial design included (None for batch
        auto: it depends on what can run when each is made)."""
        if self.batch_auto:
            return None
        return 1 + math.ceil(max(0, self.budget - self.initial) / self.batch)

    def batch_of(self, index: int, starts: Sequence[int] = ()) -> int:
        """The batch (1 = the initial design) a run's index belongs to: by `starts`, each
        batch's first index (batch auto), else by the fixed sizes."""
        if starts:
            return bisect.bisect_right(starts, index)
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
    if len(set(chosen)) != len(chosen):
        twice = next(name for name in chosen if chosen.count(name) > 1)
        raise ApplicationError(
            f"adaptive.objectives: {twice} is named twice; name each objective once",
            field="adaptive.objectives",
        )
    if goal == "optimise" and len(chosen) != 1:
        raise ApplicationError(
            "adaptive.objectives: goal optimise needs exactly one objective to maximise "
            f"or minimise (one of {', '.join(objectives)})",
            field="adaptive.objectives",
        )
    if goal == "pareto" and not 2 <= len(chosen) <= 3:
        raise ApplicationError(
            "adaptive.objectives: goal pareto trades off two or three objectives; name them "
            f'(of {", ".join(objectives)}), e.g. "objectives": ["LD", "Cd"]',
            field="adaptive.objectives",
        )
    if goal == "map":
        for key in ("direction", "constraints"):
            if key in raw:
                raise ApplicationError(
                    f"adaptive.{key} is for goals optimise and pareto; goal map learns the "
                    "objectives everywhere",
                    field=f"adaptive.{key}",
                )
    chosen = chosen or tuple(objectives)
    directions = _directions(raw.get("direction", "max"), chosen)
    tolerance = raw.get("tolerance")
    return AdaptivePlan(
        goal=goal,
        objectives=chosen,
        directions=directions if goal != "map" else (),
        constraints=_constraints(raw.get("constraints") or {}, objectives),
        initial=space.samples,
        batch=MAX_BATCH if raw.get("batch") == "auto" else int(raw.get("batch", DEFAULT_BATCH)),
        batch_auto=raw.get("batch") == "auto",
        budget=int(raw["budget"]),
        tolerance=None if tolerance is None else float(tolerance),
        seed=space.seed,
    )


def _directions(raw: str | Mapping[str, str], objectives: tuple[str, ...]) -> tuple[str, ...]:
    """Each objective's direction: one word for all, or one per objective (all named)."""
    if isinstance(raw, str):
        return tuple(raw for _ in objectives)
    unknown = [name for name in raw if name not in objectives]
    if unknown:
        raise ApplicationError(
            f"adaptive.direction: {unknown[0]!r} is not one of the goal's objectives "
            f"({', '.join(objectives)})",
            field="adaptive.direction",
        )
    missing = [name for name in objectives if name not in raw]
    if missing:
        raise ApplicationError(
            f"adaptive.direction: say whether {missing[0]} is to be maximised or minimised, "
            f'e.g. "direction": {{"{missing[0]}": "min", …}}',
            field="adaptive.direction",
        )
    return tuple(raw[name] for name in objectives)


def _constraints(
    raw: Mapping[str, Mapping[str, float]], objectives: Collection[str]
) -> tuple[pareto.Constraint, ...]:
    """The ranges the runs must keep, on the study's objectives (any of them)."""
    out = []
    for name, bounds in raw.items():
        if name not in objectives:
            raise ApplicationError(
                f"adaptive.constraints: the study has no objective {name!r} to constrain; it "
                f"has {', '.join(objectives)}",
                field=f"adaptive.constraints.{name}",
            )
        low, high = bounds.get("min"), bounds.get("max")
        if low is not None and high is not None and low > high:
            raise ApplicationError(
                f"adaptive.constraints.{name}: min ({low:g}) is above max ({high:g}): no run "
                "could keep it",
                field=f"adaptive.constraints.{name}",
            )
        out.append(
            pareto.Constraint(
                name=name,
                low=None if low is None else float(low),
                high=None if high is None else float(high),
            )
        )
    return tuple(out)
