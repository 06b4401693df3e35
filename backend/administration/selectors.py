"""What an operator sees: every tenant's quota and usage, backends with load and health.

Usage comes from `studies.usage` (the one place that derives it from the runs holding
resources), two queries per tenant or backend: a portal has tens of tenants, not thousands,
and one definition of usage beats a faster second copy that could drift.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Count, Model, Q
from django.urls import reverse
from django.utils import timezone

from catalog.models import Backend, Image, Package
from compute import backends as compute_backends
from core.exceptions import NotFound
from studies import usage as quota_usage
from studies.choices import STARTED_STATES, EndReason, RunState
from studies.models import Run, Study
from tenancy.models import Membership, Tenant

# A backend that failed to start or lost this many runs in the last hour, or stopped this
# many for making no progress, is "degraded".
HEALTH_WINDOW = timedelta(hours=1)
DEGRADED_AFTER = 3


def admin_url(obj: Model) -> str:
    """The path of the object's change form in the Django admin."""
    meta = obj._meta
    return reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[obj.pk])


def quota_limits(quota: Any) -> dict[str, Any] | None:
    """A quota row as the admin API shows it (None: the tenant has none)."""
    if quota is None:
        return None
    return {
        "cores": quota.cores,
        "memory_gb": quota.memory_gb,
        "nodes": quota.max_nodes,
        "runs": quota.max_runs,
        "queued_runs": quota.max_queued_runs,
        "storage_gb": quota.storage_gb,
        "core_hours_budget": quota.core_hours_budget,
    }


def tenant_get(*, name: str) -> Tenant:
    """The tenant named `name` (with its quota), or a 404."""
    tenant = Tenant.objects.select_related("quota").filter(name=name).first()
    if tenant is None:
        raise NotFound(f"No tenant named {name!r}.")
    return tenant


def member_list(*, tenant: Tenant) -> list[Membership]:
    return list(
        Membership.objects.filter(tenant=tenant).select_related("user").order_by("user__username")
    )


def member_get(*, tenant: Tenant, user_id: int) -> Membership:
    membership = (
        Membership.objects.filter(tenant=tenant, user_id=user_id)
        .select_related("user", "tenant")
        .first()
    )
    if membership is None:
        raise NotFound(f"User {user_id} is not a member of tenant {tenant.name}.")
    return membership


def tenant_overview(*, tenant: Tenant) -> dict[str, Any]:
    """One tenant as the tenants list shows it."""
    row = tenant_overview_list(tenant_id=tenant.pk)
    if not row:
        raise NotFound(f"No tenant named {tenant.name!r}.")
    return row[0]


def tenant_overview_list(*, tenant_id: int | None = None) -> list[dict[str, Any]]:
    """Every tenant with its quota limits, derived usage, queued demand and members count."""
    tenants = (
        Tenant.objects.select_related("quota")
        .annotate(
            members=Count("memberships", distinct=True),
            studies_count=Count("studies", distinct=True),
        )
        .order_by("name")
    )
    if tenant_id is not None:
        tenants = tenants.filter(pk=tenant_id)
    out = []
    for t in tenants:
        quota = getattr(t, "quota", None)
        usage = quota_usage.usage_for_tenant(tenant_id=t.id)
        queued = quota_usage.queued_demand_for_tenant(tenant_id=t.id)
        out.append(
            {
                "name": t.name,
                "display_name": t.display_name or t.name,
                "active": t.is_active,
                "admin_url": admin_url(t),
                "quota_admin_url": admin_url(quota) if quota is not None else None,
                "members": t.members,
                "studies": t.studies_count,
                "limits": quota_limits(quota),
                "usage": dataclasses.asdict(usage),
                "queued": dataclasses.asdict(queued),
                "created_at": t.created_at,
            }
        )
    return out


def _backend_health(backend: Backend, failures: int, stalled: int = 0) -> dict[str, Any]:
    """The backend's status with why: `stalled` counts its runs stopped in the last hour for
    making no progress (a hung file system or node shows here first)."""
    if not backend.enabled:
        return {
            "status": "disabled",
            "detail": "disabled by an operator; no new runs start here",
            "stalled": stalled,
        }
    limits = compute_backends.limits_problem(backend=backend)
    if limits:
        return {
            "status": "degraded",
            "detail": "runs are not held to their memory, cores and processes by the kernel "
            f"(no cgroup: {limits}); a run may take more than it declared",
            "stalled": stalled,
        }
    problems = []
    if failures:
        problems.append(f"{failures} run(s) failed to start or lost their agent")
    if stalled:
        problems.append(f"{stalled} run(s) stopped for making no progress")
    if not problems:
        return {
            "status": "ok",
            "detail": "no start failures or stalled runs in the last hour",
            "stalled": 0,
        }
    degraded = failures >= DEGRADED_AFTER or stalled >= DEGRADED_AFTER
    return {
        "status": "degraded" if degraded else "ok",
        "detail": f"{' and '.join(problems)} in the last hour",
        "stalled": stalled,
    }


def backend_trouble_counts(*, since: Any) -> dict[int, tuple[int, int]]:
    """Per backend id: its runs that failed to start or lost their agent, and its runs
    stopped for making no progress, that ended since `since` (one grouped query)."""
    rows = (
        Run.objects.filter(
            finished_at__gte=since,
            end_reason__in=[EndReason.DISPATCH_FAILED, EndReason.AGENT_LOST, EndReason.STALLED],
        )
        .values("backend_id")
        .annotate(
            failures=Count("id", filter=~Q(end_reason=EndReason.STALLED)),
            stalled=Count("id", filter=Q(end_reason=EndReason.STALLED)),
        )
        .values_list("backend_id", "failures", "stalled")
    )
    return {backend_id: (failures, stalled) for backend_id, failures, stalled in rows}


def backend_overview_list() -> list[dict[str, Any]]:
    backends = list(Backend.objects.prefetch_related("tenants").order_by("name"))
    trouble = backend_trouble_counts(since=timezone.now() - HEALTH_WINDOW)
    return [
        {
            "name": b.name,
            "kind": b.kind,
            "enabled": b.enabled,
            "capacity": {"cores": b.cores, "memory_gb": b.memory_gb, "nodes": b.max_nodes},
            "usage": dataclasses.asdict(quota_usage.usage_for_backend(backend_id=b.id)),
            "queued": dataclasses.asdict(quota_usage.queued_demand_for_backend(backend_id=b.id)),
            "tenants": [t.name for t in b.tenants.all()],
            "health": _backend_health(b, *trouble.get(b.id, (0, 0))),
            "admin_url": admin_url(b),
        }
        for b in backends
    ]


def image_list() -> list[dict[str, Any]]:
    return [
        {
            "id": i.id,
            "name": i.name,
            "kind": i.kind,
            "status": i.status,
            "digest": i.digest,
            "packages": i.packages,
            "solvers": i.solvers,
            "size_bytes": i.size_bytes,
            "error": i.error,
            "built_at": i.built_at,
            "created_at": i.created_at,
            "admin_url": admin_url(i),
        }
        for i in Image.objects.order_by("-created_at")[:200]
    ]


def portal_overview() -> dict[str, Any]:
    """Totals for the admin dashboard, plus backends, packages and images."""
    runs = Run.objects.aggregate(
        **{state.value: Count("id", filter=Q(state=state)) for state in RunState},
    )
    studies = Study.objects.aggregate(total=Count("id"))
    return {
        "tenants": Tenant.objects.count(),
        "users": get_user_model().objects.filter(is_active=True).count(),
        "studies": studies["total"],
        "runs_by_state": runs,
        "backends": backend_overview_list(),
        "packages": [
            {
                "name": p.name,
                "version": p.version,
                "description": p.description,
                "depends": p.depends,
                "solvers": p.solvers,
            }
            for p in Package.objects.filter(retired=False).order_by("name")
        ],
        "images": image_list(),
    }


def elastic_nodes_with_runs(*, backend: Backend, report: dict[str, Any]) -> dict[str, Any]:
    """The elastic report with each node's `runs`: the portal's runs whose Slurm job is on
    the node (their handle is the job id)."""
    nodes = report.get("nodes") or []
    jobs = {job for n in nodes for job in n.get("jobs", [])}
    runs: dict[str, list[str]] = {}
    if jobs:
        for pk, handle in Run.objects.filter(
            backend=backend, handle__in=jobs, state__in=STARTED_STATES
        ).values_list("id", "handle"):
            runs.setdefault(handle, []).append(str(pk))
    for n in nodes:
        n["runs"] = [run for job in n.get("jobs", []) for run in runs.get(job, [])]
    return report
