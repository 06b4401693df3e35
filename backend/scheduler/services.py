"""Admission within quotas: FIFO per tenant, never over-admitting under concurrency.

Admission takes the tenant's quota row FOR UPDATE, then the rows of the backends involved
(in id order, so concurrent schedulers never deadlock), derives usage from the runs that
hold resources, and admits queued runs in FIFO order while they fit.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from catalog.choices import NODE_HOLDING_KINDS, ImageStatus
from catalog.cloud import cloud_limit_problem
from catalog.images import image_wait_detail
from catalog.models import Backend, Image
from quotas.models import Quota
from quotas.selectors import Usage, quota_limit_problem, usage_for_backend, usage_for_tenant
from studies.choices import RunState, WaitReason
from studies.models import Simulation
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


def schedule_tenant(*, tenant_id: int, dispatch: bool = True) -> list:
    """Admit the tenant's queued runs that fit; return their ids. Safe to run concurrently."""

    with transaction.atomic():
        quota = Quota.objects.select_for_update().filter(tenant_id=tenant_id).first()
        if quota is None:
            return []
        pending = Simulation.objects.filter(tenant_id=tenant_id, state=RunState.PENDING)
        backend_ids = sorted(
            set(pending.order_by().values_list("backend_id", flat=True).distinct())
        )
        if not backend_ids:
            return []
        backends = {
            b.id: b
            for b in Backend.objects.select_for_update().filter(id__in=backend_ids).order_by("id")
        }
        usage = usage_for_tenant(tenant_id=tenant_id)
        backend_usage = {bid: usage_for_backend(backend_id=bid) for bid in backends}
        admitted: list = []
        full_backends: dict[int, tuple[str, str]] = {}
        quota_problem: str | None = None
        rows = pending.order_by("queued_at", "study_id", "index").values(
            "id", "backend_id", "processes", "memory_gb", "nodes", "study__image_id"
        )
        images = _images_not_ready(pending)
        for row in _batches(rows):
            if row["study__image_id"] in images:
                continue  # its image is still building: not admitted, holds nothing
            bid = row["backend_id"]
            if bid in full_backends:
                if len(full_backends) == len(backends):
                    break
                continue
            shape = {
                "cores": row["processes"],
                "memory_gb": row["memory_gb"],
                "nodes": row["nodes"] if backends[bid].kind in NODE_HOLDING_KINDS else 0,
            }
            quota_problem = quota_limit_problem(quota=quota, usage=usage, **shape)
            if quota_problem:
                break  # strict FIFO: later runs of the tenant wait behind this one
            backend = backends[bid]
            problem = (
                f"{backend.name}: disabled"
                if not backend.enabled
                else backend_limit_problem(backend=backend, usage=backend_usage[bid], **shape)
            )
            if problem:
                full_backends[bid] = (WaitReason.BACKEND, f"backend capacity: {problem}")
                continue
            cloud = cloud_limit_problem(backend=backend, usage=backend_usage[bid], **shape)
            if cloud:
                full_backends[bid] = (WaitReason.CLOUD, f"cloud project limit: {cloud}")
                continue
            usage = usage.plus(**shape)
            backend_usage[bid] = backend_usage[bid].plus(**shape)
            admitted.append(row["id"])
        now = timezone.now()
        if admitted:
            Simulation.objects.filter(id__in=admitted, state=RunState.PENDING).update(
                state=RunState.ADMITTED,
                admitted_at=now,
                released_at=None,  # a requeued run holds its resources again
                wait_reason=WaitReason.NONE,
                wait_detail="",
            )
        _record_wait_reasons(
            pending=pending,
            quota_problem=quota_problem,
            full_backends=full_backends,
            images=images,
        )
        publish_runs_changed(admitted)
        if admitted and dispatch:
            transaction.on_commit(lambda: dispatch_admitted(admitted))
    return admitted


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


def _batches(rows):
    """The rows SCAN_BATCH at a time, each batch one plain query (no server-side cursor and
    its three round trips): admission usually stops within the first."""
    start = 0
    while True:
        batch = list(rows[start : start + SCAN_BATCH])
        yield from batch
        if len(batch) < SCAN_BATCH:
            return
        start += SCAN_BATCH


def _images_not_ready(pending) -> dict[int, str]:
    """Images of the pending runs' studies that are not ready yet → why the runs wait."""
    ids = set(pending.exclude(study__image_id=None).values_list("study__image_id", flat=True))
    if not ids:
        return {}
    rows = Image.objects.filter(id__in=ids).exclude(status=ImageStatus.READY)
    return {
        row["id"]: image_wait_detail(row)
        for row in rows.values("id", "name", "digest", "status", "progress")
    }


def _record_wait_reasons(
    *,
    pending,
    quota_problem: str | None,
    full_backends: dict[int, tuple[str, str]],
    images: dict[int, str] | None = None,
) -> None:
    """Tell queued runs why they wait. Writes only rows whose reason changed."""
    remaining = pending.filter(state=RunState.PENDING)
    for image_id, detail in (images or {}).items():
        remaining.filter(study__image_id=image_id).exclude(
            wait_reason=WaitReason.IMAGE, wait_detail=detail[:200]
        ).update(wait_reason=WaitReason.IMAGE, wait_detail=detail[:200])
    if images:
        remaining = remaining.exclude(study__image_id__in=list(images))
    for bid, (reason, detail) in full_backends.items():
        remaining.filter(backend_id=bid).exclude(
            wait_reason=reason, wait_detail=detail[:200]
        ).update(wait_reason=reason, wait_detail=detail[:200])
    if quota_problem:
        detail = f"tenant quota: {quota_problem}"
        remaining.exclude(backend_id__in=list(full_backends)).exclude(
            wait_reason=WaitReason.QUOTA, wait_detail=detail
        ).update(wait_reason=WaitReason.QUOTA, wait_detail=detail[:200])


def schedule_all() -> int:
    """The periodic safety tick: schedule every tenant with queued runs."""
    tenant_ids = (
        Simulation.objects.filter(state=RunState.PENDING)
        .order_by()
        .values_list("tenant_id", flat=True)
        .distinct()
    )
    return sum(len(schedule_tenant(tenant_id=t)) for t in list(tenant_ids))
