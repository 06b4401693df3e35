"""Which parameters an objective depends on: first-order and total Sobol indices computed on a
study's surrogate (orchestration/planning/surrogate.py), with Saltelli's estimators as SciPy
implements them (`scipy.stats.sobol_indices`) and bootstrap confidence intervals.

The first-order index S_i is the share of the objective's variance that parameter i explains
alone; the total index ST_i adds every interaction it takes part in (ST_i ≥ S_i; a parameter
with ST_i ≈ 0 can be fixed). The parameters vary uniformly over their ranges, independently.

The estimator runs on the surrogate's mean, never on runs: `samples` (a power of two) costs
samples × (parameters + 2) predictions, not solver runs. So the intervals are those of the
estimator (its sampling error, by bootstrap); how well the surrogate knows the objective is
a separate question, which the number of runs behind it and its spread answer. Pure and
Django-free.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from orchestration.planning.surrogate import Model

SAMPLES = 4096  # base samples of the estimator (a power of two, for its Sobol' sequence)
MIN_SAMPLES, MAX_SAMPLES = 256, 65536
CONFIDENCE = 0.95
RESAMPLES = 200  # bootstrap resamples of the intervals


@dataclasses.dataclass(frozen=True, kw_only=True)
class Index:
    """One parameter's indices, each with its confidence interval (low, high)."""

    name: str
    first: float
    first_interval: tuple[float, float]
    total: float
    total_interval: tuple[float, float]


def sobol(
    model: Model,
    *,
    samples: int = SAMPLES,
    seed: int = 0,
    confidence: float = CONFIDENCE,
) -> list[Index]:
    """The Sobol indices of `model`'s mean over its parameters' box, one per parameter in the
    model's order. `samples` must be a power of two in [MIN_SAMPLES, MAX_SAMPLES]."""
    from scipy.stats import sobol_indices, uniform

    if samples & (samples - 1) or not MIN_SAMPLES <= samples <= MAX_SAMPLES:
        raise ValueError(
            f"samples must be a power of two from {MIN_SAMPLES} to {MAX_SAMPLES}, got {samples}"
        )
    dims = len(model.bounds)

    def mean(x: np.ndarray) -> np.ndarray:  # x: (parameters, n) in the unit box
        predicted, _ = model.predict_unit(x.T)
        out: np.ndarray = predicted.reshape(1, -1)
        return out

    rng = np.random.default_rng(seed)
    result = sobol_indices(func=mean, n=samples, dists=[uniform(0, 1)] * dims, rng=rng)
    boot = result.bootstrap(confidence_level=confidence, n_resamples=RESAMPLES)
    first, total = np.ravel(result.first_order), np.ravel(result.total_order)
    first_ci = boot.first_order.confidence_interval
    total_ci = boot.total_order.confidence_interval
    return [
        Index(
            name=bound.name,
            first=_clip(first[i]),
            first_interval=(_clip(np.ravel(first_ci.low)[i]), _clip(np.ravel(first_ci.high)[i])),
            total=_clip(total[i]),
            total_interval=(_clip(np.ravel(total_ci.low)[i]), _clip(np.ravel(total_ci.high)[i])),
        )
        for i, bound in enumerate(model.bounds)
    ]


def _clip(value: float) -> float:
    """An estimate in [0, 1] (Saltelli's estimators can step a little outside), rounded."""
    return round(min(1.0, max(0.0, float(value))), 6)
