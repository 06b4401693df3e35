"""A study's sensitivity (GET /api/v1/studies/{id}/sensitivity/): first-order and total
Sobol indices of each objective over the parameters the study varies, computed on the
surrogate fitted to its completed runs (orchestration/planning/sensitivity.py).

Any study whose runs vary numbers over a range: a sampled one (its min/max bounds) or a grid
(each numeric parameter with two values or more, from its lowest to its highest). Each
objective needs MIN_RUNS completed runs with a value, and PER_PARAMETER per parameter, before
its surrogate says anything of the parameters' shares; one without them is listed as skipped,
with how many it has.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from core.exceptions import ApplicationError
from orchestration.planning import sensitivity, surrogate
from studies.models import Study
from studies.space import Space
from studies.surrogate_map import (
    Observed,
    fitted_model,
    kept,
    observations_key,
    parameter_units,
    study_observed,
    study_space,
)

MIN_RUNS = 8
PER_PARAMETER = 4

# the indices by the surrogate they were computed on and the samples asked for: a study page
# asks again whenever it is opened, and the estimator is the costly part after the fit
_COMPUTED: OrderedDict[tuple, list[sensitivity.Index]] = OrderedDict()


def varied_bounds(space: Space) -> tuple[surrogate.Bound, ...]:
    """The parameters the study varies over a range of numbers: a sampled one's bounds, a
    grid axis's lowest and highest values (two distinct numbers at least)."""
    out = []
    for axis in space.axes:
        if axis.low is not None and axis.high is not None:
            if axis.high > axis.low:
                out.append(
                    surrogate.Bound(
                        name=axis.name, low=axis.low, high=axis.high, integer=axis.integer
                    )
                )
            continue
        values = axis.values or ()
        numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
        if len(numbers) == len(values) and len(set(numbers)) >= 2:
            low, high = float(min(numbers)), float(max(numbers))
            integer = all(isinstance(v, int) for v in numbers)
            out.append(surrogate.Bound(name=axis.name, low=low, high=high, integer=integer))
    return tuple(out)


def runs_needed(parameters: int) -> int:
    return max(MIN_RUNS, PER_PARAMETER * parameters)


def study_sensitivity(*, study: Study, query: Mapping[str, str]) -> dict[str, Any]:
    """Each objective's indices (or `objective`'s alone), `samples` base samples of the
    estimator (a power of two); 400s name the query parameter or the spec field at fault."""
    names = list((study.objectives or {}).keys())
    if not names:
        raise ApplicationError(
            "the study has no objectives: add them (PUT /api/v1/studies/{id}/objectives/) to "
            "see which parameters they depend on",
            field="objectives",
        )
    chosen = query.get("objective")
    if chosen is not None and chosen not in names:
        raise ApplicationError(
            f"objective: the study has no objective {chosen!r}; one of {', '.join(names)}",
            field="objective",
        )
    samples = _samples(query.get("samples"))
    bounds = varied_bounds(study_space(study, combine=study.spec.get("combine") or "grid"))
    if not bounds:
        raise ApplicationError(
            "parameters: the study varies no parameter over a range of numbers (a sampled "
            "min/max, or two values or more), so no parameter has a share of an objective's "
            "variance to find",
            field="parameters",
        )
    wanted = (chosen,) if chosen is not None else tuple(names)
    observed = study_observed(study=study, objectives=wanted, bounds=bounds)
    needed = runs_needed(len(bounds))
    seed = study.spec.get("seed")
    seed = seed if isinstance(seed, int) and not isinstance(seed, bool) else 0
    units = parameter_units(study)
    out: dict[str, Any] = {
        "samples": samples,
        "confidence": sensitivity.CONFIDENCE,
        "runs_needed": needed,
        "parameters": [
            {"name": b.name, "min": b.low, "max": b.high, "unit": units.get(b.name, "")}
            for b in bounds
        ],
        "objectives": [],
        "skipped": [],
    }
    for name in wanted:
        runs = len(observed.values[name][1])
        if runs < needed:
            if chosen is not None:
                raise ApplicationError(
                    f"objective: {name!r} has a value in {runs} completed run(s); its "
                    f"sensitivity over {len(bounds)} parameter(s) needs {needed}",
                    field="objective",
                )
            out["skipped"].append(
                {"name": name, "runs": runs, "reason": f"{runs} of the {needed} runs it needs"}
            )
            continue
        indices = _indices(observed, name, seed=seed, samples=samples)
        out["objectives"].append(
            {
                "name": name,
                "runs": runs,
                "indices": [
                    {
                        "parameter": i.name,
                        "first": i.first,
                        "first_interval": list(i.first_interval),
                        "total": i.total,
                        "total_interval": list(i.total_interval),
                    }
                    for i in indices
                ],
            }
        )
    return out


def _indices(
    observed: Observed, objective: str, *, seed: int, samples: int
) -> list[sensitivity.Index]:
    """The objective's indices on its surrogate (computed once per set of runs and samples)."""
    return kept(
        _COMPUTED,
        (samples, *observations_key(observed, objective, seed)),
        lambda: sensitivity.sobol(
            fitted_model(observed=observed, objective=objective, seed=seed),
            samples=samples,
            seed=seed,
        ),
    )


def _samples(raw: str | None) -> int:
    if raw is None or raw == "":
        return sensitivity.SAMPLES
    try:
        value = int(raw)
    except ValueError:
        value = -1
    low, high = sensitivity.MIN_SAMPLES, sensitivity.MAX_SAMPLES
    if value < low or value > high or value & (value - 1):
        choices = ", ".join(str(2**k) for k in range(int(math.log2(low)), int(math.log2(high)) + 1))
        raise ApplicationError(
            f"samples: {raw!r} is not one of {choices} (the estimator's base samples, a power "
            "of two)",
            field="samples",
        )
    return value
