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
    residuals_below: float = TRUST_RESIDUAL,
    drift_below: float = TRUST_DRIFT,
) -> tuple[str, dict[str, Any]]:
    """converged | not_converged | diverged, with the evidence (the thresholds: the study's
    `trust` rules, else the defaults)."""
    detail: dict[str, Any] = {
        "final_residuals": dict(final_residuals),
        "objective_drift": {k: (None if math.isinf(v) else v) for k, v in drifts.items()},
        "iterations": iterations,
        "solver_converged": solver_converged,
    }
    nan = any(v is None or not math.isfinite(v) for v in final_residuals.values())
    if end_reason == "diverged" or nan:
        detail["why"] = "a residual or objective diverged (NaN/Inf or blow-up)"
        return "diverged", detail
    if state != "completed" and end_reason != "converged":
        detail["why"] = f"the run ended {state} before converging"
        return "not_converged", detail
    if solver_converged or end_reason == "converged":
        detail["why"] = (
            "the solver reported convergence"
            if solver_converged
            else "stopped early by the convergence policy"
        )
        return "converged", detail
    residuals_ok = bool(final_residuals) and all(
        v < residuals_below for v in final_residuals.values() if v is not None
    )
    drift_ok = all(v < drift_below for v in drifts.values())
    if residuals_ok and drift_ok:
        detail["why"] = (
            f"final residuals below {residuals_below:g} and objectives steady within {drift_below:g}"
        )
        return "converged", detail
    detail["why"] = (
        f"final residuals not all below {residuals_below:g}"
        if not residuals_ok
        else f"objectives still drifting (> {drift_below:g})"
    )
    return "not_converged", detail
