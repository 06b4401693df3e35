"""A study's Pareto front (GET /api/v1/studies/{id}/pareto/): its completed runs' trade-off
between two or three objectives, which runs are on the front, and the front's hypervolume
(after each batch, for an adaptive study).

An adaptive study with goal pareto (or optimise with constraints) has its objectives,
directions and constraints in its spec; any study with objectives can be asked with
`?objectives=LD:max,Cd:min` and `constraint=Cl>=0.5` (repeatable).

The hypervolume is measured to a reference point 10 % of the feasible runs' range past their
worst value of each objective, and given as the share of the box between their best values
and that point (1 would be one run best at everything at once).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from core.exceptions import ApplicationError
from orchestration.planning import pareto
from studies.adaptive import AdaptivePlan
from studies.choices import RunState
from studies.models import Study
from studies.surrogate_map import progress, stored_plan

MAX_RUNS_SHOWN = 5000  # the front always; then the latest dominated and infeasible runs
_CONSTRAINT = re.compile(r"^\s*([^<>=\s]+)\s*(>=|<=)\s*(\S+)\s*$")


def study_front(
    *, study: Study, objectives: str | None = None, constraints: Sequence[str] = ()
) -> dict[str, Any]:
    """The study's front of `objectives` ("LD:max,Cd:min"; by default its plan's) within
    `constraints` (["Cl>=0.5"]; by default its plan's); 400s name the query parameter."""
    names = list((study.objectives or {}).keys())
    if not names:
        raise ApplicationError(
            "the study has no objectives: add them (PUT /api/v1/studies/{id}/objectives/) to "
            "see their trade-off",
            field="objectives",
        )
    plan = _front_plan(study)
    if objectives:
        goals = parse_goals(objectives, names)
    elif plan is not None:
        goals = plan.goals
    else:
        raise ApplicationError(
            "objectives: name two or three of the study's objectives with the way each is "
            f"better, e.g. ?objectives={names[0]}:max{',' + names[1] + ':min' if len(names) > 1 else ''} "
            f"(it has {', '.join(names)})",
            field="objectives",
        )
    if constraints:
        limits = tuple(parse_constraint(c, names) for c in constraints)
    else:
        limits = plan.constraints if plan is not None and not objectives else ()
    return _front(study, goals, limits, plan)


def _front_plan(study: Study) -> AdaptivePlan | None:
    """An adaptive study's plan when it has a front (pareto, or constrained optimise)."""
    if study.spec.get("combine") != "adaptive":
        return None
    try:
        plan = stored_plan(study)
    except ApplicationError:  # objectives replaced since: ask for them in the query
        return None
    return plan if plan.uses_front else None


def parse_goals(raw: str, names: Sequence[str]) -> tuple[pareto.Objective, ...]:
    """ "LD:max,Cd:min": two or three of the study's objectives, each with max or min."""
    goals: list[pareto.Objective] = []
    for part in raw.split(","):
        name, _, direction = part.strip().partition(":")
        if name not in names:
            raise ApplicationError(
                f"objectives: the study has no objective {name!r}; it has {', '.join(names)}",
                field="objectives",
            )
        if direction not in ("max", "min"):
            raise ApplicationError(
                f"objectives: say whether {name} is to be maximised or minimised, as "
                f"{name}:max or {name}:min",
                field="objectives",
            )
        if any(g.name == name for g in goals):
            raise ApplicationError(
                f"objectives: {name} is named twice; name each objective once", field="objectives"
            )
        goals.append(pareto.Objective(name=name, direction=direction))
    if not 2 <= len(goals) <= 3:
        raise ApplicationError(
            f"objectives: a front trades off two or three objectives, not {len(goals)}",
            field="objectives",
        )
    return tuple(goals)


def parse_constraint(raw: str, names: Sequence[str]) -> pareto.Constraint:
    """ "Cl>=0.5" or "Cd<=0.02" on one of the study's objectives."""
    match = _CONSTRAINT.match(raw)
    if match is None:
        raise ApplicationError(
            f"constraint: {raw!r} is not a constraint; write it as <objective>>=<number> or "
            "<objective><=<number>, e.g. Cl>=0.5",
            field="constraint",
        )
    name, op, number = match.groups()
    if name not in names:
        raise ApplicationError(
            f"constraint: the study has no objective {name!r}; it has {', '.join(names)}",
            field="constraint",
        )
    try:
        value = float(number)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise ApplicationError(
            f"constraint: {number!r} is not a number (in {raw!r})", field="constraint"
        )
    if op == ">=":
        return pareto.Constraint(name=name, low=value)
    return pareto.Constraint(name=name, high=value)


def _front(
    study: Study,
    goals: tuple[pareto.Objective, ...],
    limits: tuple[pareto.Constraint, ...],
    plan: AdaptivePlan | None,
) -> dict[str, Any]:
    rows = list(
        study.runs.filter(state=RunState.COMPLETED)
        .order_by("index")
        .values_list("id", "index", "objectives")
    )
    quantities = [*(g.name for g in goals), *(c.name for c in limits)]
    found = {q: [_value(r[2], q) for r in rows] for q in dict.fromkeys(quantities)}
    raw = (
        np.column_stack([pareto.column(found[g.name]) for g in goals]) if rows else np.empty((0, 2))
    )
    y = pareto.minimised(raw, goals)
    complete = np.all(np.isfinite(y), axis=1)
    ok = complete & (pareto.feasible(found, limits) if limits and rows else True)
    on_front = pareto.front_mask(y, ok)
    out: dict[str, Any] = {
        "objectives": [{"name": g.name, "direction": g.direction} for g in goals],
        "constraints": [{"objective": c.name, "min": c.low, "max": c.high} for c in limits],
        "completed": len(rows),
        "missing": int(np.count_nonzero(~complete)),
        "feasible": int(np.count_nonzero(ok)),
        "front_size": int(np.count_nonzero(on_front)),
        "hypervolume": None,
        "hypervolume_share": None,
        "reference": None,
        "history": [],
        "progress": progress(study=study, plan=plan) if plan is not None else None,
    }
    starts = list(study.batch_starts)

    def batch_of(index: int) -> int | None:
        return plan.batch_of(index, starts) if plan is not None else None

    if ok.any():
        scale = pareto.Scale.of(y[ok])
        reference = scale.low + pareto.REFERENCE * scale.width
        box = float(np.prod(reference - scale.low))
        volume = pareto.hypervolume(y[on_front], reference)
        signs = np.array([-1.0 if g.direction == "max" else 1.0 for g in goals])
        out["hypervolume"] = volume
        out["hypervolume_share"] = volume / box
        out["reference"] = {g.name: float(v) for g, v in zip(goals, reference * signs, strict=True)}
        if plan is not None:
            batches = np.array([plan.batch_of(r[1], starts) for r in rows])
            for b in range(1, int(batches.max()) + 1):
                upto = ok & (batches <= b)
                if not (batches == b).any():
                    continue
                part = pareto.hypervolume(y[pareto.front_mask(y, upto)], reference)
                out["history"].append(
                    {
                        "batch": b,
                        "runs": int(np.count_nonzero(batches <= b)),
                        "hypervolume_share": part / box,
                    }
                )
    order = list(np.flatnonzero(on_front)) + [
        i for i in reversed(range(len(rows))) if not on_front[i]
    ]
    shown = sorted(order[:MAX_RUNS_SHOWN])
    out["runs"] = [
        {
            "id": str(rows[i][0]),
            "index": rows[i][1],
            "batch": batch_of(rows[i][1]),
            "values": {q: found[q][i] for q in found},
            "feasible": bool(ok[i]),
            "front": bool(on_front[i]),
        }
        for i in shown
    ]
    return out


def _value(results: Mapping[str, Any] | None, name: str) -> float | None:
    value = (results or {}).get(name)
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None
