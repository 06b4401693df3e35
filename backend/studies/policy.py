"""A study's convergence policy, as its spec gives it (docs/live.md), with its defaults.

    convergence:
      diverge:  {nan: true, residual_above: 1.0e+3, courant_above: 5,
                 growth: {factor: 1.0e+3, window: 50}}
      converge: {residuals_below: 1.0e-5,
                 objective: {series: forceCoeffs.Cl, window: 50, tolerance: 1.0e-4}}
      min_iterations: 20
      max_wall_seconds: 3600
      stall_seconds: 300

Its shape, types and bounds are checked by the spec's schema (studies/schemas/study-spec.json,
`$defs/Convergence`); this fills in what was left out. The policy is applied to a run's
telemetry by telemetry.convergence.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DEFAULT_POLICY: dict[str, Any] = {"diverge": {"nan": True}}


def policy_normalize(raw: Mapping[str, Any] | None) -> dict[str, Any]:
    """The policy with its defaults: NaN stops a run unless turned off, a growth window of
    50, an objective window of 50 and a tolerance of 1e-4."""
    if raw is None:
        return dict(DEFAULT_POLICY)
    diverge = raw.get("diverge") or {}
    out: dict[str, Any] = {"diverge": {"nan": bool(diverge.get("nan", True))}}
    for key in ("residual_above", "courant_above"):
        if key in diverge:
            out["diverge"][key] = float(diverge[key])
    if "growth" in diverge:
        growth = diverge["growth"]
        out["diverge"]["growth"] = {
            "factor": float(growth["factor"]),
            "window": int(growth.get("window", 50)),
        }
    converge = raw.get("converge") or {}
    c: dict[str, Any] = {}
    if "residuals_below" in converge:
        c["residuals_below"] = float(converge["residuals_below"])
    if "objective" in converge:
        objective = converge["objective"]
        c["objective"] = {
            "series": objective["series"],
            "window": int(objective.get("window", 50)),
            "tolerance": float(objective.get("tolerance", 1e-4)),
        }
    if c:
        out["converge"] = c
    if "min_iterations" in raw:
        out["min_iterations"] = int(raw["min_iterations"])
    if "max_wall_seconds" in raw:
        out["max_wall_seconds"] = float(raw["max_wall_seconds"])
    if "stall_seconds" in raw:
        out["stall_seconds"] = float(raw["stall_seconds"])
    return out


def wall_seconds_sql(*, study: str = "s", backend: str = "b") -> str:
    """The rule of wall_seconds_effective in SQL, over a study and its run's backend aliased
    `study` and `backend` (PostgreSQL's LEAST ignores NULLs)."""
    return (
        f"LEAST(COALESCE(({study}.convergence->>'max_wall_seconds')::float,"
        f" {backend}.default_wall_seconds), {backend}.max_wall_seconds)"
    )


def wall_seconds_effective(
    *, study: float | None, default: float | None, cap: float | None
) -> float | None:
    """A run's wall-time limit: its study's `max_wall_seconds`, else its backend's default;
    never above its backend's cap. None: no limit."""
    limit = study if study is not None else default
    if cap is not None:
        limit = cap if limit is None else min(limit, cap)
    return limit


def stall_seconds_effective(*, study: float | None, backend: float | None, portal: float) -> float:
    """The least time a run may go without progress before its agent stops it (the floor of
    the watchdog's rule): its study's `stall_seconds`, else its backend's, else the portal's."""
    for value in (study, backend):
        if value is not None:
            return value
    return portal
