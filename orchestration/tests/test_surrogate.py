"""The adaptive-sampling surrogate on known functions (orchestration/planning/surrogate.py)."""

from __future__ import annotations

import math

import numpy as np

from orchestration.planning import surrogate
from orchestration.planning.surrogate import Bound

BOX = (Bound(name="a", low=-2.0, high=2.0), Bound(name="b", low=0.0, high=10.0))


def bumpy(p) -> float:
    """A smooth 2-D function with one sharp bump a uniform design under-samples."""
    a, b = p["a"], p["b"] / 5.0
    return math.sin(1.5 * a) + 0.3 * b + 1.5 * math.exp(-((a - 1.2) ** 2 + (b - 1.4) ** 2) / 0.3)


def peak(p) -> float:
    """A single maximum of 3.0 at a = 0.7, b = 6.5."""
    return 3.0 - (p["a"] - 0.7) ** 2 - 0.1 * (p["b"] - 6.5) ** 2


def _reference():
    xs = np.linspace(-2, 2, 25)
    ys = np.linspace(0, 10, 25)
    points = [{"a": float(x), "b": float(y)} for x in xs for y in ys]
    return points, [bumpy(p) for p in points]


def test_latin_hypercube_puts_one_point_in_each_stratum_of_each_parameter():
    points = surrogate.latin_hypercube(BOX, 8, seed=3)
    assert len(points) == 8
    for bound in BOX:
        strata = sorted(
            int((p[bound.name] - bound.low) / (bound.high - bound.low) * 8) for p in points
        )
        assert strata == list(range(8))
    assert points == surrogate.latin_hypercube(BOX, 8, seed=3)  # a seed repeats the design


def test_the_map_error_falls_as_batches_are_added():
    reference, truth = _reference()
    sampled = surrogate.latin_hypercube(BOX, 8, seed=1)
    errors = []
    for _ in range(6):
        model = surrogate.fit(BOX, sampled, [bumpy(p) for p in sampled])
        errors.append(surrogate.rms_error(model, reference, truth))
        choice = surrogate.next_batch({"f": model}, size=4, goal="map", exclude=sampled)
        assert len(choice.points) == 4
        sampled += choice.points
    model = surrogate.fit(BOX, sampled, [bumpy(p) for p in sampled])
    errors.append(surrogate.rms_error(model, reference, truth))
    # 8 → 32 runs: the error falls to well under half, and never rises much between batches
    assert errors[-1] < 0.5 * errors[0], errors
    assert all(
        later < earlier * 1.25 for earlier, later in zip(errors, errors[1:], strict=False)
    ), errors


def test_map_beats_a_uniform_grid_of_the_same_runs_on_a_function_with_a_bump():
    reference, truth = _reference()
    sampled = surrogate.latin_hypercube(BOX, 9, seed=2)
    while len(sampled) < 25:
        model = surrogate.fit(BOX, sampled, [bumpy(p) for p in sampled])
        sampled += surrogate.next_batch({"f": model}, size=4, goal="map", exclude=sampled).points
    adaptive = surrogate.fit(BOX, sampled, [bumpy(p) for p in sampled])
    grid = [
        {"a": float(x), "b": float(y)} for x in np.linspace(-2, 2, 5) for y in np.linspace(0, 10, 5)
    ]
    uniform = surrogate.fit(BOX, grid, [bumpy(p) for p in grid])
    assert len(sampled) == len(grid) == 25
    assert surrogate.rms_error(adaptive, reference, truth) < surrogate.rms_error(
        uniform, reference, truth
    )


def test_expected_improvement_finds_the_optimum_within_the_budget():
    sampled = surrogate.latin_hypercube(BOX, 6, seed=4)
    while len(sampled) < 24:
        model = surrogate.fit(BOX, sampled, [peak(p) for p in sampled])
        sampled += surrogate.next_batch(
            {"f": model}, size=3, goal="optimise", direction="max", exclude=sampled
        ).points
    best = max(sampled, key=peak)
    assert peak(best) > 3.0 - 0.02  # within 0.02 of the true maximum
    assert abs(best["a"] - 0.7) < 0.15 and abs(best["b"] - 6.5) < 0.5


def test_minimising_finds_the_minimum_of_the_negated_function():
    sampled = surrogate.latin_hypercube(BOX, 6, seed=5)
    while len(sampled) < 24:
        model = surrogate.fit(BOX, sampled, [-peak(p) for p in sampled])
        sampled += surrogate.next_batch(
            {"f": model}, size=3, goal="optimise", direction="min", exclude=sampled
        ).points
    assert min(-peak(p) for p in sampled) < -3.0 + 0.02


def test_the_deviation_is_small_at_sampled_points_and_large_far_from_them():
    sampled = [
        {"a": -2.0, "b": 0.0},
        {"a": -1.5, "b": 1.0},
        {"a": -1.0, "b": 0.5},
        {"a": -2.0, "b": 2.0},
    ]
    model = surrogate.fit(BOX, sampled, [bumpy(p) for p in sampled])
    _, std = model.predict([sampled[0], {"a": 2.0, "b": 10.0}])
    assert std[0] < 0.2 * std[1]


def test_a_batch_has_distinct_new_points_and_integer_parameters_are_whole():
    box = (Bound(name="n", low=1, high=20, integer=True), Bound(name="x", low=0.0, high=1.0))
    sampled = surrogate.latin_hypercube(box, 5, seed=0)
    assert all(isinstance(p["n"], int) for p in sampled)
    model = surrogate.fit(box, sampled, [p["n"] * p["x"] for p in sampled])
    choice = surrogate.next_batch({"f": model}, size=4, exclude=sampled)
    keys = {(p["n"], p["x"]) for p in choice.points}
    assert len(keys) == 4 and not keys & {(p["n"], p["x"]) for p in sampled}
    assert all(isinstance(p["n"], int) and 1 <= p["n"] <= 20 for p in choice.points)


def test_a_finite_candidate_set_is_never_left_and_runs_out():
    candidates = [{"a": a, "b": b} for a in (-2.0, 0.0, 2.0) for b in (0.0, 10.0)]
    sampled = candidates[:2]
    model = surrogate.fit(BOX, sampled, [bumpy(p) for p in sampled])
    choice = surrogate.next_batch({"f": model}, size=10, candidates=candidates, exclude=sampled)
    assert sorted(map(str, choice.points)) == sorted(map(str, candidates[2:]))


def test_map_sends_the_next_runs_where_the_objective_changes_not_to_flat_corners():
    """Expected improvement for global fit: with runs spread evenly, a map whose objective is
    flat on one half of the box and steep on the other places its next runs on the steep
    half (the largest deviation alone would split them between the halves)."""

    def ramp(p) -> float:
        return 0.0 if p["a"] < 0 else 4.0 * p["a"] ** 2

    sampled = [
        {"a": float(a), "b": float(b)} for a in np.linspace(-2, 2, 4) for b in np.linspace(0, 10, 4)
    ]
    model = surrogate.fit(BOX, sampled, [ramp(p) for p in sampled])
    choice = surrogate.next_batch({"f": model}, size=6, goal="map", exclude=sampled, seed=3)
    steep = [p for p in choice.points if p["a"] > 0]
    assert len(steep) >= 5, choice.points
    improvement = surrogate.global_fit_improvement(
        model, surrogate.to_unit(BOX, [{"a": -1.5, "b": 5.0}, {"a": 1.5, "b": 5.0}])
    )
    assert improvement[1] > 3 * improvement[0]
