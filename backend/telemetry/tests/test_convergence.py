"""The divergence checks a telemetry batch goes through (pure functions, no database)."""

import math

from studies.policy import DEFAULT_POLICY
from telemetry.convergence import check


def _check(new, policy=DEFAULT_POLICY):
    columns = {name: ([p[0] for p in pts], [p[1] for p in pts]) for name, pts in new.items()}
    return check(policy, new=columns, history=lambda name, n: [], iterations=0)


def test_a_gap_or_a_non_finite_y_is_divergence_and_names_the_series():
    assert _check({"residual.p": [[1, 0.5], [2, None]]}).detail == "residual.p became NaN/Inf"
    assert _check({"f.Cl": [(1, 0.5), (2, math.inf)]}).outcome == "diverged"
    assert _check({"f.Cl": [[1, -math.inf]]}).outcome == "diverged"


def test_finite_values_whose_sum_overflows_are_not_divergence():
    assert _check({"f.big": [[1, 1e308], [2, 1e308], [3, -1e308]]}) is None
    assert _check({"residual.p": [[i, 1.0 / (i + 1)] for i in range(10_000)]}) is None


def test_resource_series_and_a_policy_without_the_nan_rule_are_not_judged_on_gaps():
    assert _check({"cpu.percent": [[1, None]], "memory.rss": [[1, math.nan]]}) is None
    assert _check({"residual.p": [[1, None]]}, {"diverge": {"nan": False}}) is None


def test_residual_and_courant_limits_and_the_residual_target_read_the_new_columns():
    policy = {
        "diverge": {"nan": True, "residual_above": 10, "courant_above": 5},
        "converge": {"residuals_below": 1e-4},
    }
    rising = {"residual.p": [[1, 0.5], [2, 12.0]]}
    assert _check(rising, policy).detail == "residual.p = 12 above 10 at time 2"
    fast = {"courant.max": [[1, 0.5], [2, 7.5]], "residual.p": [[2, 0.1]]}
    assert _check(fast, policy).detail == "courant.max = 7.5 above 5 at time 2"
    done = {"residual.p": [[1, 0.1], [2, 5e-5]], "residual.Ux": [[2, 1e-6]]}
    decision = _check(done, policy)
    assert decision.outcome == "converged" and "residual.p = 5e-05" in decision.detail
    assert _check({"residual.p": [[1, 5e-5], [2, 0.5]]}, policy) is None  # the last counts
