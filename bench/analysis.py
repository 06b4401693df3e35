"""gci_rel_err_vs_hand and sobol_ishigami_max_abs_err.

gci_rel_err_vs_hand: the portal's grid convergence index (studies/gci.py) against the
formulas worked by hand, on solutions whose answer is known.

Each case is φ(h) = φ0 + C h^p on three levels refined by a constant ratio r (h, r h, r² h):
then q(p) = 0 in Celik et al.'s iteration, and by hand the observed order is
ln|ε32/ε21| / ln r = p, the extrapolated value φ0, e_a = |(φ1 − φ2)/φ1| and
GCI_fine = 1.25 e_a / (r^p − 1). The figure is the largest relative difference of any of
these over the cases (orders 0.5 to 4, ratios 1.1 to 4, either sign of C). The paper's own
worked example (Table 1, unequal ratios) is printed beside it.

sobol_ishigami_max_abs_err: the sensitivity a study page shows (studies/sensitivity.py), for
the Ishigami function (a = 7, b = 0.1 over [-π, π]³), whose Sobol indices are known:
S = (.3139, .4424, 0), ST = (.5576, .4424, .2437). As the portal does it: the surrogate fitted
to RUNS runs of a Latin hypercube (each run's value the function's), then Saltelli's estimator
on its mean; the figure is the largest difference of the six indices from the true ones.

pareto_hypervolume_ratio: the front a goal-pareto study grows (orchestration/planning/pareto.py,
as studies/batches.py calls it), on ZDT1 over three parameters: the initial Latin hypercube of
7 runs, then batches of 4 until BUDGET runs, each run's objectives the function's. The figure
is the hypervolume of the runs' front over the true front's (reference point (1.1, 1.1)). Beside
it, what a grid of the same three parameters needs for as much: the full factorial grids with
k = 2, 3, … levels each, until one's front reaches the same ratio (its runs: k³); and a Latin
hypercube of BUDGET runs.

Smoke mode: a handful of the GCI cases; the surrogate learns from 100 runs; the front from 16.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

from bench.common import emit, progress, setup_django, sized
from bench.problems import ISHIGAMI_FIRST, ISHIGAMI_TOTAL, ishigami, zdt1, zdt1_front

ORDERS = sized([0.5, 1.0, 1.5, 2.0, 3.0, 4.0], [1.0, 2.0])
RATIOS = sized([1.1, 1.3, 1.5, 2.0, 3.0, 4.0], [1.5, 2.0])
SLOPES = [0.3, -2.5]
RUNS = sized(300, 100)  # the runs the Ishigami surrogate learns from
BUDGET = sized(40, 16)  # the runs of the pareto study on ZDT1
PARETO_DIM, PARETO_BATCH = 3, 4


def main() -> None:
    setup_django()
    from studies.gci import gci

    worst, cases = 0.0, 0
    for p, r, c in itertools.product(ORDERS, RATIOS, SLOPES):
        h1 = 0.01
        h = [h1, r * h1, r * r * h1]
        phi0 = 1.7
        phi = [phi0 + c * x**p for x in h]
        got = gci(h, phi)
        e_a = abs((phi[0] - phi[1]) / phi[0])
        hand = {
            "p": math.log(abs((phi[2] - phi[1]) / (phi[1] - phi[0]))) / math.log(r),
            "phi_ext": phi0,
            "e_a": e_a,
            "gci_fine": 1.25 * e_a / (r**p - 1),
        }
        for name, expected in hand.items():
            worst = max(worst, abs(getattr(got, name) - expected) / abs(expected))
        cases += 1
    paper = gci([18000**-0.5, 8000**-0.5, 4500**-0.5], [6.063, 5.972, 5.863])
    progress(
        f"Celik et al. (2008) Table 1: p {paper.p:.2f} (1.53), phi_ext {paper.phi_ext:.4f} "
        f"(6.1685), GCI {100 * paper.gci_fine:.1f} % (2.2 %)"
    )
    emit(
        "gci_rel_err_vs_hand",
        worst,
        "",
        f"largest relative difference of p, phi_ext, e_a, GCI_fine from the hand formulas over "
        f"{cases} solutions of known order (orders {ORDERS[0]:g}–{ORDERS[-1]:g}, ratios "
        f"{RATIOS[0]:g}–{RATIOS[-1]:g})",
        cases=cases,
        paper={"p": paper.p, "phi_ext": paper.phi_ext, "gci_fine": paper.gci_fine},
    )


def ishigami_indices() -> None:
    import time

    from orchestration.planning import sensitivity, surrogate

    bounds = [surrogate.Bound(name=n, low=-math.pi, high=math.pi) for n in ("x1", "x2", "x3")]
    points = surrogate.latin_hypercube(bounds, RUNS, seed=1)
    t0 = time.process_time()
    model = surrogate.fit(bounds, points, ishigami(points))
    t1 = time.process_time()
    indices = sensitivity.sobol(model, samples=sensitivity.SAMPLES)
    t2 = time.process_time()
    worst = 0.0
    for index in indices:
        first, total = ISHIGAMI_FIRST[index.name], ISHIGAMI_TOTAL[index.name]
        worst = max(worst, abs(index.first - first), abs(index.total - total))
        progress(
            f"{index.name}: S {index.first:.4f} (true {first:.4f}), ST {index.total:.4f} "
            f"(true {total:.4f})"
        )
    emit(
        "sobol_ishigami_max_abs_err",
        worst,
        "",
        f"largest difference of the Ishigami function's six Sobol indices from the true ones, "
        f"on the surrogate of {RUNS} runs (Latin hypercube), {sensitivity.SAMPLES} base samples; "
        f"fit {t1 - t0:.1f} CPU-s, indices {t2 - t1:.1f} CPU-s",
        runs=RUNS,
        indices=[dataclasses.asdict(i) for i in indices],
    )


def pareto_front() -> None:
    import time

    import numpy as np

    from orchestration.planning import pareto, surrogate

    bounds = [surrogate.Bound(name=f"x{i}", low=0.0, high=1.0) for i in range(1, PARETO_DIM + 1)]
    goals = [pareto.Objective(name=n, direction="min") for n in ("f1", "f2")]
    reference = np.array([1.1, 1.1])
    true = pareto.hypervolume(zdt1_front(), reference)

    def ratio(points: list[dict[str, float]]) -> float:
        y = np.array([[v["f1"], v["f2"]] for v in map(zdt1, points)])
        return pareto.hypervolume(y, reference) / true

    initial = 2 * PARETO_DIM + 1  # the portal's default initial design
    points = surrogate.latin_hypercube(bounds, initial, seed=1)
    t0 = time.process_time()
    batch = 1
    while len(points) < BUDGET:
        found: dict[str, list[float | None]] = {"f1": [], "f2": []}
        for value in map(zdt1, points):
            for name in found:
                found[name].append(value[name])
        models = {
            name: surrogate.fit(bounds, points, [float(v) for v in values if v is not None], seed=1)
            for name, values in found.items()
        }
        choice = pareto.next_batch(
            models,
            objectives=goals,
            found=found,
            size=min(PARETO_BATCH, BUDGET - len(points)),
            seed=1 + batch,
            exclude=points,
        )
        points += choice.points
        batch += 1
        progress(f"batch {batch}: {len(points)} runs, hypervolume ratio {ratio(points):.4f}")
    cpu = time.process_time() - t0
    got = ratio(points)
    lhs = ratio(surrogate.latin_hypercube(bounds, BUDGET, seed=1))
    levels, grid_ratio = 1, 0.0
    while grid_ratio < got and levels < 40:
        levels += 1
        axis = [i / (levels - 1) for i in range(levels)]
        grid = [
            {f"x{i + 1}": v for i, v in enumerate(combo)}
            for combo in itertools.product(axis, repeat=PARETO_DIM)
        ]
        grid_ratio = ratio(grid)
    emit(
        "pareto_hypervolume_ratio",
        got,
        "",
        f"hypervolume of the front a pareto study found on ZDT1 ({PARETO_DIM} parameters) in "
        f"{BUDGET} runs ({initial} initial, batches of {PARETO_BATCH}) over the true front's; a "
        f"grid needs {levels**PARETO_DIM} runs ({levels} levels each) for {grid_ratio:.3f}, a "
        f"Latin hypercube of {BUDGET} runs reaches {lhs:.3f}; planning {cpu:.1f} CPU-s",
        runs=BUDGET,
        grid_runs=levels**PARETO_DIM,
        grid_ratio=grid_ratio,
        lhs_ratio=lhs,
    )


if __name__ == "__main__":
    main()
    ishigami_indices()
    pareto_front()
