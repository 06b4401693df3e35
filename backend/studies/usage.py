"""What runs hold of quotas and backends: always derived from the runs, never a counter.

A run holds its resources from admission until it ends, unless it gave its cores back early
(released: its solver exited and it only archives results). Nodes count only on backends
whose runs hold whole nodes (compute.traits_of).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from django.db.models import Count, Q, QuerySet, Sum
from django.db.models.functions import Coalesce

from catalog.models import Backend
from compute.capacity import capacity_of
from compute.drivers import kinds, traits_of
from quotas.fit import Usage, effective_limits
from quotas.models import Quota
from studies.choices import ACTIVE_STATES, HOLDING_STATES, RunState
from studies.models import Run


def node_holding_kinds() -> list[str]:
    """The backend kinds whose runs hold whole nodes or instances."""
    return [k for k in kinds() if traits_of(k).holds_nodes]


def usage_of(runs: QuerySet[Run]) -> Usage:
    """What a set of runs needs or holds, summed in one query."""
    row = runs.aggregate(
        cores=Coalesce(Sum("processes"), 0),
        memory_gb=Coalesce(Sum("memory_gb"), 0.0),
        nodes=Coalesce(Sum("nodes", filter=Q(backend__kind__in=node_holding_kinds())), 0),
        runs=Count("id"),
    )
    return Usage(
        cores=row["cores"], memory_gb=float(row["memory_gb"]), nodes=row["nodes"], runs=row["runs"]
    )


def holding_runs() -> QuerySet[Run]:
    """Runs that hold resources: admitted up to their end, unless they gave their cores back
    early (released: the solver exited and the run only archives its results)."""
    return Run.objects.filter(state__in=HOLDING_STATES, released_at__isnull=True)


def usage_for_tenant(*, tenant_id: int) -> Usage:
    return usage_of(holding_runs().filter(tenant_id=tenant_id))


def usage_for_backend(*, backend_id: int) -> Usage:
    return usage_of(holding_runs().filter(backend_id=backend_id))


def queued_demand_for_tenant(*, tenant_id: int) -> Usage:
    return usage_of(Run.objects.filter(tenant_id=tenant_id, state=RunState.PENDING))


def active_run_count(*, tenant_id: int) -> int:
    """The tenant's runs submitted and not yet ended (queued or running), which the quota's
    max_queued_runs caps."""
    return Run.objects.filter(tenant_id=tenant_id, state__in=ACTIVE_STATES).count()


def queued_demand_for_backend(*, backend_id: int) -> Usage:
    return usage_of(Run.objects.filter(backend_id=backend_id, state=RunState.PENDING))


def backends_visible_to(*, tenant: Any) -> list[Backend]:
    """The enabled backends a tenant may use (a backend without tenants is everyone's)."""
    return [
        b
        for b in Backend.objects.filter(enabled=True).prefetch_related("tenants").order_by("name")
        if not b.tenants.all() or tenant in b.tenants.all()
    ]


def quota_summary(*, tenant: Any) -> dict[str, Any]:
    """The quota panel: limits, what the tenant's runs hold and queue, and per backend the
    effective limits and where each comes from."""
    quota = Quota.objects.get(tenant=tenant)
    backends = backends_visible_to(tenant=tenant)
    effective = effective_limits(quota=quota, backends=[capacity_of(b) for b in backends])
    for row, backend in zip(effective, backends, strict=True):
        row["cloud_read_at"] = backend.cloud_limits_at
        row["cloud_error"] = backend.cloud_error or ""
    return {
        "limits": {
            "cores": quota.cores,
            "memory_gb": quota.memory_gb,
            "nodes": quota.max_nodes,
            "runs": quota.max_runs,
            "queued_runs": quota.max_queued_runs,
            "storage_gb": quota.storage_gb,
            "core_hours_budget": quota.core_hours_budget,
        },
        "usage": dataclasses.asdict(usage_for_tenant(tenant_id=tenant.id)),
        "queued": dataclasses.asdict(queued_demand_for_tenant(tenant_id=tenant.id)),
        "backends": effective,
    }
