"""The divergence checks a telemetry batch goes through (pure functions, no database)."""

import math

from telemetry.convergence import DEFAULT_POLICY, check


def _check(new, policy=DEFAULT_POLICY):
    return check(policy, new=new, history=lambda name, n: [], iterations=0)


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
