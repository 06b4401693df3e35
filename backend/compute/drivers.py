"""Drivers built from backend rows: the one place the portal touches `orchestration.drivers`.

Everything kind-specific is asked of the driver: its traits (`traits_of`: does a run hold
nodes, give its cores back early, need an image…), its optional capabilities
(`supports(backend, ResultsReader)`), and the driver itself (`driver_for`). No other module
keeps a list of backend kinds (docs/development/adding-a-driver.md).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from django.conf import settings

from catalog.models import Backend
from core.crypto import decrypt_json
from orchestration.drivers.base import (
    Driver,
    DriverContext,
    DriverError,
    DriverTraits,
    RunPhase,
    RunSpec,
    RunStatus,
    Step,
    build_driver,
    driver_kinds,
    driver_supports,
    driver_traits,
)
from orchestration.drivers.capabilities import (
    BatchStart,
    CloudLimited,
    ElasticPartitions,
    EndExplainer,
    HealthCheck,
    LeakReaper,
    PoolHost,
    ResultsReader,
    RunEvents,
    StartupLog,
    VmImageHost,
    WorkerSpec,
)

# what the rest of the backend uses of the driver interface, from here only
__all__ = [
    "BatchStart",
    "CloudLimited",
    "Driver",
    "DriverError",
    "ElasticPartitions",
    "DriverTraits",
    "EndExplainer",
    "HealthCheck",
    "LeakReaper",
    "PoolHost",
    "ResultsReader",
    "RunEvents",
    "RunPhase",
    "RunSpec",
    "RunStatus",
    "StartupLog",
    "Step",
    "VmImageHost",
    "WorkerSpec",
    "driver_for",
    "kinds",
    "run_work_dir",
    "supports",
    "traits_of",
    "vm_image_host",
]


@functools.cache
def _traits(kind: str) -> DriverTraits:
    try:
        return driver_traits(kind)
    except DriverError:  # a row of a kind this portal no longer has: it can do nothing
        return DriverTraits(kind=kind)


def traits_of(backend: Backend | str) -> DriverTraits:
    """What a backend (or a kind) is: read from its driver class, without building one."""
    return _traits(backend if isinstance(backend, str) else backend.kind)


def supports(backend: Backend | str, capability: type) -> bool:
    """Whether the backend's driver implements an optional capability
    (orchestration.drivers.capabilities), without building the driver."""
    kind = backend if isinstance(backend, str) else backend.kind
    try:
        return driver_supports(kind, capability)
    except DriverError:
        return False


def kinds() -> list[str]:
    return driver_kinds()


def driver_for(backend: Backend) -> Any:
    """The driver of a backend row: its settings, its capacity, the portal's run directory
    and, for drivers that declare secret fields, its decrypted secrets (never logged)."""
    traits = traits_of(backend)
    secrets = decrypt_json(backend.secrets) if traits.secret_fields and backend.secrets else {}
    context = DriverContext(
        cores=backend.cores,
        memory_gb=backend.memory_gb,
        max_nodes=backend.max_nodes,
        work_root=str(settings.RUNS_DIR),
        secrets=secrets,
        cgroup_parent=settings.WINDTUNNEL["CGROUP_PARENT"],
    )
    return build_driver(backend.kind, backend.settings or {}, context=context)


def vm_image_host(backend: Backend) -> VmImageHost:
    """The cloud that keeps a backend's VM images: its driver, as a VmImageHost (what a
    bake, an upload and a registration ask of it); DriverError when its driver keeps none."""
    driver = driver_for(backend)
    if not isinstance(driver, VmImageHost):
        raise DriverError(f"backend {backend.name} ({backend.kind}) keeps no VM images")
    return driver


def run_work_dir(*, run_id: Any, attempt: int) -> str:
    """Where an attempt of a run keeps its files on the portal's host."""
    return f"{_runs_prefix(str(settings.RUNS_DIR))}{run_id}/attempt-{attempt}"


@functools.lru_cache(maxsize=4)
def _runs_prefix(runs_dir: str) -> str:
    """RUNS_DIR as pathlib joins onto it (normalised, with its separator): a run's directory
    is made for every dispatched run, and pathlib cost more than the rest of its spec."""
    return str(Path(runs_dir) / "x")[:-1]
