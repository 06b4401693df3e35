"""What runs hold of quotas and backends: always derived from the runs, never a counter.

A run holds its resources from admission until it ends, unless it gave its cores back early
(released: its solver exited and it only archives results). Nodes count only on backends
whose runs hold whole nodes (compute.traits_of).
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import Count, Q, QuerySet, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from catalog.models import Backend
from compute.capacity import capacity_of
from compute.drivers import kinds, traits_of
from quotas.fit import GB, Usage, effective_limits, storage_problem
from quotas.models import Quota
from studies.choices import ACTIVE_STATES, HOLDING_STATES, RunState, StudyState
from studies.models import Run, Study, Upload


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
    """What the tenant's queued runs would need: per active study the count of its queued
    runs (the (study, state) index) times the study's shape, which its runs are copies of
    (studies.services), not a sum over 100,000 run rows. A cancelled study's queued runs,
    still being ended in the background, need nothing."""
    with connection.cursor() as cur:
        cur.execute(
            _QUEUED_DEMAND_SQL,
            {
                "tenant": tenant_id,
                "active": [StudyState.SUBMITTED.value, StudyState.RUNNING.value],
                "state": RunState.PENDING.value,
                "kinds": node_holding_kinds(),
            },
        )
        cores, memory_gb, nodes, runs = cur.fetchone()
    return Usage(cores=int(cores), memory_gb=float(memory_gb), nodes=int(nodes), runs=int(runs))


_QUEUED_DEMAND_SQL = f"""
SELECT coalesce(sum(s.processes * c.n), 0), coalesce(sum(s.memory_gb * c.n), 0),
       coalesce(sum(s.nodes * c.n) FILTER (WHERE b.kind = ANY(%(kinds)s)), 0),
       coalesce(sum(c.n), 0)
FROM {Study._meta.db_table} s
JOIN {Backend._meta.db_table} b ON b.id = s.backend_id
CROSS JOIN LATERAL (SELECT count(*) AS n FROM {Run._meta.db_table} r
                    WHERE r.study_id = s.id AND r.state = %(state)s) c
WHERE s.tenant_id = %(tenant)s AND s.state = ANY(%(active)s)
"""


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
    now = timezone.now()
    since = budget_period_start(now=now)
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
        "core_hours": {
            "used": round(core_hours_used(tenant_id=tenant.id, since=since, until=now), 2),
            "budget": quota.core_hours_budget,
            "period_start": since,
        },
        "storage": storage_summary(quota=quota),
    }


def storage_summary(*, quota: Quota) -> dict[str, Any]:
    """The quota panel's storage: what the portal stores for the tenant against its storage
    quota, and, once that is used up, what it means and what to do (quotas.fit)."""
    stored = storage_used_bytes(tenant_id=quota.tenant_id)
    problem = storage_problem(quota=quota, stored_bytes=stored)
    return {
        "used_gb": round(stored / GB, 3),
        "used_bytes": stored,
        "limit_gb": quota.storage_gb,
        "full": problem is not None,
        "problem": str(problem) if problem else "",
    }


def budget_period_start(*, now: datetime) -> datetime:
    """The start of the core-hour budget's period: the calendar month (UTC) `now` is in."""
    return now.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def budget_period_end(*, start: datetime) -> datetime:
    """When the budget's period that began at `start` ends: the next month's first day."""
    return (start + timedelta(days=32)).replace(day=1)


def core_hours_used(*, tenant_id: int, since: datetime, until: datetime) -> float:
    """Core-hours the tenant's runs used from `since` to `until`: each run's core-hours as
    studies.figures defines them (its cores times the wall time of its steps: from its start
    to their end, released, else ended, else now), the part that lies in the period, and
    the hours of the earlier attempts of a run continued or restarted (counted in the period
    of its current attempt's start). One aggregate over the tenant's runs that started."""
    table = Run._meta.db_table
    with connection.cursor() as cur:
        cur.execute(
            "SELECT COALESCE(SUM(processes * EXTRACT(EPOCH FROM ("
            " LEAST(COALESCE(released_at, finished_at, %(until)s), %(until)s)"
            " - GREATEST(started_at, %(since)s)))"
            " + CASE WHEN started_at >= %(since)s THEN carried_core_hours * 3600 ELSE 0 END"
            "), 0) / 3600.0"
            f" FROM {table} WHERE tenant_id = %(tenant)s AND started_at IS NOT NULL"
            " AND started_at < %(until)s"
            " AND COALESCE(released_at, finished_at, %(until)s) > %(since)s",
            {"tenant": tenant_id, "since": since, "until": until},
        )
        return float(cur.fetchone()[0])


def storage_used_bytes(*, tenant_id: int) -> int:
    """What the portal stores for the tenant, in bytes: the one figure the quota panel shows
    and submission, the preview and admission check against the storage quota
    (quotas.fit.storage_problem).

    - Its case uploads, unpacked, as recorded when each was stored.
    - Its runs' result archives (archive_bytes: uploaded by an agent, or built by the portal
      from a run directory on the first download: both are files of the portal's).
    - The run directories the portal keeps: runs with a `results_dir` (local, container,
      Slurm on a shared filesystem: the agent ran the case in the portal's data directory,
      and the directory stays there, read in place, until the study is deleted), each at the
      size its agent last reported (`disk_bytes`: the blocks the directory occupies, measured
      every few seconds while the run goes and once more in its final report). Not counted:
      a run that never started (no directory), a reused run (it shows its source's results
      and has no directory of its own: the source is counted once), a run on a cloud server
      or a remote cluster (its directory is on that machine, gone with it; only the archive
      it uploads is the portal's). A deleted study's runs go with their rows and their files.
      A run retried on a new attempt is counted at its current attempt's size; the earlier
      attempts' directories, kept beside it, are not (each stayed within its disk budget,
      and a run has at most WINDTUNNEL_MAX_RETRIES of them).

    One statement: three sums, each read from an index of only the rows it sums (uploads by
    tenant; run_archived and run_stored, partial and covering): never a scan of a tenant's
    100,000 queued runs, whose COPY pays nothing for these indexes."""
    with connection.cursor() as cur:
        cur.execute(_STORAGE_SQL, {"tenant": tenant_id})
        return int(cur.fetchone()[0])


_STORAGE_SQL = f"""
SELECT (SELECT coalesce(sum(unpacked_bytes), 0) FROM {Upload._meta.db_table}
        WHERE tenant_id = %(tenant)s)
     + (SELECT coalesce(sum(archive_bytes), 0) FROM {Run._meta.db_table}
        WHERE tenant_id = %(tenant)s AND archive_bytes IS NOT NULL)
     + (SELECT coalesce(sum(disk_bytes), 0) FROM {Run._meta.db_table}
        WHERE tenant_id = %(tenant)s AND disk_bytes IS NOT NULL AND results_dir <> '')
"""
