"""What an admin's backend settings mean to their driver: checks and a health report."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

from catalog.models import Backend
from compute.drivers import driver_for, traits_of
from core.exceptions import ApplicationError
from orchestration.drivers.base import DriverError, SettingsError, driver_class
from orchestration.drivers.capabilities import ElasticPartitions, HealthCheck, LimitsProbe


def settings_validate(
    *, kind: str, settings: Mapping[str, Any], secrets: Mapping[str, Any]
) -> dict[str, Any]:
    """Settings for a backend of `kind`, checked and normalised by its driver (so the API and
    the driver never disagree); an ApplicationError names the field."""
    if not isinstance(settings, Mapping):
        raise ApplicationError("settings must be an object", field="settings")
    try:
        return driver_class(kind).validate_settings(settings, secrets=secrets)
    except SettingsError as exc:
        field = exc.field if exc.field.startswith("secrets.") else f"settings.{exc.field}"
        raise ApplicationError(exc.message, field=field) from exc
    except DriverError as exc:
        raise ApplicationError(str(exc), field="kind") from exc


def secret_fields(kind: str) -> tuple[str, ...]:
    return traits_of(kind).secret_fields


def capacity_from_backend(backend: Backend) -> bool:
    """Whether this backend says its capacity itself (e.g. Slurm with capacity 'ask')."""
    try:
        return driver_class(backend.kind).capacity_from_backend(backend.settings or {})
    except DriverError:
        return False


def health_check(*, backend: Backend) -> dict[str, Any]:
    """Connect and report capacity and health: {ok, capacity, …} or {ok: false, error}."""
    try:
        driver = driver_for(backend)
        if isinstance(driver, HealthCheck):
            return driver.check()
        caps = driver.capabilities()
        return {
            "ok": True,
            "capacity": {"cores": caps.cores, "memory_gb": caps.memory_gb, "nodes": caps.max_nodes},
        }
    except DriverError as exc:
        return {"ok": False, "error": str(exc)}


LIMITS_PROBE_SECONDS = 60.0
_limits_seen: dict[tuple[str, str], tuple[float, str]] = {}
_limits_lock = threading.Lock()


def limits_problem(*, backend: Backend) -> str:
    """Why the kernel does not hold this backend's runs to their memory, cores and
    processes ('' when it does, or when the backend's own runtime does: Slurm's, a
    container's, a VM's); probed at most once a minute per kind of backend and settings."""
    key = (backend.kind, repr(sorted((backend.settings or {}).items())))
    with _limits_lock:
        seen = _limits_seen.get(key)
    if seen is not None and time.monotonic() - seen[0] < LIMITS_PROBE_SECONDS:
        return seen[1]
    try:
        driver = driver_for(backend)
    except DriverError:
        return ""
    problem = driver.limits_problem() if isinstance(driver, LimitsProbe) else ""
    with _limits_lock:
        _limits_seen[key] = (time.monotonic(), problem)
    return problem


def _elastic_driver(backend: Backend) -> ElasticPartitions:
    if not (backend.settings or {}).get("elastic"):
        raise ApplicationError(
            f"backend {backend.name} has no elastic partition", field="settings.elastic"
        )
    driver = driver_for(backend)
    if not isinstance(driver, ElasticPartitions):
        raise ApplicationError(
            f"a {backend.kind} backend has no elastic partitions", field="settings.elastic"
        )
    return driver


def elastic_report(*, backend: Backend) -> dict[str, Any]:
    """The elastic partition's nodes: Slurm's state and reason (a failed boot says so), the
    server's status, address and uptime; {ok: false, error} when Slurm or the cloud fails."""
    settings = (backend.settings or {}).get("elastic") or {}
    driver = _elastic_driver(backend)
    report: dict[str, Any] = {
        "backend": backend.name,
        "partition": settings.get("partition", ""),
        "settings": settings,
    }
    try:
        return {**report, "ok": True, "nodes": driver.elastic_nodes()}
    except DriverError as exc:
        return {**report, "ok": False, "nodes": [], "error": str(exc)}


def elastic_files(*, backend: Backend) -> dict[str, str]:
    """What the admin installs on the Slurm controller for the elastic partition (the
    slurm.conf lines, the programs' config and wrappers), by path."""
    try:
        return _elastic_driver(backend).elastic_files()
    except DriverError as exc:
        raise ApplicationError(str(exc), field="settings.elastic") from exc
