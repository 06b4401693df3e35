"""The divergence checks a telemetry batch goes through (pure functions, no database)."""

import math

from studies.policy import DEFAULT_POLICY
from telemetry.convergence import check, trust_of


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


def _trust(**kw):
    args = {
        "state": "completed",
        "end_reason": "success",
        "solver_converged": False,
        "final_residuals": {"p": 1e-4, "Ux": 2e-5},
        "drifts": {"Cd": 1e-5},
        "iterations": 500,
        "rule": None,
    }
    return trust_of(**{**args, **kw})


def test_a_run_at_its_iteration_cap_is_not_called_converged_however_low_its_residuals():
    trust, detail = _trust()
    assert trust == "iteration_limit" and detail["basis"] == "iteration_limit"
    assert "iteration limit" in detail["why"] and "p = 0.0001" in detail["why"]
    assert "policy" not in detail["why"]


def test_the_trust_flag_says_who_declared_convergence():
    trust, detail = _trust(solver_converged=True)
    assert (trust, detail["basis"]) == ("converged", "solver")
    assert "residualControl" in detail["why"]
    # a study rule: it stopped the run early, or the final residuals are below its bound
    trust, detail = _trust(end_reason="converged")
    assert (trust, detail["basis"]) == ("converged", "study_rule")
    trust, detail = _trust(rule={"residuals_below": 1e-3})
    assert (trust, detail["basis"]) == ("converged", "study_rule")
    assert "below 0.001" in detail["why"]
    trust, _ = _trust(rule={"residuals_below": 1e-5})
    assert trust == "iteration_limit"


def test_a_failed_or_cancelled_run_has_no_trust_flag_unless_it_diverged():
    assert _trust(state="failed", end_reason="exit_code")[0] == ""
    assert _trust(state="cancelled", end_reason="cancelled_by_user")[0] == ""
    assert _trust(state="failed", end_reason="diverged")[0] == "diverged"
    assert _trust(final_residuals={"p": None})[0] == "diverged"
