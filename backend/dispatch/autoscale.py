"""Warm pools, the portal's side (docs/pools.md): the autoscaler and the workers' faults.

Every POOL_AUTOSCALE_SECONDS, per pool: workers that never registered within the boot
timeout are failed boots (server deleted; the next boot waits 10 s doubling to 5 min), workers
silent for POOL_WORKER_TIMEOUT are lost (their runs requeued with the next attempt, their
server deleted); then the pool boots workers while admitted runs wait for it (up to `max`,
within the cloud project's limits: tenant quotas were applied by admission, which admitted
those runs) and deletes workers idle past the idle timeout down to `min`, never one that holds
a run. Every decision is stored with its reason (PoolDecision) and counted on /metrics.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from datetime import datetime, timedelta
from typing import Any, Protocol

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from catalog.images import image_digests, image_reference
from compute.drivers import DriverError, PoolHost, WorkerSpec, driver_for
from core.db import advisory_lock
from core.metrics import POOL_DECISIONS
from dispatch.pilots import worker_token
from orchestration.backoff import backoff_delay
from pools.choices import LIVE_WORKER_STATES, REGISTERED_STATES, ScaleAction, WorkerState
from pools.models import Pool, PoolDecision, PoolWorker
from pools.selectors import pooled_run_ids
from runs.services import run_requeue_or_fail
from studies.choices import STARTED_STATES, EndReason, RunState, WaitReason
from studies.models import Run

log = logging.getLogger(__name__)

BACKOFF_MAX = 300.0


def pools_autoscale() -> dict[str, int]:
    """One pass over every pool; per pool the change in its workers."""
    waiting = pooled_run_ids(runs_qs=Run.objects.filter(state=RunState.ADMITTED))
    out = {}
    for pool in Pool.objects.select_related("backend", "image").all():
        with advisory_lock(f"windtunnel.pool.{pool.pk}") as held:
            if not held:
                continue  # another pass is at it
            try:
                out[pool.name] = pool_autoscale(
                    pool=pool, waiting=[rid for rid, p in waiting.items() if p.pk == pool.pk]
                )
            except DriverError as exc:
                log.warning("pool %s: %s", pool.name, exc)
    return out


def decide(pool: Pool, action: str, *, count: int, queue: int, size: int, reason: str) -> None:
    """Store a decision (a HOLD only when its reason changed: not one per pass)."""
    if action == ScaleAction.HOLD:
        last = pool.decisions.order_by("-at", "-id").first()
        if last is not None and last.action == action and last.reason == reason:
            return
    PoolDecision.objects.create(
        pool=pool, action=action, count=count, queue=queue, size=size, reason=reason[:500]
    )
    POOL_DECISIONS.labels(pool=pool.name, action=action).inc()
    log.info("pool %s: %s %+d (%s)", pool.name, action, count, reason)


def pool_autoscale(*, pool: Pool, waiting: list[Any]) -> int:
    """Faults first, then up or down; the change in live workers."""
    driver = driver_for(pool.backend)
    if not isinstance(driver, PoolHost):
        log.warning("pool %s: backend %s keeps no pools", pool.name, pool.backend.name)
        return 0
    _failed_boots(pool, driver, queue=len(waiting))
    _lost_workers(pool, driver, queue=len(waiting))
    if pool.draining:
        return _drain(pool, driver)
    change = _scale_up(pool, driver, waiting) if pool.enabled and pool.backend.enabled else 0
    if not waiting:
        change -= _scale_down(pool, driver)
    _wait_reasons(pool, waiting)
    return change


def _live(pool: Pool) -> list[PoolWorker]:
    return list(pool.workers.filter(state__in=LIVE_WORKER_STATES))


def _failed_boots(pool: Pool, driver: Any, *, queue: int) -> None:
    cutoff = timezone.now() - timedelta(seconds=pool.boot_timeout)
    for worker in pool.workers.filter(state=WorkerState.BOOTING, created_at__lt=cutoff):
        reason = f"worker {worker.server_name or worker.pk} did not register within {pool.boot_timeout:g} s"
        console = _console_tail(driver, worker.server_id)  # read before its server goes
        if not _end_worker(worker, WorkerState.FAILED, reason + console, driver):
            continue
        size = len(_live(pool)) + 1
        _boot_failed(pool, reason, count=-1, queue=queue, size=size, console=console)


CONSOLE_LINES = 3  # the console's last lines an admin is shown for a worker that never registered
CONSOLE_CHARS = 240


def _console_tail(driver: Any, server_id: str) -> str:
    """'; its console ended: …' with the last non-empty lines of the server's console (the
    kernel's panic, cloud-init's error), or '' when the cloud has none to give."""
    read = getattr(driver, "console_tail", None)
    if not server_id or read is None:
        return ""
    lines = [line.strip() for line in read(server_id, lines=40).splitlines() if line.strip()]
    if not lines:
        return ""
    return f"; its console ended: {' | '.join(lines[-CONSOLE_LINES:])[-CONSOLE_CHARS:]}"


def _boot_failed(
    pool: Pool, reason: str, *, count: int, queue: int, size: int, console: str = ""
) -> None:
    """A worker that did not boot: the pool's next boot waits (10 s doubling to
    BACKOFF_MAX), and the decision log says why and for how long (and how its console
    ended, when it has one)."""
    failures = pool.boot_failures + 1
    delay = backoff_delay(failures, first=10.0, cap=BACKOFF_MAX)
    pool.boot_failures, pool.next_boot_at = failures, timezone.now() + timedelta(seconds=delay)
    Pool.objects.filter(pk=pool.pk).update(boot_failures=failures, next_boot_at=pool.next_boot_at)
    decide(
        pool,
        ScaleAction.BOOT_FAILED,
        count=count,
        queue=queue,
        size=size,
        reason=f"{reason}; failed boot {failures} in a row: next boot in {delay:g} s{console}",
    )


def _lost_workers(pool: Pool, driver: Any, *, queue: int) -> None:
    timeout = settings.POOL_WORKER_TIMEOUT
    cutoff = timezone.now() - timedelta(seconds=timeout)
    for worker in pool.workers.filter(state__in=REGISTERED_STATES, heartbeat_at__lt=cutoff):
        seconds = int((timezone.now() - (worker.heartbeat_at or cutoff)).total_seconds())
        reason = f"worker {worker.server_name or worker.pk} lost: no heartbeat for {seconds} s"
        if not _end_worker(worker, WorkerState.LOST, reason, driver):
            continue
        requeued = 0
        for run in Run.objects.filter(handle=worker.handle, state__in=STARTED_STATES):
            requeued += bool(
                run_requeue_or_fail(run=run, reason=EndReason.AGENT_LOST, message=reason)
            )
        decide(
            pool,
            ScaleAction.LOST,
            count=-1,
            queue=queue,
            size=len(_live(pool)) + 1,
            reason=f"{reason}; {requeued} run(s) requeued",
        )


def _end_worker(worker: PoolWorker, state: str, reason: str, driver: Any) -> bool:
    """Fence the worker (from now on its pilot is told 409), then delete its server."""
    with transaction.atomic():
        row = (
            PoolWorker.objects.select_for_update().filter(pk=worker.pk, state=worker.state).first()
        )
        if row is None:
            return False
        PoolWorker.objects.filter(pk=row.pk).update(
            state=state, ended_at=timezone.now(), end_reason=reason[:500]
        )
    try:
        driver.delete_worker(worker.server_id)
    except DriverError as exc:  # the leak reaper deletes it later
        log.warning("pool worker %s: delete failed: %s", worker.pk, exc)
    return True


def _free_cores(worker: PoolWorker) -> int:
    used = sum(
        Run.objects.filter(handle=worker.handle, state__in=STARTED_STATES).values_list(
            "processes", flat=True
        )
    )
    return max(0, worker.cores - used)


class CloudRoom(Protocol):
    """A cloud project's limits (None: unlimited) and what is in use: the driver's
    cloud_limits() answer, or the simulator's model of one."""

    cores: int | None
    ram_gb: float | None
    instances: int | None
    cores_used: int
    ram_gb_used: float
    instances_used: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScaleUp:
    """What the autoscaler decides to boot for a pool, and why (count 0: hold)."""

    count: int
    reason: str
    wanted: int  # within max_workers, before the cloud project's limits


def scale_up_plan(
    *,
    waiting: int,
    demand_cores: int,
    free_cores: int,
    booting: int,
    live: int,
    worker_cores: int,
    worker_memory_gb: float,
    min_workers: int,
    max_workers: int,
    backing_off: int = 0,
    limits: CloudRoom | None = None,
) -> ScaleUp | None:
    """Boot workers while admitted runs wait for the pool: enough for the cores they need
    beyond what ready workers have free and booting workers will have, up to `max_workers`,
    within the cloud project's room; at least `min_workers`. None: nothing to boot.
    `backing_off`: failed boots in a row while the pool waits out its backoff. Pure: the
    autoscaler and the simulator (bench/sim) decide with it."""
    supply = free_cores + booting * worker_cores
    need = math.ceil(max(0, demand_cores - supply) / max(worker_cores, 1))
    want = max(need, min_workers - live)
    if want <= 0:
        return None
    what = (
        f"{waiting} run(s) wait ({demand_cores} cores), {supply} cores free or booting"
        if need
        else f"{live} worker(s) < min {min_workers}"
    )
    room = max_workers - live
    if room <= 0:
        return ScaleUp(count=0, wanted=want, reason=f"{what}; at max {max_workers}")
    if backing_off:
        return ScaleUp(
            count=0, wanted=want, reason=f"{what}; backing off after {backing_off} failed boot(s)"
        )
    count = min(want, room)
    capped = count
    if limits is not None:
        if limits.cores is not None:
            capped = min(capped, (limits.cores - limits.cores_used) // max(worker_cores, 1))
        if limits.instances is not None:
            capped = min(capped, limits.instances - limits.instances_used)
        if limits.ram_gb is not None:
            capped = min(
                capped, int((limits.ram_gb - limits.ram_gb_used) // max(worker_memory_gb, 1e-9))
            )
    capped = max(capped, 0)
    if capped <= 0:
        return ScaleUp(
            count=0,
            wanted=count,
            reason=f"{what}; the cloud project's limits leave no room for another worker",
        )
    note = f" (cloud project limits allow {capped} of {count})" if capped < count else ""
    return ScaleUp(
        count=capped, wanted=count, reason=f"{what}: boot {{booted}}{note}, max {max_workers}"
    )


def scale_down_plan(
    *,
    idle_since: dict[Any, datetime],
    live: int,
    min_workers: int,
    idle_timeout: float,
    now: datetime,
) -> list[Any]:
    """The idle workers to delete: idle past the timeout, longest idle first, down to
    `min_workers` (`idle_since`: the idle workers only; the caller re-checks each under its
    row lock, never deleting one that holds a run)."""
    cutoff = now - timedelta(seconds=idle_timeout)
    idle = sorted((since, key) for key, since in idle_since.items() if since < cutoff)
    return [key for _, key in idle[: max(0, live - min_workers)]]


def _scale_up(pool: Pool, driver: Any, waiting: list[Any]) -> int:
    live = _live(pool)
    booting = [w for w in live if w.state == WorkerState.BOOTING]
    ready = [w for w in live if w.state in (WorkerState.IDLE, WorkerState.BUSY)]
    demand = sum(Run.objects.filter(pk__in=waiting).values_list("processes", flat=True))
    backing_off = pool.next_boot_at is not None and pool.next_boot_at > timezone.now()
    common: dict[str, Any] = {
        "waiting": len(waiting),
        "demand_cores": demand,
        "free_cores": sum(_free_cores(w) for w in ready),
        "booting": len(booting),
        "live": len(live),
        "worker_cores": pool.cores,
        "worker_memory_gb": pool.memory_gb,
        "min_workers": pool.min_workers,
        "max_workers": pool.max_workers,
        "backing_off": pool.boot_failures if backing_off else 0,
    }
    plan = scale_up_plan(**common)
    if plan is not None and plan.count > 0:  # the cloud's limits are read only to boot
        plan = scale_up_plan(**common, limits=driver.cloud_limits())
    if plan is None:
        return 0
    if plan.count <= 0:
        decide(
            pool,
            ScaleAction.HOLD,
            count=0,
            queue=len(waiting),
            size=len(live),
            reason=plan.reason.replace("another worker", f"a {pool.flavor}"),
        )
        return 0
    booted = sum(_boot(pool, driver) for _ in range(plan.count))
    decide(
        pool,
        ScaleAction.UP,
        count=booted,
        queue=len(waiting),
        size=len(live),
        reason=plan.reason.format(booted=booted),
    )
    return booted


def _boot(pool: Pool, driver: Any) -> int:
    image = image_reference(image=pool.image, backend=pool.backend)
    worker = PoolWorker.objects.create(pool=pool, cores=pool.cores, image_ref=image or "")
    spec = WorkerSpec(
        worker_id=str(worker.pk),
        pool=pool.name,
        flavor=pool.flavor,
        image=image or "",
        portal_url=settings.WINDTUNNEL["PUBLIC_URL"],
        token=worker_token(worker_id=worker.pk),
        cores=pool.cores,
        heartbeat_interval=settings.WINDTUNNEL["HEARTBEAT_INTERVAL"],
        grace=settings.POOL_PILOT_GRACE,
        cache=image_digests(image=pool.image),
    )
    try:
        server_id, name = driver.boot_worker(spec)
    except DriverError as exc:
        PoolWorker.objects.filter(pk=worker.pk).update(
            state=WorkerState.FAILED, ended_at=timezone.now(), end_reason=f"boot: {exc}"[:500]
        )
        _boot_failed(pool, f"the cloud refused a worker: {exc}", count=0, queue=0, size=0)
        return 0
    PoolWorker.objects.filter(pk=worker.pk).update(server_id=server_id, server_name=name)
    return 1


def _scale_down(pool: Pool, driver: Any) -> int:
    live = _live(pool)
    chosen = scale_down_plan(
        idle_since={
            w.pk: w.idle_since for w in live if w.state == WorkerState.IDLE and w.idle_since
        },
        live=len(live),
        min_workers=pool.min_workers,
        idle_timeout=pool.idle_timeout,
        now=timezone.now(),
    )
    by_id = {w.pk: w for w in live}
    deleted = 0
    for worker in (by_id[pk] for pk in chosen):
        with transaction.atomic():
            row = (
                PoolWorker.objects.select_for_update()
                .filter(pk=worker.pk, state=WorkerState.IDLE)
                .first()
            )
            if (
                row is None
                or Run.objects.filter(handle=row.handle, state__in=STARTED_STATES).exists()
            ):
                continue  # leased a run meanwhile: never delete a worker that holds one
            idle_s = int((timezone.now() - row.idle_since).total_seconds()) if row.idle_since else 0
            reason = f"worker {row.server_name} idle for {idle_s} s (idle timeout {pool.idle_timeout:g} s)"
            PoolWorker.objects.filter(pk=row.pk).update(
                state=WorkerState.DELETED, ended_at=timezone.now(), end_reason=reason
            )
        try:
            driver.delete_worker(row.server_id)
        except DriverError as exc:
            log.warning("pool worker %s: delete failed: %s", row.pk, exc)
        deleted += 1
        decide(
            pool,
            ScaleAction.DOWN,
            count=-1,
            queue=0,
            size=len(live) - deleted + 1,
            reason=f"{reason}; {len(live) - deleted} left, min {pool.min_workers}",
        )
    return deleted


def _drain(pool: Pool, driver: Any) -> int:
    """A pool being deleted: its idle workers go now, busy ones once their runs end; the
    pool row goes with its last worker."""
    live = _live(pool)
    deleted = 0
    for worker in live:
        with transaction.atomic():
            row = PoolWorker.objects.select_for_update().filter(pk=worker.pk).first()
            if row is None or row.state not in LIVE_WORKER_STATES:
                continue
            if Run.objects.filter(handle=row.handle, state__in=STARTED_STATES).exists():
                PoolWorker.objects.filter(pk=row.pk).update(state=WorkerState.DRAINING)
                continue
            PoolWorker.objects.filter(pk=row.pk).update(
                state=WorkerState.DELETED, ended_at=timezone.now(), end_reason="pool deleted"
            )
        try:
            driver.delete_worker(row.server_id)
        except DriverError as exc:
            log.warning("pool worker %s: delete failed: %s", row.pk, exc)
        deleted += 1
    if deleted:
        decide(
            pool,
            ScaleAction.DRAIN,
            count=-deleted,
            queue=0,
            size=len(live),
            reason=f"pool being deleted: {deleted} worker(s) deleted, {len(live) - deleted} finish their runs first",
        )
    if not _live(pool):
        Pool.objects.filter(pk=pool.pk).delete()
    return -deleted


def _wait_reasons(pool: Pool, waiting: list[Any]) -> None:
    """What a user reads of an admitted run waiting for the pool."""
    if not waiting:
        return
    live = _live(pool)
    booting = sum(w.state == WorkerState.BOOTING for w in live)
    if booting:
        detail = (
            f"waiting for a worker to boot (pool {pool.name}, {booting} of {len(live)} booting)"
        )
    else:
        detail = (
            f"waiting for a worker (pool {pool.name}, {len(live)} of max {pool.max_workers} busy)"
        )
    (
        Run.objects.filter(pk__in=waiting, state=RunState.ADMITTED)
        .exclude(wait_reason=WaitReason.POOL, wait_detail=detail)
        .update(wait_reason=WaitReason.POOL, wait_detail=detail[:200])
    )
