"""Multi-objective and constrained adaptive sampling: where to run next to grow a Pareto front.

Each objective keeps its own Gaussian-process surrogate (orchestration/planning/surrogate.py),
and so does each constrained quantity. A batch is chosen by Thompson sampling with the
hypervolume improvement as the acquisition (Bradford et al. 2018, "Efficient multiobjective
optimization employing Gaussian processes, spectral sampling and a genetic algorithm", the
TSEMO scheme, on a candidate set instead of a genetic algorithm):

1. one joint posterior sample of every surrogate over the candidates (a Latin hypercube of the
   box plus small perturbations of the current front's points, where the front is refined);
2. among the candidates whose sampled constrained values hold, the one whose sampled
   objectives add the most hypervolume to the front of the runs so far (each objective scaled
   from the best to the worst value of the feasible runs; the reference point 10 % past the
   worst);
3. that point's sampled objectives join the front, a new sample is drawn, and the next point
   is chosen the same way, until the batch is full. Each point comes from its own sample, so
   a batch spreads over the places the front may grow without a kriging believer.

Before any run is feasible, the candidate most likely to be feasible comes first. One
objective is the same scheme (the hypervolume of one objective is its best value), which is
how a constrained `optimise` goal is served.

Hypervolumes and non-dominance are computed with moocore (the exact algorithms of the
performance-assessment literature, in C). Pure and Django-free.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from orchestration.planning.surrogate import Bound, Choice, Model, from_unit, to_unit

CANDIDATES = 512  # the Latin hypercube part of the candidate set
NEAR_FRONT = 512  # and at most this many perturbations of the front's points
NEAR_SCALE = 0.05  # their standard deviation, as a fraction of each parameter's range
REFERENCE = 1.1  # the reference point, on the front's own scale (0 best, 1 worst)
JITTER = 1e-9


@dataclasses.dataclass(frozen=True, kw_only=True)
class Objective:
    """One objective of the front and which way is better."""

    name: str
    direction: str  # max | min


@dataclasses.dataclass(frozen=True, kw_only=True)
class Constraint:
    """A quantity the runs must keep within [low, high] (either end may be open)."""

    name: str
    low: float | None = None
    high: float | None = None

    def holds(self, values: np.ndarray) -> np.ndarray:
        """Which of `values` keep the constraint (NaN never does)."""
        ok: np.ndarray = np.isfinite(values)
        if self.low is not None:
            ok &= values >= self.low
        if self.high is not None:
            ok &= values <= self.high
        return ok


def minimised(values: np.ndarray, objectives: Sequence[Objective]) -> np.ndarray:
    """Rows of objective values turned to minimisation (maximised ones negated)."""
    signs = np.array([-1.0 if o.direction == "max" else 1.0 for o in objectives])
    out: np.ndarray = np.asarray(values, dtype=float).reshape(-1, len(objectives)) * signs
    return out


def feasible(
    found: Mapping[str, Sequence[float | None]], constraints: Sequence[Constraint]
) -> np.ndarray:
    """Per run (as `found`, each quantity's values by run), whether every constraint holds."""
    n = len(next(iter(found.values()))) if found else 0
    ok = np.ones(n, dtype=bool)
    for c in constraints:
        ok &= c.holds(column(found[c.name]))
    return ok


def front_mask(y: np.ndarray, usable: np.ndarray) -> np.ndarray:
    """Which rows of `y` (minimisation form) are on the Pareto front of the usable rows: usable,
    finite and dominated by no other usable row (of duplicates, the first)."""
    import moocore

    usable = usable & np.all(np.isfinite(y), axis=1)
    mask = np.zeros(len(y), dtype=bool)
    if usable.any():
        mask[np.flatnonzero(usable)] = moocore.is_nondominated(y[usable])
    return mask


def hypervolume(y: np.ndarray, reference: np.ndarray) -> float:
    """The volume the rows of `y` (minimisation form) dominate up to `reference`."""
    import moocore

    inside = y[np.all(y < reference, axis=1)] if len(y) else y
    if not len(inside):
        return 0.0
    return float(moocore.hypervolume(inside, ref=reference))


@dataclasses.dataclass(frozen=True)
class Scale:
    """The runs' scale: per objective, 0 at the best value a feasible run reached, 1 at the
    worst. (The front's own range would be narrower, and would leave no hypervolume to gain
    past its ends: the front would fill in where it is and never reach out.)"""

    low: np.ndarray
    width: np.ndarray

    @classmethod
    def of(cls, rows: np.ndarray) -> Scale:
        """From the feasible runs' rows (finite, at least one); a flat objective spans 1."""
        low = rows.min(axis=0)
        width = rows.max(axis=0) - low
        return cls(low=low, width=np.where(width > 0, width, 1.0))

    def __call__(self, y: np.ndarray) -> np.ndarray:
        out: np.ndarray = (y - self.low) / self.width
        return out


def next_batch(
    models: Mapping[str, Model],
    *,
    objectives: Sequence[Objective],
    constraints: Sequence[Constraint] = (),
    found: Mapping[str, Sequence[float | None]],
    size: int,
    seed: int = 0,
    exclude: Sequence[Mapping[str, Any]] = (),
    candidates: Sequence[Mapping[str, Any]] | None = None,
) -> Choice:
    """The next `size` points for the front of `objectives` within `constraints`. `models`
    holds a fitted surrogate of every objective and constrained quantity; `found` each one's
    value per run so far (None where a run has none), in the order of `exclude`, the runs'
    points (never chosen again). The score is the first point's sampled hypervolume
    improvement, relative to the front's hypervolume (1 while there is no feasible run)."""
    names = [o.name for o in objectives]
    missing = [n for n in (*names, *(c.name for c in constraints)) if n not in models]
    if missing:
        raise ValueError(f"no surrogate of {missing[0]!r}")
    bounds = models[names[0]].bounds
    rng = np.random.default_rng(seed)
    y = minimised(np.column_stack([column(found[n]) for n in names]), objectives)
    ok = feasible(found, constraints) if constraints else np.ones(len(y), dtype=bool)
    on_front = front_mask(y, ok)
    points = to_unit(bounds, exclude) if len(exclude) else np.empty((0, len(bounds)))
    near = points[on_front] if len(points) else points
    pool = _candidates(bounds, near, candidates, rng)
    alive = np.ones(len(pool), dtype=bool)
    for row in points:
        alive &= np.any(np.abs(pool - row) > 1e-9, axis=1)
    front = y[on_front]
    scale = Scale.of(y[ok & np.all(np.isfinite(y), axis=1)]) if len(front) else None
    reference = np.full(len(objectives), REFERENCE)
    base = hypervolume(scale(front), reference) if scale is not None else 0.0
    # the surrogates do not change within a batch: each is factorised once, sampled per point
    posteriors = {name: _posterior(m, pool) for name, m in models.items()}
    chosen: list[int] = []
    score = 0.0
    for i in range(size):
        if not alive.any():
            break
        sample = {name: draw(rng) for name, draw in posteriors.items()}
        holds = np.ones(len(pool), dtype=bool)
        for c in constraints:
            holds &= c.holds(sample[c.name])
        sampled = minimised(np.column_stack([sample[n] for n in names]), objectives)
        if scale is None:  # nothing feasible yet: the likeliest feasible, then the best sampled
            gain = _feasibility(models, constraints, pool) + holds.astype(float) * 1e-3
            best = int(np.argmax(np.where(alive, gain, -np.inf)))
            if i == 0:
                score = 1.0
        else:
            gain = _improvement(scale(sampled), scale(front), reference, base, alive & holds)
            if np.max(gain) <= 0:  # the sample adds nothing feasible: come closest to the front
                gain = -_distance(scale(sampled), scale(front))
                gain[~(alive & holds)] = -np.inf
                if not np.isfinite(gain).any():
                    gain = np.where(alive, _feasibility(models, constraints, pool), -np.inf)
                best = int(np.argmax(gain))
                improvement = 0.0
            else:
                best = int(np.argmax(gain))
                improvement = float(gain[best])
            if i == 0:
                score = improvement / base if base > 0 else float(improvement > 0)
            if holds[best]:  # the chosen point's sample joins the front the next point grows
                front = np.vstack([front, sampled[best : best + 1]])
                front = front[front_mask(front, np.ones(len(front), dtype=bool))]
                base = hypervolume(scale(front), reference)
        chosen.append(best)
        alive[best] = False
    out = from_unit(bounds, pool[chosen]) if chosen else []
    return Choice(points=out, score=score)


def column(values: Sequence[float | None]) -> np.ndarray:
    """Values by run as a float array (None: NaN)."""
    return np.array([math.nan if v is None else float(v) for v in values], dtype=float)


def _candidates(
    bounds: Sequence[Bound],
    front_points: np.ndarray,
    candidates: Sequence[Mapping[str, Any]] | None,
    rng: np.random.Generator,
) -> np.ndarray:
    """A Latin hypercube of the box (or the caller's finite set), plus perturbations of the
    front's points that stay inside it."""
    from scipy.stats import qmc

    if candidates is not None:
        pool: np.ndarray = to_unit(bounds, candidates)
        return pool
    pool = qmc.LatinHypercube(d=len(bounds), rng=rng).random(CANDIDATES)
    if len(front_points):
        if len(front_points) > NEAR_FRONT:
            front_points = front_points[rng.choice(len(front_points), NEAR_FRONT, replace=False)]
        near = np.repeat(front_points, NEAR_FRONT // len(front_points), axis=0)
        near = np.clip(near + rng.normal(0.0, NEAR_SCALE, near.shape), 0.0, 1.0)
        pool = np.vstack([pool, near])
    return pool


def _posterior(model: Model, pool: np.ndarray) -> Callable[[np.random.Generator], np.ndarray]:
    """Draws of the surrogate's posterior over the pool, jointly (a sampled surface is smooth,
    not noise), in the objective's units: factorised once, each draw one product."""
    mean, cov = model.gp.predict(pool, return_cov=True)
    mean = np.asarray(mean, dtype=float)
    cov = np.asarray(cov, dtype=float)
    scale = max(float(np.mean(np.diag(cov))), 1e-300)
    for jitter in (JITTER, 1e-7, 1e-5, 1e-3):
        try:
            chol = np.linalg.cholesky(cov + np.eye(len(pool)) * jitter * scale)
            break
        except np.linalg.LinAlgError:
            continue
    else:  # never positive definite: independent draws from the marginals
        chol = np.diag(np.sqrt(np.clip(np.diag(cov), 0, None)))

    def draw(rng: np.random.Generator) -> np.ndarray:
        out: np.ndarray = mean + chol @ rng.standard_normal(len(pool))
        return out

    return draw


def _feasibility(
    models: Mapping[str, Model], constraints: Sequence[Constraint], pool: np.ndarray
) -> np.ndarray:
    """Each candidate's probability that every constraint holds (independent surrogates)."""
    from scipy.stats import norm

    p = np.ones(len(pool))
    for c in constraints:
        mean, std = models[c.name].predict_unit(pool)
        std = np.maximum(std, 1e-12)
        above = norm.cdf((mean - c.low) / std) if c.low is not None else 1.0
        below = norm.cdf((c.high - mean) / std) if c.high is not None else 1.0
        p *= np.clip(above + below - 1.0, 0.0, 1.0)  # P(low ≤ value ≤ high)
    return p


def _improvement(
    sampled: np.ndarray, front: np.ndarray, reference: np.ndarray, base: float, usable: np.ndarray
) -> np.ndarray:
    """The hypervolume each usable candidate's sampled objectives add to the front (0 for the
    dominated and the unusable; only the candidates no front point dominates are measured)."""
    import moocore

    gain = np.zeros(len(sampled))
    inside = usable & np.all(sampled < reference, axis=1)
    if not inside.any():
        return gain
    dominated = np.zeros(len(sampled), dtype=bool)
    for row in front:
        dominated |= np.all(sampled >= row, axis=1)
    measure = np.flatnonzero(inside & ~dominated)
    hv = moocore.Hypervolume(ref=reference)
    for k in measure:
        gain[k] = hv(np.vstack([front, sampled[k : k + 1]])) - base
    return gain


def _distance(sampled: np.ndarray, front: np.ndarray) -> np.ndarray:
    """How far each candidate is from not being dominated: the smallest amount, over the
    front's points, by which it would have to improve on every objective (additive ε)."""
    gaps = sampled[:, None, :] - front[None, :, :]  # candidates × front × objectives
    out: np.ndarray = np.min(np.max(gaps, axis=2), axis=1)
    return out
