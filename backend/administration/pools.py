"""Operator services for warm pools (docs/pools.md): create, change, delete, and what the
admin page shows (workers, the last decisions).

A pool's shape is checked against its cloud: the flavor and the image must exist there, and
`max_workers` workers must fit the project's limits (instances, cores, RAM). Deleting a pool
that still holds runs drains it: it boots nothing more, its idle workers go at once, its busy
ones when their runs end, and the row with its last worker (dispatch.autoscale).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Q

from catalog.choices import ImageKind
from catalog.images import image_reference
from catalog.models import Backend, Image
from compute.drivers import DriverError, PoolHost, driver_for, supports
from core import jobs
from core.exceptions import ApplicationError, Conflict, ErrorCode
from core.jobs import Job
from orchestration.errors import SettingsError
from orchestration.planning.placement import POLICIES
from pools.choices import LIVE_WORKER_STATES
from pools.models import Pool

LIMITS = {
    "min_workers": (0, 1000),
    "max_workers": (0, 1000),
    "idle_timeout": (0, 7 * 86400),
    "boot_timeout": (5, 86400),
}


def _invalid(message: str, field: str) -> ApplicationError:
    return ApplicationError(message, field=field, code=ErrorCode.INVALID)


def _image(ref: Any, backend: Backend) -> Image:
    qs = Image.objects.filter(kind=ImageKind.VM)
    query = Q(digest=str(ref))
    if str(ref).isdigit():
        query |= Q(pk=int(ref))
    image = qs.filter(query).first()
    if image is None:
        raise _invalid(f"no VM image {ref!r}: give a composed VM image's id or digest", "image")
    if not image_reference(image=image, backend=backend):
        raise _invalid(f"image {ref!r} is not ready on backend {backend.name}", "image")
    return image


def _check_placement(data: dict[str, Any]) -> None:
    if "placement" in data and data["placement"] not in POLICIES:
        raise _invalid(
            f"placement {str(data['placement'])[:40]!r} is not a placement policy: use one of "
            f"{', '.join(POLICIES)}",
            "placement",
        )


def _check_bounds(data: dict[str, Any], pool: Pool | None) -> None:
    for field, (low, high) in LIMITS.items():
        if field in data and not low <= data[field] <= high:
            raise _invalid(f"{field} must be from {low} to {high}", field)
    low = data.get("min_workers", pool.min_workers if pool else 0)
    high = data.get("max_workers", pool.max_workers if pool else 1)
    if high < low:
        raise _invalid(f"max_workers ({high}) must be at least min_workers ({low})", "max_workers")


def _check_project(driver: Any, *, workers: int, cores: int, memory_gb: float) -> None:
    """max_workers workers of this shape must fit the cloud project's limits."""
    try:
        limits = driver.cloud_limits()
    except DriverError as exc:
        raise _invalid(f"cannot read the cloud project's limits: {exc}", "backend") from None
    for what, per, limit in (
        ("instances", 1, limits.instances),
        ("cores", cores, limits.cores),
        ("RAM (GB)", memory_gb, limits.ram_gb),
    ):
        if limit is not None and workers * per > limit + 1e-9:
            raise _invalid(
                f"max_workers {workers} needs {workers * per:g} {what}; the OpenStack project "
                f"allows {limit:g}",
                "max_workers",
            )


def _driver(backend: Backend) -> Any:
    if not supports(backend, PoolHost):
        raise _invalid(f"backend {backend.name} ({backend.kind}) keeps no warm pools", "backend")
    return driver_for(backend)


def pool_create(*, data: dict[str, Any]) -> Pool:
    backend = Backend.objects.filter(name=data["backend"]).first()
    if backend is None:
        raise _invalid(f"no backend {data['backend']!r}", "backend")
    if Pool.objects.filter(name=data["name"]).exists():
        raise Conflict(f"a pool named {data['name']!r} exists already", code=ErrorCode.CONFLICT)
    if data.get("nodes", 1) != 1:
        raise _invalid("nodes: a pool worker is one server (1 node per worker)", "nodes")
    _check_bounds(data, None)
    _check_placement(data)
    driver = _driver(backend)
    image = _image(data["image"], backend)
    try:
        cores, memory_gb = driver.pool_shape(
            flavor=data["flavor"], image=image_reference(image=image, backend=backend) or ""
        )
    except SettingsError as exc:
        raise _invalid(exc.message, exc.field) from None
    except DriverError as exc:
        raise _invalid(f"cannot check the pool on the cloud: {exc}", "backend") from None
    _check_project(driver, workers=data.get("max_workers", 1), cores=cores, memory_gb=memory_gb)
    pool = Pool.objects.create(
        backend=backend,
        name=data["name"],
        flavor=data["flavor"],
        image=image,
        cores=cores,
        memory_gb=memory_gb,
        **{
            k: data[k]
            for k in (
                "min_workers",
                "max_workers",
                "idle_timeout",
                "boot_timeout",
                "enabled",
                "placement",
            )
            if k in data
        },
    )
    jobs.enqueue(Job.AUTOSCALE_POOLS)
    return pool


@transaction.atomic
def pool_update(*, pool: Pool, data: dict[str, Any]) -> Pool:
    pool = Pool.objects.select_for_update().select_related("backend").get(pk=pool.pk)
    if pool.draining:
        raise Conflict(f"pool {pool.name} is being deleted", code=ErrorCode.STATE)
    _check_bounds(data, pool)
    _check_placement(data)
    if data.get("max_workers", pool.max_workers) > pool.max_workers:
        _check_project(
            _driver(pool.backend),
            workers=data["max_workers"],
            cores=pool.cores,
            memory_gb=pool.memory_gb,
        )
    for field in (
        "min_workers",
        "max_workers",
        "idle_timeout",
        "boot_timeout",
        "enabled",
        "placement",
    ):
        if field in data:
            setattr(pool, field, data[field])
    pool.save()
    jobs.enqueue(Job.AUTOSCALE_POOLS)
    return pool


def pool_delete(*, pool: Pool) -> bool:
    """Delete the pool, or drain it first when it has live workers; whether it is gone."""
    with transaction.atomic():
        pool = Pool.objects.select_for_update().get(pk=pool.pk)
        if not pool.workers.filter(state__in=LIVE_WORKER_STATES).exists():
            pool.delete()
            return True
        Pool.objects.filter(pk=pool.pk).update(draining=True)
    jobs.enqueue(Job.AUTOSCALE_POOLS)
    return False
