"""OpenStack backends from the portal's side: the project's limits and the leak reaper.

The scheduler never calls a cloud: a periodic task reads each OpenStack backend's project
limits into `Backend.cloud_limits`, and admission treats them as a cap on that backend
(the effective limit is the smaller of the portal's and the cloud's; runs held by the cloud's
wait with the reason "cloud project limit"). Servers and stacks the portal made carry their
run id: the leak reaper deletes those whose run the portal no longer tracks.
"""

from __future__ import annotations

import logging
from typing import Any

from django.utils import timezone

from catalog.choices import BackendKind
from catalog.models import Backend
from orchestration.drivers.base import DriverError

log = logging.getLogger(__name__)


def _driver(backend: Backend):
    from studies.services import _driver_for

    return _driver_for(backend)


def cloud_limits_refresh(*, backend: Backend) -> dict[str, Any] | None:
    """Read the project's compute limits into the backend row; None when the cloud failed."""
    try:
        limits = _driver(backend).cloud_limits().to_dict()
    except DriverError as exc:
        Backend.objects.filter(pk=backend.pk).update(cloud_error=str(exc)[:2000])
        log.warning("cannot read the limits of %s: %s", backend.name, exc)
        return None
    changed = limits != (backend.cloud_limits or {})
    Backend.objects.filter(pk=backend.pk).update(
        cloud_limits=limits, cloud_limits_at=timezone.now(), cloud_error=""
    )
    backend.cloud_limits = limits
    if changed:  # a raised limit may let queued runs in now
        from core.events import enqueue_on_commit
        from scheduler.tasks import tick

        enqueue_on_commit(tick)
    return limits


def cloud_limits_refresh_all() -> int:
    count = 0
    for backend in Backend.objects.filter(kind=BackendKind.OPENSTACK, enabled=True):
        count += cloud_limits_refresh(backend=backend) is not None
    return count


def cloud_limit_problem(
    *, backend: Backend, usage, cores: int, memory_gb: float, nodes: int
) -> str | None:
    """Which of the cloud project's limits a run of this shape would pass, or None.

    `usage` is what the portal's runs hold on this backend; the portal is the project's one
    user by design (docs/backends/openstack.md), and a create refused for quota by the cloud
    anyway returns the run to the queue."""
    limits = backend.cloud_limits or {}
    if backend.kind != BackendKind.OPENSTACK or not limits:
        return None
    if limits.get("cores") is not None and usage.cores + cores > limits["cores"]:
        return f"cores ({usage.cores}+{cores} > {limits['cores']} in the OpenStack project)"
    if limits.get("ram_gb") is not None and usage.memory_gb + memory_gb > limits["ram_gb"] + 1e-9:
        return (
            f"RAM ({usage.memory_gb:g}+{memory_gb:g} GB > {limits['ram_gb']:g} GB in the "
            "OpenStack project)"
        )
    instances = max(nodes, 1)
    if limits.get("instances") is not None and usage.nodes + instances > limits["instances"]:
        return (
            f"instances ({usage.nodes}+{instances} > {limits['instances']} in the OpenStack "
            "project)"
        )
    return None


def effective_limits(*, quota, backends) -> list[dict[str, Any]]:
    """Per backend the tenant may use: each limit's value and where it comes from."""
    out = []
    for backend in backends:
        cloud = (backend.cloud_limits or {}) if backend.kind == BackendKind.OPENSTACK else {}
        rows = {}
        for key, portal, cap, cloud_key in (
            ("cores", quota.cores, backend.cores, "cores"),
            ("memory_gb", quota.memory_gb, backend.memory_gb, "ram_gb"),
            ("nodes", quota.max_nodes, backend.max_nodes, "instances"),
        ):
            candidates = [(portal, "portal quota"), (cap, "backend capacity")]
            if cloud.get(cloud_key) is not None:
                candidates.append((cloud[cloud_key], "cloud project limit"))
            value, source = min(candidates, key=lambda c: c[0])
            rows[key] = {"value": value, "source": source}
        out.append(
            {
                "backend": backend.name,
                "kind": backend.kind,
                "limits": rows,
                "cloud_read_at": backend.cloud_limits_at,
                "cloud_error": backend.cloud_error or "",
            }
        )
    return out


def leaks_reap() -> dict[str, list[str]]:
    """Delete servers and stacks of every OpenStack backend that no tracked run holds."""
    from studies.choices import HOLDING_STATES, RunState
    from studies.models import Simulation

    deleted: dict[str, list[str]] = {}
    # every backend's live attempts: several backends may share one project. ADMITTED runs
    # may be creating their server right now; ended runs and superseded attempts are leaks.
    tracked = {
        (str(run_id), attempt)
        for run_id, attempt in Simulation.objects.filter(
            backend__kind=BackendKind.OPENSTACK, state__in=[*HOLDING_STATES, RunState.ADMITTED]
        ).values_list("id", "attempt")
    }
    for backend in Backend.objects.filter(kind=BackendKind.OPENSTACK, enabled=True):
        names: list[str] = []
        try:
            driver = _driver(backend)
            names += driver.reap_leaks(tracked=tracked, builders=_builders_in_progress())
            names += _stack_leaks(driver, tracked)
        except DriverError as exc:
            log.warning("leak reaper on %s: %s", backend.name, exc)
        if names:
            log.warning("leak reaper deleted on %s: %s", backend.name, ", ".join(names))
            deleted[backend.name] = names
    return deleted


def _stack_leaks(driver, tracked: set[tuple[str, int]]) -> list[str]:
    from orchestration.drivers import openstack_heat

    return openstack_heat.stack_leaks(driver, tracked=tracked)


def _builders_in_progress() -> set[str]:
    """Server ids of VM image bakes still running (spared by the reaper)."""
    try:
        from catalog.vm import builders_in_progress
    except ImportError:
        return set()
    return set(builders_in_progress())


STACK_EVENTS_KEY = "windtunnel:stack-events:{run}:{attempt}"


def stack_events_sync() -> int:
    """Copy new Heat events of multi-node runs into their run logs (the dashboard's log view
    shows the stack coming up). The newest event id seen per attempt is kept in Redis."""
    import redis
    from django.conf import settings

    from studies.choices import STARTED_STATES
    from studies.models import Simulation
    from telemetry.services import telemetry_ingest

    runs = list(
        Simulation.objects.select_related("backend").filter(
            backend__kind=BackendKind.OPENSTACK,
            state__in=STARTED_STATES,
            handle__startswith="stack:",
        )
    )
    if not runs:
        return 0
    from orchestration.drivers import openstack_heat

    store = redis.Redis.from_url(settings.REDIS_URL)
    copied = 0
    for run in runs:
        key = STACK_EVENTS_KEY.format(run=run.pk, attempt=run.attempt)
        since = store.get(key)
        try:
            lines, newest = openstack_heat.stack_events(
                _driver(run.backend),
                run.handle.partition(":")[2],
                since=since.decode() if since else None,
            )
        except DriverError as exc:
            log.warning("stack events of run %s: %s", run.pk, exc)
            continue
        if lines:
            try:
                telemetry_ingest(
                    run=run, attempt=run.attempt, series={}, log=[f"[heat] {x}" for x in lines]
                )
            except Exception as exc:  # noqa: BLE001 — a stale attempt: nothing to add to
                log.info("stack events of run %s not stored: %s", run.pk, exc)
                continue
            copied += len(lines)
        if newest:
            store.set(key, newest, ex=7 * 24 * 3600)
    return copied
