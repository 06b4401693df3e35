"""The multi-objective planner on problems whose fronts are known
(orchestration/planning/pareto.py; the problems are bench/problems.py's)."""

from __future__ import annotations

import numpy as np
import pytest

from bench.problems import dtlz2, dtlz2_front, zdt1, zdt1_front
from orchestration.planning import pareto, surrogate

MIN2 = (pareto.Objective(name="f1", direction="min"), pareto.Objective(name="f2", direction="min"))


def box(n: int) -> list[surrogate.Bound]:
    return [surrogate.Bound(name=f"x{i}", low=0.0, high=1.0) for i in range(1, n + 1)]


def grow(problem, bounds, objectives, *, initial, budget, batch=4, constraints=(), seed=0):
    """The loop a pareto study runs: fit, choose a batch, run it (the problem), again."""
    points = surrogate.latin_hypercube(bounds, initial, seed=seed)
    values = [problem(p) for p in points]
    names = {o.name for o in objectives} | {c.name for c in constraints}
    while len(points) < budget:
        found = {n: [v[n] for v in values] for n in names}
        models = {n: surrogate.fit(bounds, points, found[n], seed=seed) for n in names}
        choice = pareto.next_batch(
            models,
            objectives=objectives,
            constraints=constraints,
            found=found,
            size=min(batch, budget - len(points)),
            seed=seed + len(points),
            exclude=points,
        )
        assert choice.points, "the planner ran out of points to choose"
        points += choice.points
        values += [problem(p) for p in choice.points]
    return points, values


def test_the_front_and_its_hypervolume_match_a_hand_count():
    y = np.array([[1.0, 4.0], [2.0, 2.0], [4.0, 1.0], [3.0, 3.0], [2.0, 2.0]])
    usable = np.array([True, True, True, True, True])
    # (3, 3) is dominated by (2, 2); the second (2, 2) is a duplicate
    assert pareto.front_mask(y, usable).tolist() == [True, True, True, False, False]
    # to (5, 5), by hand: the staircase 1 × 1 + 2 × 3 + 1 × 4
    assert pareto.hypervolume(y, np.array([5.0, 5.0])) == pytest.approx(11.0)
    # runs that break a constraint are not on the front, whatever their values
    usable[[1, 4]] = False
    assert pareto.front_mask(y, usable).tolist() == [True, False, True, True, False]
    # maximised objectives are turned round
    flipped = pareto.minimised(
        np.array([[3.0, 1.0]]), (MIN2[0], pareto.Objective(name="g", direction="max"))
    )
    assert flipped.tolist() == [[3.0, -1.0]]


def test_a_two_objective_front_is_found_in_few_runs():
    bounds = box(2)
    points, values = grow(zdt1, bounds, MIN2, initial=5, budget=21)
    reference = np.array([1.1, 1.1])
    found = pareto.hypervolume(np.array([[v["f1"], v["f2"]] for v in values]), reference)
    true = pareto.hypervolume(zdt1_front(), reference)
    assert found / true > 0.9, found / true
    # the same number of runs spread by a Latin hypercube finds far less of it
    lhs = [zdt1(p) for p in surrogate.latin_hypercube(bounds, 21, seed=0)]
    spread = pareto.hypervolume(np.array([[v["f1"], v["f2"]] for v in lhs]), reference)
    assert found > spread * 1.2, (found, spread)
    assert len({tuple(p.values()) for p in points}) == len(points)  # no point twice


def test_a_three_objective_front_reaches_across_the_sphere():
    objectives = tuple(pareto.Objective(name=f"f{i}", direction="min") for i in (1, 2, 3))
    _, values = grow(dtlz2, box(3), objectives, initial=7, budget=23)
    y = np.array([[v["f1"], v["f2"], v["f3"]] for v in values])
    reference = np.array([1.1, 1.1, 1.1])
    true = pareto.hypervolume(dtlz2_front(60), reference)
    assert pareto.hypervolume(y, reference) / true > 0.6
    front = y[pareto.front_mask(y, np.ones(len(y), dtype=bool))]
    # each objective's best end is reached: a corner of the octant per objective
    assert (front.min(axis=0) < 0.35).all(), front.min(axis=0)


def test_a_constraint_sends_the_runs_where_it_holds():
    # f1 ≥ 0.6 cuts ZDT1's front to its right part; the initial design mostly breaks it
    limit = pareto.Constraint(name="f1", low=0.6)
    points, values = grow(zdt1, box(2), MIN2, initial=5, budget=17, constraints=(limit,))
    later = values[5:]
    assert sum(v["f1"] >= 0.6 for v in later) >= 0.75 * len(later)
    found = {n: [v[n] for v in values] for n in ("f1", "f2")}
    ok = pareto.feasible(found, (limit,))
    y = np.array([[v["f1"], v["f2"]] for v in values])
    assert not (pareto.front_mask(y, ok) & ~ok).any()


def test_before_any_feasible_run_the_likeliest_feasible_point_comes_first():
    bounds = box(2)
    points = surrogate.latin_hypercube(bounds, 6, seed=2)
    values = [zdt1(p) for p in points]
    found = {n: [v[n] for v in values] for n in ("f1", "f2")}
    models = {n: surrogate.fit(bounds, points, found[n]) for n in found}
    # nothing reached f1 ≥ 0.97 yet: the next point goes to the right edge, where it may
    limit = pareto.Constraint(name="f1", low=0.97)
    assert not pareto.feasible(found, (limit,)).any()
    choice = pareto.next_batch(
        models, objectives=MIN2, constraints=(limit,), found=found, size=2, exclude=points
    )
    assert choice.score == 1.0
    assert all(p["x1"] > 0.85 for p in choice.points), choice.points
