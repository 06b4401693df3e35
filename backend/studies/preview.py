"""What a spec would make, without creating anything: run count, first rows, quota impact.

The wizard asks this on every change (R18: live quota usage and what a new study takes of
it), so it answers from the same capacity check as submission and admission (quotas.fit).

Its cost does not grow with the run count where the space allows: the count is arithmetic,
the first rows come from the space's lazy iterator, the quota impact is computed from the
count, and the values are checked per parameter and per distinct combination of what the
derived values use (ResolvedSpec.check_within: at most PREVIEW_CHECKED_RUNS runs' worth;
beyond, the first ones, and submission checks every run). A million-run grid is previewed in
about the time of a small one.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from compute.capacity import capacity_of
from core.text import plural
from quotas.fit import GB, queue_problem, run_fit_problem, runs_at_once_limited, storage_problem
from quotas.models import Quota
from studies.adaptive import AdaptivePlan
from studies.estimate import study_estimate
from studies.services import resolved_shape
from studies.spec import ResolvedSpec, spec_resolve
from studies.usage import active_run_count, storage_used_bytes, usage_for_tenant

PREVIEW_CHECKED_RUNS = 10_000  # runs' worth of values a preview checks at most


def study_preview(*, tenant: Any, spec: dict[str, Any], rows: int = 20) -> dict[str, Any]:
    """What a spec would make, without creating anything: run count, first rows, quota impact."""
    resolved = spec_resolve(tenant=tenant, spec=spec)
    first = [
        {"index": i, "parameters": params, "context": context}
        for i, (params, context) in enumerate(itertools.islice(resolved.points(), rows))
    ]
    # the values (bounds, derived values) and the case's placeholders, at a bounded cost
    checked = resolved.check_within(limit=PREVIEW_CHECKED_RUNS)
    quota = quota_impact(tenant=tenant, resolved=resolved)
    return {
        "run_count": resolved.run_count,
        "checked_runs": checked,
        "parameters": [a.name for a in resolved.space.axes],
        "rows": first,
        "solver": resolved.solver,
        "backend": resolved.backend.name,
        "resources": {
            "processes": resolved.processes,
            "nodes": resolved.nodes,
            "memory_gb": resolved.memory_gb,
        },
        "steps": resolved.steps,
        "objectives": resolved.objectives,
        "quota": quota,
        "adaptive": adaptive_outline(
            resolved.adaptive,
            free=max(1, quota["concurrent_runs"] - quota["in_use"]["runs"]),
        ),
        "estimate": study_estimate(
            tenant=tenant, resolved=resolved, concurrent=quota["concurrent_runs"]
        ),
    }


def adaptive_outline(plan: AdaptivePlan | None, *, free: int) -> dict[str, Any] | None:
    """An adaptive study's plan as the preview tells it: the initial design (its runs are
    the run count), then batches up to the budget (batch auto: as large as the `free` runs
    the tenant could start now); None for other studies."""
    if plan is None:
        return None
    return {
        "goal": plan.goal,
        "objectives": list(plan.objectives),
        "direction": plan.direction if plan.goal == "optimise" else None,
        **plan.goal_terms(),
        "initial": plan.initial,
        "batch": min(plan.batch, free) if plan.batch_auto else plan.batch,
        "batch_auto": plan.batch_auto,
        "budget": plan.budget,
        "max_batches": plan.max_batches,
        "tolerance": plan.tolerance,
    }


def quota_impact(*, tenant: Any, resolved: ResolvedSpec) -> dict[str, Any]:
    """Per run and in all, what the study takes of the quota; how many runs fit at once."""
    quota = Quota.objects.get(tenant=tenant)
    backend = capacity_of(resolved.backend)
    shape = resolved_shape(resolved)
    per_run = {"cores": shape.cores, "memory_gb": shape.memory_gb, "nodes": shape.nodes}
    found = run_fit_problem(shape=shape, quota=quota, backend=backend)
    problem = found.for_one_run() if found else None
    concurrent, limited_by = runs_at_once_limited(shape=shape, quota=quota, backend=backend)
    waves = math.ceil(resolved.run_count / concurrent) if concurrent else None
    usage = usage_for_tenant(tenant_id=tenant.id)
    active = active_run_count(tenant_id=tenant.id)
    total = {k: v * resolved.run_count for k, v in per_run.items()}
    # every run may fit but not all of them into the queue at once: submission would say so
    queued = queue_problem(quota=quota, active=active, adding=resolved.run_count)
    stored = storage_used_bytes(tenant_id=tenant.id)
    full = storage_problem(quota=quota, stored_bytes=stored)
    # what a single run does not fit: the tenant's quota, the backend or its cloud project
    refused_by = found.limit_named() if found else ""
    if problem:
        summary = f"a single run does not fit {refused_by}: {problem}"
    elif full:  # submission would be refused (a draft may be saved), whatever the shape
        problem = summary = full.for_one_run()
    elif queued:
        summary = queued
    else:
        summary = (
            f"{plural(resolved.run_count, 'run')} × {plural(resolved.processes, 'core')}: at "
            f"most {concurrent} at a time, set by {limited_by}; about {plural(waves or 0, 'wave')}"
        )
    return {
        "per_run": per_run,
        "total": total,
        "limits": {
            "cores": quota.cores,
            "memory_gb": quota.memory_gb,
            "nodes": quota.max_nodes,
            "runs": quota.max_runs,
            "queued_runs": quota.max_queued_runs,
            "storage_gb": quota.storage_gb,
        },
        "in_use": {
            "cores": usage.cores,
            "memory_gb": usage.memory_gb,
            "nodes": usage.nodes,
            "runs": usage.runs,
            "queued_runs": active,
            "storage_gb": round(stored / GB, 3),
        },
        "concurrent_runs": concurrent,
        # what sets concurrent_runs: the tenant's quota, the backend's capacity or its cloud
        "limited_by": limited_by,
        "refused_by": refused_by,
        "waves": waves,
        "fits": problem is None,  # a single run, with room to store its files
        "storage_full": full is not None,  # the storage quota is used up: nothing is submitted
        "problem": problem or queued,
        "summary": summary,
    }
