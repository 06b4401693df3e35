"""Quota usage, always derived from the runs that hold resources."""

from __future__ import annotations

import dataclasses

from django.db.models import Count, Q, Sum
from django.db.models.functions import Coalesce

from catalog.choices import NODE_HOLDING_KINDS
from quotas.models import Quota
from studies.choices import HOLDING_STATES, RunState
from studies.models import Simulation


@dataclasses.dataclass(frozen=True, kw_only=True)
class Usage:
    cores: int = 0
    memory_gb: float = 0.0
    nodes: int = 0
    runs: int = 0

    def plus(self, *, cores: int, memory_gb: float, nodes: int) -> Usage:
        return Usage(
            cores=self.cores + cores,
            memory_gb=self.memory_gb + memory_gb,
            nodes=self.nodes + nodes,
            runs=self.runs + 1,
        )


def _aggregate(qs) -> Usage:
    row = qs.aggregate(
        cores=Coalesce(Sum("processes"), 0),
        memory_gb=Coalesce(Sum("memory_gb"), 0.0),
        nodes=Coalesce(Sum("nodes", filter=Q(backend__kind__in=NODE_HOLDING_KINDS)), 0),
        runs=Count("id"),
    )
    return Usage(
        cores=row["cores"], memory_gb=float(row["memory_gb"]), nodes=row["nodes"], runs=row["runs"]
    )


def _holding():
    """Runs that hold resources: admitted up to their end, unless they gave their cores back
    early (released: the solver exited and the run only archives its results)."""
    return Simulation.objects.filter(state__in=HOLDING_STATES, released_at__isnull=True)


def usage_for_tenant(*, tenant_id: int) -> Usage:
    return _aggregate(_holding().filter(tenant_id=tenant_id))


def usage_for_backend(*, backend_id: int) -> Usage:
    return _aggregate(_holding().filter(backend_id=backend_id))


def queued_demand_for_tenant(*, tenant_id: int) -> Usage:
    return _aggregate(Simulation.objects.filter(tenant_id=tenant_id, state=RunState.PENDING))


def quota_limit_problem(
    *, quota: Quota, usage: Usage, cores: int, memory_gb: float, nodes: int
) -> str | None:
    """None when one more run of this shape fits; else the name of the limit that holds."""
    if usage.runs + 1 > quota.max_runs:
        return f"concurrent runs ({usage.runs}/{quota.max_runs})"
    if usage.cores + cores > quota.cores:
        return f"cores ({usage.cores}+{cores} > {quota.cores})"
    if usage.memory_gb + memory_gb > quota.memory_gb + 1e-9:
        return f"memory ({usage.memory_gb:g}+{memory_gb:g} GB > {quota.memory_gb:g} GB)"
    if usage.nodes + nodes > quota.max_nodes:
        return f"nodes ({usage.nodes}+{nodes} > {quota.max_nodes})"
    return None


def quota_summary(*, tenant) -> dict:
    quota = Quota.objects.get(tenant=tenant)
    usage = usage_for_tenant(tenant_id=tenant.id)
    demand = queued_demand_for_tenant(tenant_id=tenant.id)
    limits = {
        "cores": quota.cores,
        "memory_gb": quota.memory_gb,
        "nodes": quota.max_nodes,
        "runs": quota.max_runs,
        "storage_gb": quota.storage_gb,
        "core_hours_budget": quota.core_hours_budget,
    }
    from catalog.cloud import effective_limits
    from catalog.models import Backend

    backends = [
        b
        for b in Backend.objects.filter(enabled=True).prefetch_related("tenants").order_by("name")
        if not b.tenants.all() or tenant in b.tenants.all()
    ]
    return {
        "limits": limits,
        "usage": dataclasses.asdict(usage),
        "queued": dataclasses.asdict(demand),
        "backends": effective_limits(quota=quota, backends=backends),
    }
