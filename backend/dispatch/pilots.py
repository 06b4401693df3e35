"""Warm pools, the pilot's side (docs/pools.md): register, lease, heartbeat, release.

A pool worker's pilot calls these over the agent API with the worker's bearer token. A lease
claims admitted runs of the worker's pool exactly as a dispatch does (studies.transitions.
runs_claim: admitted → provisioning, attempt + 1 and its token) and stores the worker as the
attempt's handle ("worker:<server>/<worker>"), so the run keeps its attempt fence: its agent
reports with the attempt's token, and anything the pilot says of a run names the attempt. The
worker's own fence is its state: a worker lost, failed or deleted is answered 409 on every
call, and its pilot stops its runs and exits.
"""

from __future__ import annotations

import hmac
import json
import logging
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django.utils.crypto import salted_hmac

from core.exceptions import ApplicationError, Conflict, ErrorCode
from dispatch.start import run_spec
from pools.choices import REGISTERED_STATES, WorkerState
from pools.models import Pool, PoolWorker
from pools.selectors import pool_of, run_shapes
from runs.services import run_requeue_or_fail
from studies.choices import STARTED_STATES, EndReason, RunState
from studies.models import Run
from studies.transitions import runs_claim, runs_record_handles

log = logging.getLogger(__name__)

LEASE_BATCH = 16  # admitted runs looked at per lease
POLL_INTERVAL = 1.0  # s between a free pilot's lease calls


class WorkerAuth(ApplicationError):
    status = 401

    def __init__(self) -> None:
        super().__init__("missing or wrong worker token", code=ErrorCode.UNAUTHENTICATED)


class WorkerGone(Conflict):
    """The portal no longer counts this worker: its pilot stops its runs and exits."""

    def __init__(self, state: str) -> None:
        super().__init__(f"this worker is {state}: stop and exit", code=ErrorCode.STALE_ATTEMPT)


def worker_token(*, worker_id: Any) -> str:
    """A worker's bearer token: an HMAC of its id under the portal's SECRET_KEY."""
    return salted_hmac("windtunnel.worker-token", str(worker_id), algorithm="sha256").hexdigest()


def worker_authenticated(*, worker_id: Any, token: str) -> PoolWorker:
    """The worker the token is of (401 for any other caller, whatever the id)."""
    if not token or not hmac.compare_digest(token, worker_token(worker_id=worker_id)):
        raise WorkerAuth()
    worker = PoolWorker.objects.select_related("pool", "pool__backend").filter(pk=worker_id).first()
    if worker is None:
        raise WorkerAuth()
    return worker


def _answer(**extra: Any) -> dict[str, Any]:
    return {"stop": False, **extra}


def worker_register(*, worker: PoolWorker, cores: int | None) -> dict[str, Any]:
    """The pilot is up: a booting worker becomes idle (a repeat is fine); the pool's boot
    failures start afresh."""
    now = timezone.now()
    booted = PoolWorker.objects.filter(pk=worker.pk, state=WorkerState.BOOTING).update(
        state=WorkerState.IDLE, registered_at=now, heartbeat_at=now, idle_since=now
    )
    if booted:
        Pool.objects.filter(pk=worker.pool_id).update(boot_failures=0, next_boot_at=None)
        log.info("pool %s: worker %s registered (%s cores)", worker.pool.name, worker.pk, cores)
    elif worker.state not in REGISTERED_STATES:
        raise WorkerGone(worker.state)
    return _answer(
        heartbeat_interval=settings.WINDTUNNEL["HEARTBEAT_INTERVAL"], poll_interval=POLL_INTERVAL
    )


def worker_lease(*, worker: PoolWorker, free_cores: int) -> dict[str, Any]:
    """Admitted runs of the worker's pool that fit `free_cores`, claimed for it: their run
    specs (each with its attempt and token), oldest admitted first."""
    with transaction.atomic():
        row = PoolWorker.objects.select_for_update().select_related("pool").get(pk=worker.pk)
        if row.state == WorkerState.DRAINING or row.pool.draining:
            return _answer(runs=[], stop=not _held(row))
        if row.state not in (WorkerState.IDLE, WorkerState.BUSY):
            raise WorkerGone(row.state)
        PoolWorker.objects.filter(pk=row.pk).update(heartbeat_at=timezone.now())
        chosen = _fitting(row.pool, free_cores)
        if not chosen:
            return _answer(runs=[])
        runs, tokens = runs_claim(run_ids=chosen)
        stored = runs_record_handles(rows=[(str(r.pk), r.attempt, row.handle, "") for r in runs])
        runs = [r for r in runs if str(r.pk) in stored]
        if runs:
            Run.objects.filter(pk__in=[r.pk for r in runs]).update(wait_reason="", wait_detail="")
            PoolWorker.objects.filter(pk=row.pk).update(state=WorkerState.BUSY, idle_since=None)
    specs = []
    for run in runs:
        spec = run_spec(run=run, study=run.study, token=tokens[run.pk])
        specs.append(json.loads(spec.to_json(sandbox="uid")))
        log.info(
            "pool %s: run %s attempt %s leased by %s", row.pool.name, run.pk, run.attempt, row.pk
        )
    return _answer(runs=specs)


def _fitting(pool: Pool, free_cores: int) -> list[Any]:
    """Ids of the pool's admitted runs that fit `free_cores`, oldest admitted first."""
    waiting = Run.objects.filter(backend_id=pool.backend_id, state=RunState.ADMITTED).order_by(
        "admitted_at", "queued_at", "index"
    )[: LEASE_BATCH * 4]
    pools = [pool]
    chosen: list[Any] = []
    left = free_cores
    for shape in run_shapes(waiting):
        if len(chosen) >= LEASE_BATCH:
            break
        if pool_of(shape, pools) is pool and shape.processes <= left:
            chosen.append(shape.id)
            left -= shape.processes
    return chosen


def _held(worker: PoolWorker) -> list[tuple[str, int]]:
    """The attempts the portal counts as this worker's."""
    return [
        (str(pk), attempt)
        for pk, attempt in Run.objects.filter(
            handle=worker.handle, state__in=STARTED_STATES
        ).values_list("id", "attempt")
    ]


def worker_heartbeat(*, worker: PoolWorker, runs: list[tuple[str, int]]) -> dict[str, Any]:
    """A sign of life, and what the pilot holds: the answer names the attempts it must stop
    (cancelled, ended, no longer its own) and whether to stop (draining and empty)."""
    now = timezone.now()
    alive = PoolWorker.objects.filter(pk=worker.pk, state__in=REGISTERED_STATES).update(
        heartbeat_at=now
    )
    if not alive:
        raise WorkerGone(worker.state)
    held = set(_held(worker))
    cancel = [{"run_id": r, "attempt": a} for r, a in runs if (r, a) not in held]
    holding = _settle_idle(worker)
    return _answer(cancel=cancel, stop=worker.state == WorkerState.DRAINING and not holding)


def worker_release(
    *, worker: PoolWorker, run_id: str, attempt: int, exit_code: int | None
) -> dict[str, Any]:
    """A leased attempt's agent exited. When it exited without its final report (the run
    is still this worker's attempt), the attempt ends here: requeued while retries remain."""
    if worker.state not in REGISTERED_STATES:
        raise WorkerGone(worker.state)
    run = (
        Run.objects.select_related("backend")
        .filter(pk=run_id, attempt=attempt, handle=worker.handle)
        .first()
    )
    if run is not None:
        started = run.provisioning_at or timezone.now()
        busy = max(0.0, (timezone.now() - started).total_seconds())
        PoolWorker.objects.filter(pk=worker.pk).update(
            busy_seconds=F("busy_seconds") + busy, runs_done=F("runs_done") + 1
        )
        if run.state in STARTED_STATES:
            run_requeue_or_fail(
                run=run,
                reason=EndReason.AGENT_LOST,
                message=f"its agent on pool worker {worker.server_name or worker.pk} exited "
                f"(code {exit_code}) without a final report",
            )
    holding = _settle_idle(worker)
    return _answer(stop=worker.state == WorkerState.DRAINING and not holding)


def _settle_idle(worker: PoolWorker) -> bool:
    """busy ↔ idle as the worker's runs come and go (idle_since starts the idle timeout),
    under the worker's row lock, as a lease and a scale-down take it; whether it holds runs."""
    with transaction.atomic():
        row = PoolWorker.objects.select_for_update().filter(pk=worker.pk).first()
        if row is None:
            return False
        held = bool(_held(row))
        if held and row.state == WorkerState.IDLE:
            PoolWorker.objects.filter(pk=row.pk).update(state=WorkerState.BUSY, idle_since=None)
        elif not held and row.state == WorkerState.BUSY:
            PoolWorker.objects.filter(pk=row.pk).update(
                state=WorkerState.IDLE, idle_since=timezone.now()
            )
        return held
