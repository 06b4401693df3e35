"""Admission within quotas: FIFO per tenant, never over-admitting under concurrency.

Admission takes the tenant's quota row FOR UPDATE, then the rows of the backends involved
(in id order, so concurrent schedulers never deadlock), derives usage from the runs that
hold resources, and admits queued runs in FIFO order while they fit.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from django.db import connection, transaction
from django.db.models import Min
from django.utils import timezone

from catalog.choices import NODE_HOLDING_KINDS, ImageStatus
from catalog.cloud import cloud_limit_problem
from catalog.images import image_wait_detail
from catalog.models import Backend, Image
from quotas.models import Quota
from quotas.selectors import Usage, quota_limit_problem
from studies.choices import HOLDING_STATES, RunState, WaitReason
from studies.models import Simulation, Study
from telemetry.events import publish_runs_changed

SCAN_BATCH = 500


def backend_limit_problem(
    *, backend: Backend, usage: Usage, cores: int, memory_gb: float, nodes: int
) -> str | None:
    if usage.cores + cores > backend.cores:
        return f"{backend.name}: cores ({usage.cores}+{cores} > {backend.cores})"
    if usage.memory_gb + memory_gb > backend.memory_gb + 1e-9:
        return f"{backend.name}: memory ({usage.memory_gb:g}+{memory_gb:g} GB > {backend.memory_gb:g} GB)"
    if nodes > backend.max_nodes:
        return f"{backend.name}: nodes ({nodes} > {backend.max_nodes})"
    return None


def schedule_tenant(*, tenant_id: int, dispatch: bool = True, publish: bool = True) -> list:
    """Admit the tenant's queued runs that fit; return their ids. Safe to run concurrently.

    A backend is shared by tenants: capacity that frees up is held for the oldest queued
    run of another tenant that waits for it (a wide run is never starved by a stream of
    later small ones); a later run takes only what that run does not need. The tenants
    holding such a reservation are scheduled next.

    Every run that ends calls this, so it is plain SQL, a statement per step (the ORM's
    query building was most of a worker's CPU per run)."""
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute(_QUOTA_SQL, [tenant_id])
        row = cur.fetchone()
        if row is None:
            return []
        quota = Quota(tenant_id=tenant_id, cores=row[0], memory_gb=row[1], max_runs=row[2])
        quota.max_nodes = row[3]
        cur.execute(_PENDING_KEYS_SQL, [tenant_id, RunState.PENDING])
        keys = cur.fetchall()
        backend_ids = sorted({b for b, _ in keys})
        if not backend_ids:
            return []
        cur.execute(_BACKENDS_SQL, [backend_ids])  # locked in id order: no deadlocks
        backends = {r[0]: _backend(r) for r in cur.fetchall()}
        usage, backend_usage = _usages(cur, tenant_id=tenant_id, backend_ids=list(backends))
        images = _images_not_ready(cur, {i for _, i in keys if i is not None})
        reserved = _reservations(cur, tenant_id=tenant_id, backends=backends)
        held_for: set[int] = set()  # tenants whose older runs the capacity is held for
        admitted: list = []
        full_backends: dict[int, tuple[str, str]] = {}
        quota_problem: str | None = None
        now = timezone.now()
        for run_id, bid, processes, memory_gb, nodes, image_id, queued_at, retry_at in _pending(
            cur, tenant_id
        ):
            if image_id in images:
                continue  # its image is still building: not admitted, holds nothing
            if retry_at is not None and retry_at > now:
                continue  # its backend could not take it a moment ago: it waits its turn
            if bid in full_backends:
                if len(full_backends) == len(backends):
                    break
                continue
            backend = backends[bid]
            shape = {
                "cores": processes,
                "memory_gb": memory_gb,
                "nodes": nodes if backend.kind in NODE_HOLDING_KINDS else 0,
            }
            quota_problem = quota_limit_problem(quota=quota, usage=usage, **shape)
            if quota_problem:
                break  # strict FIFO: later runs of the tenant wait behind this one
            problem = (
                f"{backend.name}: disabled"
                if not backend.enabled
                else backend_limit_problem(backend=backend, usage=backend_usage[bid], **shape)
            )
            if problem:
                full_backends[bid] = (WaitReason.BACKEND, f"backend capacity: {problem}")
                continue
            older = reserved.get(bid)
            if older is not None and older.queued_at < queued_at:
                # this run may only take what the older run of another tenant does not need
                held = backend_limit_problem(
                    backend=backend, usage=backend_usage[bid].plus(**older.shape), **shape
                )
                if held:
                    held_for.add(older.tenant_id)
                    full_backends[bid] = (
                        WaitReason.BACKEND,
                        f"backend capacity: {backend.name}: what frees up is held for an "
                        f"older queued run ({older.describe()}); this run follows it",
                    )
                    continue
            cloud = cloud_limit_problem(backend=backend, usage=backend_usage[bid], **shape)
            if cloud:
                full_backends[bid] = (WaitReason.CLOUD, f"cloud project limit: {cloud}")
                continue
            usage = usage.plus(**shape)
            backend_usage[bid] = backend_usage[bid].plus(**shape)
            admitted.append(run_id)
        if admitted:
            cur.execute(_ADMIT_SQL, [RunState.ADMITTED, now, admitted, RunState.PENDING])
        _record_wait_reasons(
            cur,
            tenant_id=tenant_id,
            quota_problem=quota_problem,
            full_backends=full_backends,
            images=images,
        )
        if publish:
            publish_runs_changed(admitted)
        if admitted and dispatch:
            transaction.on_commit(lambda: dispatch_admitted(admitted))
        if held_for:
            from scheduler.tasks import schedule_tenant as schedule_task

            for other in sorted(held_for):  # their turn: the capacity may be theirs now
                transaction.on_commit(lambda t=other: schedule_task.delay(t))
    return admitted


class _Reservation(NamedTuple):
    tenant_id: int
    queued_at: Any
    shape: dict[str, Any]

    def describe(self) -> str:
        parts = [f"{self.shape['cores']} core{'s' if self.shape['cores'] != 1 else ''}"]
        parts.append(f"{self.shape['memory_gb']:g} GB")
        if self.shape["nodes"]:
            parts.append(f"{self.shape['nodes']} node{'s' if self.shape['nodes'] != 1 else ''}")
        return ", ".join(parts)


_RESERVED_SQL = f"""
SELECT DISTINCT ON (r.backend_id) r.backend_id, r.tenant_id, r.queued_at, r.processes,
       r.memory_gb, r.nodes
FROM {Simulation._meta.db_table} r
WHERE r.backend_id = ANY(%s) AND r.state = %s AND r.tenant_id <> %s AND r.wait_reason = %s
ORDER BY r.backend_id, r.queued_at, r.study_id, r.index
"""


def _reservations(cur, *, tenant_id: int, backends: dict[int, Backend]) -> dict[int, _Reservation]:
    """Per backend, the oldest queued run of another tenant that waits for its capacity (its
    own tenant's quota lets it run): what frees up there is held for it."""
    cur.execute(_RESERVED_SQL, [list(backends), RunState.PENDING, tenant_id, WaitReason.BACKEND])
    out = {}
    for bid, other, queued_at, processes, memory_gb, nodes in cur.fetchall():
        kind = backends[bid].kind
        shape = {
            "cores": processes,
            "memory_gb": memory_gb,
            "nodes": nodes if kind in NODE_HOLDING_KINDS else 0,
        }
        out[bid] = _Reservation(other, queued_at, shape)
    return out


_QUOTA_SQL = (
    f"SELECT cores, memory_gb, max_runs, max_nodes FROM {Quota._meta.db_table}"
    " WHERE tenant_id = %s FOR UPDATE"
)
_PENDING_KEYS_SQL = (  # the backends and images of every queued run of the tenant
    f"SELECT DISTINCT r.backend_id, s.image_id FROM {Simulation._meta.db_table} r"
    f" JOIN {Study._meta.db_table} s ON s.id = r.study_id WHERE r.tenant_id = %s AND r.state = %s"
)
_BACKENDS_SQL = (
    f"SELECT id, name, kind, cores, memory_gb, max_nodes, enabled, cloud_limits"
    f" FROM {Backend._meta.db_table} WHERE id = ANY(%s) ORDER BY id FOR UPDATE"
)
_USAGE_SQL = f"""
SELECT r.backend_id,
       count(*) FILTER (WHERE r.tenant_id = %(tenant)s),
       coalesce(sum(r.processes) FILTER (WHERE r.tenant_id = %(tenant)s), 0),
       coalesce(sum(r.memory_gb) FILTER (WHERE r.tenant_id = %(tenant)s), 0),
       coalesce(sum(r.nodes) FILTER (WHERE r.tenant_id = %(tenant)s AND b.kind = ANY(%(kinds)s)), 0),
       count(*),
       coalesce(sum(r.processes), 0),
       coalesce(sum(r.memory_gb), 0),
       coalesce(sum(r.nodes) FILTER (WHERE b.kind = ANY(%(kinds)s)), 0)
FROM {Simulation._meta.db_table} r JOIN {Backend._meta.db_table} b ON b.id = r.backend_id
WHERE r.state = ANY(%(holding)s) AND r.released_at IS NULL
  AND (r.tenant_id = %(tenant)s OR r.backend_id = ANY(%(backends)s))
GROUP BY r.backend_id
"""
_PENDING_SQL = (
    f"SELECT r.id, r.backend_id, r.processes, r.memory_gb, r.nodes, s.image_id, r.queued_at,"
    " r.retry_at"
    f" FROM {Simulation._meta.db_table} r JOIN {Study._meta.db_table} s ON s.id = r.study_id"
    " WHERE r.tenant_id = %s AND r.state = %s"
    " ORDER BY r.queued_at, r.study_id, r.index LIMIT %s OFFSET %s"
)
_ADMIT_SQL = (
    f"UPDATE {Simulation._meta.db_table} SET state = %s, admitted_at = %s,"
    " released_at = NULL, retry_at = NULL,"  # a requeued run holds its resources again
    " wait_reason = '', wait_detail = '' WHERE id = ANY(%s) AND state = %s"
)


def _backend(row: tuple) -> Backend:
    """A locked backend row as a Backend (unsaved: what admission reads of it)."""
    backend_id, name, kind, cores, memory_gb, max_nodes, enabled, limits = row
    if isinstance(limits, str):  # Django reads jsonb as text
        limits = json.loads(limits)
    backend = Backend(name=name, kind=kind, cores=cores, memory_gb=memory_gb)
    backend.id, backend.max_nodes, backend.enabled = backend_id, max_nodes, enabled
    backend.cloud_limits = limits
    return backend


def _usages(cur, *, tenant_id: int, backend_ids: list[int]) -> tuple[Usage, dict[int, Usage]]:
    """What the tenant's runs hold, and what every tenant's runs hold on each backend, in one
    query: quotas.selectors.usage_for_tenant and usage_for_backend, together."""
    cur.execute(
        _USAGE_SQL,
        {
            "tenant": tenant_id,
            "backends": backend_ids,
            "kinds": list(NODE_HOLDING_KINDS),
            "holding": [str(s) for s in HOLDING_STATES],
        },
    )
    tenant = Usage()
    backends = {bid: Usage() for bid in backend_ids}
    for bid, runs, cores, memory, nodes, all_runs, all_cores, all_memory, all_nodes in cur:
        tenant = Usage(
            cores=tenant.cores + cores,
            memory_gb=tenant.memory_gb + float(memory),
            nodes=tenant.nodes + nodes,
            runs=tenant.runs + runs,
        )
        if bid in backends:
            backends[bid] = Usage(
                cores=all_cores, memory_gb=float(all_memory), nodes=all_nodes, runs=all_runs
            )
    return tenant, backends


def _pending(cur, tenant_id: int):
    """The tenant's queued runs in FIFO order, SCAN_BATCH at a time, each batch one plain
    query (no server-side cursor and its three round trips): admission usually stops within
    the first."""
    start = 0
    while True:
        cur.execute(_PENDING_SQL, [tenant_id, RunState.PENDING, SCAN_BATCH, start])
        batch = cur.fetchall()
        yield from batch
        if len(batch) < SCAN_BATCH:
            return
        start += SCAN_BATCH


def dispatch_admitted(admitted: list, *, inline: int = 0) -> None:
    """Start admitted runs: up to `inline` of them here and now, more as dispatch tasks of 50
    (run by the worker's threads in parallel)."""
    from studies.services import runs_dispatch
    from studies.tasks import dispatch_runs

    ids = [str(x) for x in admitted]
    if ids and len(ids) <= inline:
        runs_dispatch(run_ids=ids)
        return
    for i in range(0, len(ids), 50):
        dispatch_runs.delay(ids[i : i + 50])


def _images_not_ready(cur, image_ids: set[int]) -> dict[int, str]:
    """Images of the pending runs' studies that are not ready yet → why the runs wait."""
    if not image_ids:
        return {}
    cur.execute(
        f"SELECT id, name, digest, status, progress FROM {Image._meta.db_table}"
        " WHERE id = ANY(%s) AND status <> %s",
        [list(image_ids), ImageStatus.READY],
    )
    columns = ("id", "name", "digest", "status", "progress")
    return {row[0]: image_wait_detail(dict(zip(columns, row, strict=True))) for row in cur}


def _record_wait_reasons(
    cur,
    *,
    tenant_id: int,
    quota_problem: str | None,
    full_backends: dict[int, tuple[str, str]],
    images: dict[int, str] | None = None,
) -> None:
    """Tell queued runs why they wait. Writes only rows whose reason changed."""
    table, studies = Simulation._meta.db_table, Study._meta.db_table
    pending = (
        f"UPDATE {table} r SET wait_reason = %s, wait_detail = %s WHERE r.tenant_id = %s"
        " AND r.state = %s AND (r.retry_at IS NULL OR r.retry_at <= now())"  # keep 'retry'
    )
    changed = " AND (r.wait_reason <> %s OR r.wait_detail <> %s)"
    for image_id, detail in (images or {}).items():
        cur.execute(
            pending
            + changed
            + f" AND r.study_id IN (SELECT id FROM {studies} WHERE image_id = %s)",
            [WaitReason.IMAGE, detail[:200], tenant_id, RunState.PENDING]
            + [WaitReason.IMAGE, detail[:200], image_id],
        )
    not_image = f" AND r.study_id NOT IN (SELECT id FROM {studies} WHERE image_id = ANY(%s))"
    image_ids = list(images or {})
    for bid, (reason, detail) in full_backends.items():
        cur.execute(
            pending + changed + " AND r.backend_id = %s" + (not_image if image_ids else ""),
            [reason, detail[:200], tenant_id, RunState.PENDING, reason, detail[:200], bid]
            + ([image_ids] if image_ids else []),
        )
    if quota_problem:
        detail = f"tenant quota: {quota_problem}"[:200]
        cur.execute(
            pending
            + changed
            + " AND NOT (r.backend_id = ANY(%s))"
            + (not_image if image_ids else ""),
            [WaitReason.QUOTA, detail, tenant_id, RunState.PENDING, WaitReason.QUOTA, detail]
            + [list(full_backends)]
            + ([image_ids] if image_ids else []),
        )


def schedule_all() -> int:
    """The periodic safety tick: schedule every tenant with queued runs, the tenant with the
    oldest queued run first (first come, first served across tenants too)."""
    tenant_ids = (
        Simulation.objects.filter(state=RunState.PENDING)
        .order_by()
        .values("tenant_id")
        .annotate(oldest=Min("queued_at"))
        .order_by("oldest", "tenant_id")
        .values_list("tenant_id", flat=True)
    )
    return sum(len(schedule_tenant(tenant_id=t)) for t in list(tenant_ids))
