"""What a study will cost before it is submitted: core-hours and wall time as a range, from the
tenant's earlier completed runs of the same case and solver.

Each earlier run gives its wall time (from its start to when it gave its cores back or ended)
and its cores. A new run on `p` cores is taken to need the same core-hours and a wall time
scaled by cores (a run that had 4 cores and took 60 s is counted as 120 s on 2): ideal
scaling, which a real solver only approaches, so the range is a guide, not a promise. The
range is the middle 80 % of the earlier runs (10th to 90th percentile; all of them when
there are fewer than five), so parameters that make some runs longer than others widen it.
The study's wall time is its waves (runs at once, as the quota and backend allow) times the
per-run range, queueing behind other work left out.
"""

from __future__ import annotations

import math
from typing import Any

from django.db.models import F

from core.text import duration_words, plural
from studies.choices import RunState
from studies.identity import case_digest
from studies.models import Run, Study
from studies.spec import ResolvedSpec

SAMPLE = 200  # the most recent similar runs an estimate reads


def study_estimate(*, tenant: Any, resolved: ResolvedSpec, concurrent: int) -> dict[str, Any]:
    """The estimate the preview shows: `based_on` earlier runs, per-run and whole-study
    core-hours and wall seconds as [low, high] (None without an earlier run), in words."""
    runs = resolved.adaptive.budget if resolved.adaptive else resolved.run_count
    samples = similar_runs(tenant=tenant, case_dir=resolved.case_dir, solver=resolved.solver)
    empty = {
        "based_on": 0,
        "runs": runs,
        "run_core_hours": None,
        "run_wall_seconds": None,
        "core_hours": None,
        "wall_seconds": None,
    }
    if not samples:
        return {
            **empty,
            "summary": f"no completed run of this case with {resolved.solver} yet: "
            "an estimate follows the first ones",
        }
    processes = max(1, resolved.processes)
    core_seconds = sorted(cores * seconds for cores, seconds in samples)
    low, high = _middle(core_seconds)
    run_wall = [low / processes, high / processes]
    waves = math.ceil(runs / concurrent) if concurrent else None
    out: dict[str, Any] = {
        **empty,
        "based_on": len(samples),
        "run_core_hours": [low / 3600, high / 3600],
        "run_wall_seconds": run_wall,
        "core_hours": [runs * low / 3600, runs * high / 3600],
        "wall_seconds": [waves * run_wall[0], waves * run_wall[1]] if waves else None,
    }
    wall = out["wall_seconds"]
    total = [runs * low / 3600, runs * high / 3600]
    out["summary"] = (
        f"about {_range(total, _hours)} core-hours"
        + (f" and {_range(wall, duration_words)} at {concurrent} at a time" if wall else "")
        + f", from {plural(len(samples), 'earlier run')} of this case with {resolved.solver}"
    )
    return out


def similar_runs(*, tenant: Any, case_dir: str, solver: str) -> list[tuple[int, float]]:
    """(cores, wall seconds) of the tenant's latest runs of the same case (its files' digest)
    and solver that completed with their own result (not reused)."""
    digest = case_digest(case_dir)
    if not digest:
        return []
    studies = (
        Study.objects.filter(
            tenant=tenant, identity_inputs__case_digest=digest, identity_inputs__solver=solver
        )
        .order_by("-created_at")
        .values_list("pk", flat=True)
    )
    rows = (
        Run.objects.filter(
            study_id__in=list(studies[:SAMPLE]),
            state=RunState.COMPLETED,
            reused_from__isnull=True,
            started_at__isnull=False,
            finished_at__isnull=False,
        )
        .order_by("-finished_at")
        .values_list("processes", "started_at", F("released_at"), "finished_at")[:SAMPLE]
    )
    out = []
    for processes, started, released, finished in rows:
        seconds = ((released or finished) - started).total_seconds()
        if seconds > 0:
            out.append((max(1, processes), seconds))
    return out


def _middle(values: list[float]) -> tuple[float, float]:
    """The 10th and 90th percentiles of sorted `values` (nearest rank), or their ends when
    there are fewer than five."""
    if len(values) < 5:
        return values[0], values[-1]
    n = len(values)
    return values[max(0, math.ceil(0.1 * n) - 1)], values[min(n - 1, math.ceil(0.9 * n) - 1)]


def _range(pair: list[float], say: Any) -> str:
    low, high = say(pair[0]), say(pair[1])
    return low if low == high else f"{low}–{high}"


def _hours(value: float) -> str:
    return f"{value:.2g}" if value < 10 else f"{value:,.0f}"
