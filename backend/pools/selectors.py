"""Reads about warm pools: which admitted runs a pool takes, what its workers hold.

A run goes to a pool when its backend has an enabled pool (not draining) whose image is its
study's image, it needs one node, and its processes and memory fit a worker; of several such
pools, the smallest. Every other run starts as before (a server per run). One function
decides it (`pool_of`), used by dispatch (which leaves pooled runs to their pool), the
reaper (which does not redispatch them), the autoscaler and the lease.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection

from catalog.models import Backend
from pools.choices import LIVE_WORKER_STATES, REGISTERED_STATES
from pools.models import Pool, PoolWorker


@dataclass(frozen=True)
class RunShape:
    """What decides whether a run fits a pool."""

    id: Any
    backend_id: int
    image_id: int | None
    nodes: int
    processes: int
    memory_gb: float


def active_pools(*, backend_ids: Iterable[int] | None = None) -> list[Pool]:
    """Pools that take runs: enabled and not being deleted."""
    qs = Pool.objects.filter(enabled=True, draining=False, backend__enabled=True)
    if backend_ids is not None:
        qs = qs.filter(backend_id__in=list(backend_ids))
    return list(qs.order_by("cores", "memory_gb", "name"))


def pool_of(run: RunShape, pools: Sequence[Pool]) -> Pool | None:
    """The pool that takes `run` (pools: active_pools(), smallest first), or None."""
    for pool in pools:
        if (
            pool.backend_id == run.backend_id
            and pool.image_id == run.image_id
            and run.nodes == 1
            and run.processes <= pool.cores
            and run.memory_gb <= pool.memory_gb + 1e-9
        ):
            return pool
    return None


def run_shapes(qs: Any) -> list[RunShape]:
    """RunShape of each run of a Run queryset, in one query."""
    return [
        RunShape(*row)
        for row in qs.values_list(
            "id", "backend_id", "study__image_id", "nodes", "processes", "memory_gb"
        )
    ]


def any_pool_active() -> bool:
    """Whether any pool takes runs (as active_pools: enabled, not draining, its backend
    enabled), in one statement without the ORM: dispatch asks before every batch of runs
    whether to look for pooled runs, and most deployments have no pool at all."""
    pools, backends = Pool._meta.db_table, Backend._meta.db_table
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT EXISTS (SELECT 1 FROM {pools} p JOIN {backends} b ON b.id = p.backend_id"
            " WHERE p.enabled AND NOT p.draining AND b.enabled)"
        )
        return bool(cur.fetchone()[0])


def pooled_run_ids(*, runs_qs: Any) -> dict[Any, Pool]:
    """Of the runs of a queryset, those a pool takes, with their pool."""
    pools = active_pools()
    if not pools:
        return {}
    backends = {p.backend_id for p in pools}
    out: dict[Any, Pool] = {}
    for shape in run_shapes(runs_qs.filter(backend_id__in=backends)):
        pool = pool_of(shape, pools)
        if pool is not None:
            out[shape.id] = pool
    return out


def live_workers(pool: Pool) -> list[PoolWorker]:
    return list(pool.workers.filter(state__in=LIVE_WORKER_STATES).order_by("created_at"))


def registered_worker_ids() -> set[str]:
    return {
        str(x)
        for x in PoolWorker.objects.filter(state__in=REGISTERED_STATES).values_list("id", flat=True)
    }


def live_worker_ids() -> set[str]:
    """Workers whose servers the portal keeps (the leak reaper spares them)."""
    return {
        str(x)
        for x in PoolWorker.objects.filter(state__in=LIVE_WORKER_STATES).values_list(
            "id", flat=True
        )
    }
