"""Convergence policies applied to a run's telemetry, and the trust flag of a run.

Policies (studies.policy: per study, defaulted by templates) are checked on every telemetry
batch, on the new points plus a short window of history, so any backend's runs are judged the
same way by the portal. A check returns a Decision; the caller (the ingest app) stops the run.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from telemetry.batches import gapless

TRUST_RESIDUAL = 1e-3  # final initial residuals below this count as converged
TRUST_DRIFT = 1e-3  # relative objective drift over the trust window
TRUST_WINDOW = 20
# a mean_last objective whose window swings by more than this share of its mean (half its
# peak-to-peak over max(|mean|, floor)) is unsteady: its mean is not a steady answer
TRUST_OSCILLATION = 0.02
TRUST_OSCILLATION_FLOOR = 1e-3  # in the objective's units: means nearer 0 are measured by it


@dataclasses.dataclass(frozen=True)
class Decision:
    outcome: str  # "diverged" | "converged"
    detail: str


def relative_change(values: Sequence[float]) -> float:
    """(max - min) / |mean| over the values: 0 for a flat line."""
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if len(vals) < 2:
        return math.inf
    mean = sum(vals) / len(vals)
    spread = max(vals) - min(vals)
    return spread / abs(mean) if mean else (0.0 if spread == 0 else math.inf)


@dataclasses.dataclass(frozen=True)
class Oscillation:
    """How a window of an objective's series swings about its mean."""

    mean: float
    amplitude: float  # half the peak-to-peak
    relative: float  # amplitude / max(|mean|, floor)
    reversals: int  # how often the series turned (up to down or back)
    window: int  # points measured

    def oscillates(self, tolerance: float) -> bool:
        """It swings beyond `tolerance` and turns back and forth (not a steady drift)."""
        return self.reversals >= 2 and self.relative > tolerance


def oscillation_of(values: Sequence[float | None], *, floor: float) -> Oscillation | None:
    """The swing of a window of values (gaps and non-finite values left out); None with
    fewer than 4 values, too few to tell a swing from a step."""
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if len(vals) < 4:
        return None
    mean = sum(vals) / len(vals)
    amplitude = (max(vals) - min(vals)) / 2
    steps = [b - a for a, b in zip(vals, vals[1:], strict=False) if b != a]
    reversals = sum(1 for a, b in zip(steps, steps[1:], strict=False) if (a > 0) != (b > 0))
    scale = max(abs(mean), floor)
    return Oscillation(
        mean=mean,
        amplitude=amplitude,
        relative=amplitude / scale if scale > 0 else (0.0 if amplitude == 0 else math.inf),
        reversals=reversals,
        window=len(vals),
    )


def _has_non_finite(ys: Sequence[float | None]) -> bool:
    """Whether a y is None (a NaN/Inf gap) or not finite, in C-level passes: a batch holds
    thousands of points and nearly always none of them."""
    if not gapless(ys):
        return True
    if math.isfinite(sum(ys)):
        return False
    return not all(map(math.isfinite, ys))  # an infinite sum of finite terms is fine


def check(
    policy: Mapping[str, Any],
    *,
    new: Mapping[str, tuple[Sequence[float], Sequence[float | None]]],
    history,
    iterations: int,
) -> Decision | None:
    """Judge a run from its newest points, as columns (xs, ys) by series; `history(name, n)`
    gives the last n y values."""
    diverge = policy.get("diverge") or {}
    watched = [n for n in new if not n.startswith(("cpu.", "memory.", "execution."))]
    if diverge.get("nan", True):
        for name in watched:
            if _has_non_finite(new[name][1]):
                return Decision("diverged", f"{name} became NaN/Inf")
    limit = diverge.get("residual_above")
    if limit:
        for name, (xs, ys) in new.items():
            if name.startswith("residual."):
                for x, y in zip(xs, ys, strict=True):
                    if y is not None and y > limit:
                        return Decision(
                            "diverged", f"{name} = {y:.3g} above {limit:g} at time {x:g}"
                        )
    courant = diverge.get("courant_above")
    if courant:
        for x, y in zip(*new.get("courant.max", ([], [])), strict=True):
            if y is not None and y > courant:
                return Decision(
                    "diverged", f"courant.max = {y:.3g} above {courant:g} at time {x:g}"
                )
    growth = diverge.get("growth")
    if growth:
        for name in new:
            if name.startswith("residual."):
                values = [v for v in history(name, growth["window"]) if v is not None]
                if (
                    len(values) >= growth["window"]
                    and min(values) > 0
                    and values[-1] / min(values) > growth["factor"]
                ):
                    return Decision(
                        "diverged",
                        f"{name} grew {values[-1] / min(values):.3g}× within {growth['window']} iterations",
                    )
    if iterations < policy.get("min_iterations", 0):
        return None
    converge = policy.get("converge") or {}
    below = converge.get("residuals_below")
    if below:
        residuals = {n for n in new if n.startswith("residual.")}
        if residuals:
            last = {n: new[n][1][-1] for n in residuals}
            low = {n: v for n, v in last.items() if v is not None and v < below}
            if len(low) == len(last):
                worst = max(low, key=lambda n: low[n])
                return Decision(
                    "converged",
                    f"all residuals below {below:g} (largest {worst} = {low[worst]:.3g})",
                )
    objective = converge.get("objective")
    if objective and objective["series"] in new:
        values = history(objective["series"], objective["window"])
        if len(values) >= objective["window"]:
            change = relative_change(values)
            if change < objective["tolerance"]:
                return Decision(
                    "converged",
                    f"{objective['series']} changed {change:.2g} (relative) over the last {objective['window']} points, below {objective['tolerance']:g}",
                )
    return None


def trust_of(
    *,
    state: str,
    end_reason: str,
    solver_converged: bool,
    final_residuals: Mapping[str, float | None],
    drifts: Mapping[str, float],
    iterations: int | None,
    rule: Mapping[str, Any] | None = None,
    trust_rules: Mapping[str, Any] | None = None,
) -> tuple[str, dict[str, Any]]:
    """The trust flag of a run that ended, with its evidence and its `basis`:

    - diverged: a residual became NaN/Inf or the policy saw it blow up;
    - converged, basis "solver": the solver met its own tolerance (residualControl);
    - converged, basis "study_rule": the study's convergence rule (`rule`, its spec's
      `convergence.converge`) was met: it stopped the run early, or the final residuals are
      below its `residuals_below`;
    - converged, basis "trust_rule": the study's trust rules (`trust_rules`, its spec's
      `trust`: residuals_below, drift_below; editable after the runs) are met by the final
      residuals and the objectives' drift; not_converged when they are not (rules that set
      neither, e.g. only the oscillation tolerance, leave this judgement as it was);
    - not_converged, basis "wall_time_limit": stopped at the study's wall-time limit;
    - iteration_limit: the run ran to its last iteration (endTime) and nothing above said
      it converged; its final residuals and objective drift are in the detail;
    - "" (no flag) for a run that failed or was cancelled: it has no result to trust.
    """
    detail: dict[str, Any] = {
        "final_residuals": dict(final_residuals),
        "objective_drift": {k: (None if math.isinf(v) else v) for k, v in drifts.items()},
        "iterations": iterations,
        "solver_converged": solver_converged,
    }
    nan = any(v is None or not math.isfinite(v) for v in final_residuals.values())
    if end_reason == "diverged" or nan:
        detail["basis"] = "diverged"
        detail["why"] = "a residual or objective diverged (NaN/Inf or blow-up)"
        return "diverged", detail
    if state != "completed" and end_reason != "converged":
        detail["basis"] = "ended"
        detail["why"] = f"the run {state}: it has no result to judge"
        return "", detail
    if solver_converged:
        detail["basis"] = "solver"
        detail["why"] = "the solver met its own tolerance (residualControl)"
        return "converged", detail
    below = (rule or {}).get("residuals_below")
    if end_reason == "converged":
        detail["basis"] = "study_rule"
        detail["why"] = "the study's convergence rule was met: it stopped the run early"
        return "converged", detail
    if (
        below
        and final_residuals
        and all(v < below for v in final_residuals.values() if v is not None)
    ):
        detail["basis"] = "study_rule"
        detail["why"] = f"the study's convergence rule was met: final residuals below {below:g}"
        return "converged", detail
    if end_reason == "max_wall_time":
        detail["basis"] = "wall_time_limit"
        detail["why"] = "stopped at the study's wall-time limit before anything said it converged"
        return "not_converged", detail
    if trust_rules and ("residuals_below" in trust_rules or "drift_below" in trust_rules):
        residuals_below = float(trust_rules.get("residuals_below", TRUST_RESIDUAL))
        drift_below = float(trust_rules.get("drift_below", TRUST_DRIFT))
        residuals_ok = bool(final_residuals) and all(
            v < residuals_below for v in final_residuals.values() if v is not None
        )
        drift_ok = all(v < drift_below for v in drifts.values())
        detail["basis"] = "trust_rule"
        if residuals_ok and drift_ok:
            detail["why"] = (
                f"the study's trust rules were met: final residuals below {residuals_below:g}"
                f" and objectives steady within {drift_below:g}"
            )
            return "converged", detail
        detail["why"] = "the study's trust rules were not met: " + (
            f"final residuals not all below {residuals_below:g}"
            if not residuals_ok
            else f"objectives still drifting (> {drift_below:g})"
        )
        return "not_converged", detail
    detail["basis"] = "iteration_limit"
    largest = max(final_residuals.items(), key=lambda kv: kv[1] or 0.0, default=None)
    detail["why"] = (
        "it ran to its iteration limit; neither the solver's tolerance nor a study rule said "
        "it converged"
        + (f" (largest final residual {largest[0]} = {largest[1]:.3g})" if largest else "")
    )
    return "iteration_limit", detail
