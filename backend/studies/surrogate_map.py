"""An adaptive study's surrogate, read from its runs: the map (mean and standard deviation
over two parameters) and single predictions (GET /api/v1/studies/{id}/surrogate/).

Every completed run of the study with a finite value of an objective feeds that objective's
surrogate, wherever the run came from (its own batches, or a run reused from another study).
"""

from __future__ import annotations

import dataclasses
import math
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from core.exceptions import ApplicationError
from orchestration.planning import surrogate
from studies.adaptive import AdaptivePlan, adaptive_initial, adaptive_plan
from studies.choices import RunState
from studies.models import Study
from studies.space import Space, SpaceError, parse_space

T = TypeVar("T")
GRID_SIZE = 25
MAX_GRID_SIZE = 60
MAP_NEEDS = 2  # completed runs with a value an objective's map is drawn from


@dataclasses.dataclass(frozen=True, kw_only=True)
class Observed:
    """The study's runs as the surrogate sees them."""

    bounds: tuple[surrogate.Bound, ...]
    points: list[dict[str, Any]]  # every run's parameters (to sample no point twice)
    indexes: list[int]  # and its index
    values: dict[str, tuple[list[dict[str, Any]], list[float]]]  # per objective: points, values
    # per objective, each run's value (None: not completed, or no finite value), as `points`
    found: dict[str, list[float | None]]


def study_space(study: Study, *, combine: str = "adaptive") -> Space:
    """The study's parameter space as its spec gives it, parsed as `combine` (an adaptive
    study's bounds by default; samples: any, only the axes count)."""
    spec = study.spec
    try:
        return parse_space(
            spec.get("parameters") or {}, combine=combine, samples=1, seed=spec.get("seed")
        )
    except SpaceError as exc:  # a stored spec was valid when saved
        raise ApplicationError(str(exc), field=exc.field) from exc


def bounds_of(space: Space) -> tuple[surrogate.Bound, ...]:
    """The sampled parameters' bounds, which the surrogate learns over."""
    return tuple(
        surrogate.Bound(name=a.name, low=a.low, high=a.high, integer=a.integer)
        for a in space.axes
        if a.low is not None and a.high is not None
    )


def study_observed(
    *, study: Study, objectives: tuple[str, ...], bounds: tuple[surrogate.Bound, ...] | None = None
) -> Observed:
    """The study's runs over `bounds` (by default its sampled parameters' bounds)."""
    bounds = bounds_of(study_space(study)) if bounds is None else bounds
    names = [b.name for b in bounds]
    points: list[dict[str, Any]] = []
    indexes: list[int] = []
    values: dict[str, tuple[list[dict[str, Any]], list[float]]] = {o: ([], []) for o in objectives}
    found: dict[str, list[float | None]] = {o: [] for o in objectives}
    rows = study.runs.order_by("index").values_list("index", "parameters", "state", "objectives")
    for index, parameters, state, results in rows.iterator(chunk_size=2000):
        point = {n: parameters.get(n) for n in names}
        if not all(_number(v) for v in point.values()):
            continue
        points.append(point)
        indexes.append(index)
        for name in objectives:
            value: Any = (results or {}).get(name) if state == RunState.COMPLETED else None
            if _number(value) and math.isfinite(value):
                values[name][0].append(point)
                values[name][1].append(float(value))
                found[name].append(float(value))
            else:
                found[name].append(None)
    return Observed(bounds=bounds, points=points, indexes=indexes, values=values, found=found)


def best_run(
    observed: Observed, *, objective: str, direction: str
) -> tuple[int, dict[str, Any], float] | None:
    """The run with the best value of `objective` so far (highest for direction max, lowest
    for min): its index, point and value; None before any run has a value."""
    sign = 1.0 if direction == "max" else -1.0
    best: tuple[int, dict[str, Any], float] | None = None
    for index, point, value in zip(
        observed.indexes, observed.points, observed.found.get(objective, ()), strict=False
    ):
        if value is not None and (best is None or sign * value > sign * best[2]):
            best = (index, point, value)
    return best


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# fitted models by what they were fitted on: the map is asked for again after every run's
# end, by every open study page, and a fit is the costly part of an answer
_FITTED: OrderedDict[tuple, surrogate.Model] = OrderedDict()
FITTED_KEPT = 64


def study_models(*, observed: Observed, plan: AdaptivePlan) -> dict[str, surrogate.Model]:
    """One fitted surrogate per objective of the plan that has at least one value (fitted
    once per set of observations in this process)."""
    return {
        name: fitted_model(observed=observed, objective=name, seed=plan.seed)
        for name, (_, values) in observed.values.items()
        if values
    }


def observations_key(observed: Observed, objective: str, seed: int) -> tuple:
    """What a fit of `objective` depends on: the bounds, the seed, the points and values."""
    points, values = observed.values[objective]
    return (observed.bounds, seed, tuple(tuple(p.values()) for p in points), tuple(values))


def kept(cache: OrderedDict[tuple, T], key: tuple, make: Callable[[], T]) -> T:
    """`cache[key]`, made by `make()` the first time; the FITTED_KEPT most recent are kept."""
    found = cache.get(key)
    if found is None:
        found = cache[key] = make()
        while len(cache) > FITTED_KEPT:
            cache.popitem(last=False)
    cache.move_to_end(key)
    return found


def fitted_model(*, observed: Observed, objective: str, seed: int) -> surrogate.Model:
    """The surrogate of one objective that has values (fitted once per set of observations
    in this process)."""
    points, values = observed.values[objective]
    return kept(
        _FITTED,
        observations_key(observed, objective, seed),
        lambda: surrogate.fit(observed.bounds, points, values, seed=seed),
    )


def parse_prediction_query(
    query: Mapping[str, str], *, bounds: tuple[surrogate.Bound, ...]
) -> dict[str, float]:
    """`?aoa=4&speed=20`: a value for every sampled parameter, numeric and within its
    bounds; a 400 naming the parameter otherwise."""
    names = {b.name for b in bounds}
    unknown = sorted(set(query) - names)
    if unknown:
        raise ApplicationError(
            f"{unknown[0]}: the study samples no parameter {unknown[0]!r}; give a value for "
            f"each of {', '.join(b.name for b in bounds)}",
            field=unknown[0],
        )
    point: dict[str, float] = {}
    for b in bounds:
        raw = query.get(b.name)
        if raw is None or raw == "":
            raise ApplicationError(
                f"{b.name}: a prediction needs a value for every sampled parameter; add "
                f"{b.name}=<a number from {b.low:g} to {b.high:g}>",
                field=b.name,
            )
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise ApplicationError(
                f"{b.name}: {raw!r} is not a number; give one from {b.low:g} to {b.high:g}",
                field=b.name,
            )
        if not b.low <= value <= b.high:
            raise ApplicationError(
                f"{b.name}: {value:g} is outside the sampled range {b.low:g} to {b.high:g}: "
                "the surrogate predicts within the study's bounds only",
                field=b.name,
            )
        point[b.name] = value
    return point


def predict(models: Mapping[str, surrogate.Model], point: Mapping[str, float]) -> dict[str, Any]:
    """Each objective's predicted mean and standard deviation at `point`."""
    out = {}
    for name, model in models.items():
        mean, std = model.predict([point])
        out[name] = {"mean": float(mean[0]), "std": float(std[0])}
    return out


def surrogate_grid(
    models: Mapping[str, surrogate.Model],
    *,
    bounds: tuple[surrogate.Bound, ...],
    x: str,
    y: str | None,
    size: int,
    at: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """Mean and standard deviation of each objective on a size × size grid over x and y (the
    other parameters at `at`'s values, or mid-range), as heat-map rows z[y][x]; a 1-D line
    over x when y is None."""
    mid = {b.name: float((at or {}).get(b.name, (b.low + b.high) / 2)) for b in bounds}
    if y is None:  # one sampled parameter: a line
        (b,) = [b for b in bounds if b.name == x]
        xs = [b.low + (b.high - b.low) * i / (size - 1) for i in range(size)]
        ys: list[float] = []
        points = [{**mid, x: v} for v in xs]
    else:
        xs, ys, points = surrogate.grid(bounds, x, y, size=size, fixed=mid)
    objectives = {}
    for name, model in models.items():
        mean, std = model.predict(points)
        if y is None:
            objectives[name] = {"mean": mean.tolist(), "std": std.tolist()}
        else:
            objectives[name] = {
                "mean": mean.reshape(len(ys), len(xs)).tolist(),
                "std": std.reshape(len(ys), len(xs)).tolist(),
            }
    fixed = {k: v for k, v in mid.items() if k not in (x, y)}
    return {"x": x, "y": y, "xs": xs, "ys": ys, "fixed": fixed, "objectives": objectives}


def stored_plan(study: Study) -> AdaptivePlan:
    """The plan of an adaptive study, from its stored spec (checked when it was saved)."""
    spec = study.spec
    raw = spec.get("parameters") or {}
    varied = sum(1 for r in raw.values() if isinstance(r, dict) and "min" in r)
    space = parse_space(
        raw,
        combine="adaptive",
        samples=adaptive_initial(spec, varied=varied),
        seed=spec.get("seed"),
    )
    return adaptive_plan(spec, space=space, objectives=list(study.objectives or {}))


def progress(*, study: Study, plan: AdaptivePlan) -> dict[str, Any]:
    """ "batch 3 of ≤ 8, 24 of 40 runs", and why the batches stopped (once they did)."""
    return {
        "goal": plan.goal,
        "objectives": list(plan.objectives),
        "direction": plan.direction if plan.goal == "optimise" else None,
        **plan.goal_terms(),
        "batch": study.batches,
        "max_batches": plan.max_batches,
        "runs": study.run_count,
        "budget": plan.budget,
        "batch_size": None if plan.batch_auto else plan.batch,
        "initial": plan.initial,
        "tolerance": plan.tolerance,
        "end": study.adaptive_end,
        "end_display": study.get_adaptive_end_display() if study.adaptive_end else "",
    }


# dotted: never a parameter's name
GRID_KEYS = ("grid.x", "grid.y", "grid.size", "grid.objective")


def study_surrogate(*, study: Study, query: Mapping[str, str]) -> dict[str, Any]:
    """The surrogate of an adaptive study: with no parameter in `query`, its map over two
    sampled parameters (grid.x, grid.y; grid.size cells a side) and the sampled points; with
    a value for every sampled parameter, the prediction there with its standard deviation."""
    if study.spec.get("combine") != "adaptive":
        raise ApplicationError(
            "this study is not adaptive (combine: adaptive): it has no surrogate; plot its "
            "results instead (GET /api/v1/studies/{id}/plot/)",
            field="combine",
        )
    plan = stored_plan(study)
    observed = study_observed(study=study, objectives=plan.objectives)
    models = study_models(observed=observed, plan=plan)
    bounds = observed.bounds
    out: dict[str, Any] = {"progress": progress(study=study, plan=plan)}
    units = parameter_units(study)
    out["parameters"] = [
        {"name": b.name, "min": b.low, "max": b.high, "unit": units.get(b.name, "")} for b in bounds
    ]
    point_query = {k: v for k, v in query.items() if k not in GRID_KEYS}
    if point_query:
        point = parse_prediction_query(point_query, bounds=bounds)
        out["at"] = point
        out["prediction"] = predict(models, point)
        out["missing"] = [o for o in plan.objectives if o not in models]
        return out
    names = [b.name for b in bounds]
    x = _grid_axis(query, "grid.x", names, default=names[0])
    y = _grid_axis(query, "grid.y", names, default=names[1]) if len(names) > 1 else None
    if y is not None and x == y:
        raise ApplicationError(
            f"grid.y: choose a parameter other than grid.x ({x}); one of "
            f"{', '.join(n for n in names if n != x)}",
            field="grid.y",
        )
    size = _grid_size(query.get("grid.size"))
    objective = _grid_objective(query, plan.objectives)
    # the map is drawn from MAP_NEEDS values on: one run says nothing of a slope
    drawn = {n: m for n, m in models.items() if len(observed.values[n][1]) >= MAP_NEEDS}
    # the parameters not on the map are held at the best run's values
    direction = plan.direction_of(objective)
    best = best_run(observed, objective=objective, direction=direction)
    others = [n for n in names if n not in (x, y)]
    if drawn:
        grid = surrogate_grid(
            drawn, bounds=bounds, x=x, y=y, size=size, at=best[1] if best else None
        )
        grid["fixed_from"] = (
            {"index": best[0], "objective": objective, "direction": direction, "value": best[2]}
            if best and others
            else None
        )
        out["grid"] = grid
    else:
        out["grid"] = None
    out["samples"] = [
        {**point, "batch": plan.batch_of(i, study.batch_starts)}
        for i, point in zip(observed.indexes, observed.points, strict=True)
    ]
    out["values"] = observed.found
    out["observed"] = {name: len(vals) for name, (_, vals) in observed.values.items()}
    out["needs"] = MAP_NEEDS
    return out


def parameter_units(study: Study) -> dict[str, str]:
    """The sampled parameters' units, as the study's template gives them ("" otherwise)."""
    template = study.template
    if template is None:
        return {}
    raw = template.spec.get("parameters") or {}
    return {name: str((d or {}).get("unit") or "") for name, d in raw.items()}


def _grid_objective(query: Mapping[str, str], objectives: tuple[str, ...]) -> str:
    value = query.get("grid.objective") or objectives[0]
    if value not in objectives:
        raise ApplicationError(
            f"grid.objective: the surrogate learns no objective {value!r}; choose one of "
            f"{', '.join(objectives)}",
            field="grid.objective",
        )
    return value


def _grid_axis(query: Mapping[str, str], key: str, names: list[str], *, default: str) -> str:
    value = query.get(key) or default
    if value not in names:
        raise ApplicationError(
            f"{key}: the study samples no parameter {value!r}; choose one of {', '.join(names)}",
            field=key,
        )
    return value


def _grid_size(raw: str | None) -> int:
    if raw in (None, ""):
        return GRID_SIZE
    try:
        size = int(raw)
    except ValueError:
        size = 0
    if not 2 <= size <= MAX_GRID_SIZE:
        raise ApplicationError(
            f"grid.size: give a whole number of cells a side from 2 to {MAX_GRID_SIZE}, "
            f"got {raw!r}",
            field="grid.size",
        )
    return size
