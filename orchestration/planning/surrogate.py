"""Adaptive sampling: a Gaussian-process surrogate of a study's objectives, and where to run next.

Pure and Django-free (docs/study-spec.md, "Adaptive sampling"). Inputs are normalised to the
unit box; each objective gets its own scikit-learn GaussianProcessRegressor with a Matern
(ν = 1.5, one length scale per parameter: once differentiable, so a kink such as an
airfoil's stall is not smoothed away) plus WhiteKernel, and normalize_y. Two goals:

- `map`: the next batch goes where the map is expected to be most wrong: the candidate with
  the largest expected improvement for global fit (Lam 2008: the squared difference between
  the surrogate's mean there and the value observed at the nearest run, plus its variance;
  relative to the objective's spread, summed over objectives), then the next one with that
  point "believed" (kriging believer: added at its predicted mean, which shrinks the
  deviation around it without refitting the hyperparameters), and so on. Variance alone
  looks only at where runs are, not at what they found, and spends runs on flat regions.
- `optimise`: expected improvement over the best value so far, batched the same way.

Candidates are a Latin hypercube (scipy.stats.qmc) of the box, or a finite set the caller gives.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

# scipy and scikit-learn are imported where a surrogate is fitted or sampled, not with this
# module: together they add ~130 MB to a process, and the portal's web and worker processes
# import the study code whether or not a tenant has an adaptive study.

GOALS = ("map", "optimise")
DIRECTIONS = ("max", "min")
CANDIDATES = 2048  # candidate points per batch choice (a Latin hypercube of the box)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Bound:
    """One varied parameter: its name and closed range; integer ones are rounded."""

    name: str
    low: float
    high: float
    integer: bool = False


def to_unit(bounds: Sequence[Bound], points: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """Points (by parameter name) as rows of the unit box."""
    x = np.array([[float(p[b.name]) for b in bounds] for p in points], dtype=float)
    x = x.reshape(len(points), len(bounds))
    low = np.array([b.low for b in bounds])
    width = np.array([b.high - b.low or 1.0 for b in bounds])
    unit: np.ndarray = (x - low) / width
    return unit


def from_unit(bounds: Sequence[Bound], x: np.ndarray) -> list[dict[str, float | int]]:
    """Rows of the unit box as points in the parameters' units (integers rounded)."""
    out = []
    for row in np.atleast_2d(x):
        point: dict[str, float | int] = {}
        for b, u in zip(bounds, row, strict=True):
            value = b.low + float(u) * (b.high - b.low)
            point[b.name] = int(round(value)) if b.integer else round(value, 9)
        out.append(point)
    return out


def latin_hypercube(bounds: Sequence[Bound], n: int, *, seed: int = 0) -> list[dict[str, Any]]:
    """`n` points of the box, one in each of n strata per parameter (scipy.stats.qmc)."""
    from scipy.stats import qmc

    if n < 1:
        return []
    sampler = qmc.LatinHypercube(d=len(bounds), rng=np.random.default_rng(seed))
    return from_unit(bounds, sampler.random(n))


def _kernel(dim: int) -> Any:
    from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

    return ConstantKernel(1.0, (1e-3, 1e3)) * Matern(
        length_scale=np.full(dim, 0.3), length_scale_bounds=(1e-2, 1e2), nu=1.5
    ) + WhiteKernel(1e-4, (1e-9, 1e-1))


@dataclasses.dataclass
class Model:
    """One objective's fitted surrogate: predict mean and standard deviation anywhere."""

    bounds: tuple[Bound, ...]
    gp: Any  # sklearn.gaussian_process.GaussianProcessRegressor, fitted
    x: np.ndarray  # the unit-box rows it was fitted on
    y: np.ndarray

    @property
    def spread(self) -> float:
        """The objective's observed spread (its standard deviation, or 1 when flat): the
        scale a deviation is judged against."""
        s = float(np.std(self.y))
        return s if s > 0 else 1.0

    def predict_unit(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        mean, std = self.gp.predict(np.atleast_2d(x), return_std=True)
        return np.asarray(mean, dtype=float), np.asarray(std, dtype=float)

    def predict(self, points: Sequence[Mapping[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
        return self.predict_unit(to_unit(self.bounds, points))

    def believing(self, x_new: np.ndarray) -> Model:
        """The same model (its hyperparameters kept) with `x_new` added at its own predicted
        mean: the kriging believer's step between the points of one batch."""
        from sklearn.gaussian_process import GaussianProcessRegressor

        mean, _ = self.predict_unit(x_new)
        x = np.vstack([self.x, np.atleast_2d(x_new)])
        y = np.concatenate([self.y, mean])
        gp = GaussianProcessRegressor(kernel=self.gp.kernel_, optimizer=None, normalize_y=True)
        gp.fit(x, y)
        return Model(bounds=self.bounds, gp=gp, x=x, y=y)


def fit(
    bounds: Sequence[Bound],
    points: Sequence[Mapping[str, Any]],
    values: Sequence[float],
    *,
    seed: int = 0,
) -> Model:
    """A surrogate of one objective from its observed `values` at `points` (≥ 1 point)."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.gaussian_process import GaussianProcessRegressor

    x = to_unit(bounds, points)
    y = np.asarray(values, dtype=float)
    gp = GaussianProcessRegressor(
        kernel=_kernel(len(bounds)),
        normalize_y=True,
        n_restarts_optimizer=2,
        random_state=seed,
    )
    with warnings.catch_warnings():  # a bound reached is fine: the fit is still the best found
        warnings.simplefilter("ignore", ConvergenceWarning)
        gp.fit(x, y)
    return Model(bounds=tuple(bounds), gp=gp, x=x, y=y)


def expected_improvement(
    mean: np.ndarray, std: np.ndarray, best: float, *, direction: str = "max"
) -> np.ndarray:
    """E[max(0, f - best)] for maximising (E[max(0, best - f)] for minimising)."""
    from scipy.stats import norm

    gain = (mean - best) if direction == "max" else (best - mean)
    std = np.maximum(std, 1e-12)
    z = gain / std
    ei: np.ndarray = gain * norm.cdf(z) + std * norm.pdf(z)
    return ei


@dataclasses.dataclass(frozen=True, kw_only=True)
class Choice:
    """The next batch, and the score a tolerance is held to: for map the largest standard
    deviation left among the candidates (relative to each objective's spread, summed over
    objectives), for optimise the largest expected improvement relative to the spread."""

    points: list[dict[str, float | int]]
    score: float


def _candidates(
    bounds: Sequence[Bound], candidates: Sequence[Mapping[str, Any]] | None, seed: int
) -> np.ndarray:
    from scipy.stats import qmc

    if candidates is not None:
        return to_unit(bounds, candidates)
    sampler = qmc.LatinHypercube(d=len(bounds), rng=np.random.default_rng(seed + 7919))
    pool: np.ndarray = sampler.random(CANDIDATES)
    return pool


def next_batch(
    models: Mapping[str, Model],
    *,
    size: int,
    goal: str = "map",
    direction: str = "max",
    seed: int = 0,
    candidates: Sequence[Mapping[str, Any]] | None = None,
    exclude: Sequence[Mapping[str, Any]] = (),
) -> Choice:
    """The next `size` points: most uncertain (map) or most promising (optimise; exactly one
    model), batched by the kriging believer. `candidates` limits the choice to a finite set
    (else a Latin hypercube of the box); points in `exclude` are never chosen again."""
    if goal not in GOALS:
        raise ValueError(f"goal must be one of {GOALS}")
    if goal == "optimise" and len(models) != 1:
        raise ValueError("optimise needs exactly one objective")
    first = next(iter(models.values()))
    bounds = first.bounds
    pool = _candidates(bounds, candidates, seed)
    taken = to_unit(bounds, exclude) if exclude else np.empty((0, len(bounds)))
    alive = np.ones(len(pool), dtype=bool)
    for row in taken:
        alive &= np.any(np.abs(pool - row) > 1e-9, axis=1)
    current = dict(models)
    chosen: list[np.ndarray] = []
    score = 0.0
    if goal == "map" and alive.any():
        score = float(np.max(_uncertainty(current, pool)[alive]))
    for i in range(size):
        if not alive.any():
            break
        scores = _scores(current, pool, goal=goal, direction=direction)
        scores[~alive] = -np.inf
        best = int(np.argmax(scores))
        if i == 0 and goal != "map":
            score = float(scores[best])
        chosen.append(pool[best])
        alive[best] = False
        if i + 1 < size:
            current = {k: m.believing(pool[best : best + 1]) for k, m in current.items()}
    points = from_unit(bounds, np.array(chosen)) if chosen else []
    return Choice(points=points, score=score)


def _uncertainty(models: Mapping[str, Model], pool: np.ndarray) -> np.ndarray:
    """Each candidate's standard deviation relative to each objective's spread, summed."""
    total = np.zeros(len(pool))
    for m in models.values():
        _, std = m.predict_unit(pool)
        total += std / m.spread
    return total


def global_fit_improvement(model: Model, pool: np.ndarray) -> np.ndarray:
    """Expected improvement for global fit at each candidate (Lam 2008), relative to the
    objective's spread: ((mean − y at the nearest run)² + variance) / spread². Large where
    the surrogate is unsure, and where it predicts something far from what the nearest run
    found (the function changes there): both are where a map is wrong."""
    from scipy.spatial import cKDTree

    mean, std = model.predict_unit(pool)
    _, nearest = cKDTree(model.x).query(pool)
    gap = mean - model.y[nearest]
    out: np.ndarray = (gap**2 + std**2) / model.spread**2
    return out


def _scores(
    models: Mapping[str, Model], pool: np.ndarray, *, goal: str, direction: str
) -> np.ndarray:
    if goal == "map":
        total = np.zeros(len(pool))
        for m in models.values():
            total += global_fit_improvement(m, pool)
        return total
    (m,) = models.values()
    mean, std = m.predict_unit(pool)
    best = float(np.max(m.y) if direction == "max" else np.min(m.y))
    return expected_improvement(mean, std, best, direction=direction) / m.spread


def rms_error(model: Model, points: Sequence[Mapping[str, Any]], truth: Sequence[float]) -> float:
    """Root-mean-square error of the model's mean against known values."""
    mean, _ = model.predict(points)
    return math.sqrt(float(np.mean((mean - np.asarray(truth, dtype=float)) ** 2)))


def grid(
    bounds: Sequence[Bound], x: str, y: str, *, size: int, fixed: Mapping[str, float]
) -> tuple[list[float], list[float], list[dict[str, float]]]:
    """A size × size grid over parameters x and y (the others at `fixed`): the axes' values
    and the points row by row (y outer, x inner, as a heat map's z[y][x])."""
    by_name = {b.name: b for b in bounds}
    xs = [by_name[x].low + (by_name[x].high - by_name[x].low) * i / (size - 1) for i in range(size)]
    ys = [by_name[y].low + (by_name[y].high - by_name[y].low) * i / (size - 1) for i in range(size)]
    points = [{**fixed, x: xv, y: yv} for yv in ys for xv in xs]
    return xs, ys, points
