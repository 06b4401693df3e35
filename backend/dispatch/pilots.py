"""Warm pools, the pilot's side (docs/pools.md): register, lease, heartbeat, release.

A pool worker's pilot calls these over the agent API with the worker's bearer token. A lease
claims admitted runs of the worker's pool exactly as a dispatch does (studies.transitions.
runs_claim: admitted → provisioning, attempt + 1 and its token) and stores the worker as the
attempt's handle ("worker:<server>/<worker>"), so the run keeps its attempt fence: its agent
reports with the attempt's token, and anything the pilot says of a run names the attempt. The
worker's own fence is its state: a worker lost, failed or deleted is answered 409 on every
call, and its pilot stops its runs and exits.

Which of the waiting runs the asking worker gets is the pool's placement policy's answer
(orchestration/planning/placement.py; this module only reads the rows into its views and writes the
result): the queue is placed in order over the pool's workers and the asker takes the runs
placed on it. A worker's room is what its pilot said at its last lease; one that has not
asked for `POOL_PLACEMENT_HOLD` seconds (full, or silent) counts as full, so nothing waits
on it longer than that.
"""

from __future__ import annotations

import hmac
import json
import logging
import random
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django.utils.crypto import salted_hmac

from catalog.images import image_digests, image_layers
from core.exceptions import ApplicationError, Conflict, ErrorCode
from dispatch.start import run_case_refused, run_spec
from orchestration.case import casecheck
from orchestration.planning.placement import (
    DIGEST_RE,
    Fleet,
    PlacementState,
    RunView,
    WorkerView,
    lease,
    policy_named,
)
from pools.choices import REGISTERED_STATES, WorkerState
from pools.models import Pool, PoolWorker
from pools.selectors import pool_of, run_shapes
from runs.services import run_requeue_or_fail
from studies.choices import STARTED_STATES, EndReason, RunState
from studies.models import Run
from studies.transitions import runs_claim, runs_record_handles

log = logging.getLogger(__name__)

LEASE_BATCH = 16  # runs leased at most per lease
POLL_INTERVAL = 1.0  # s between a free pilot's lease calls
CACHE_MAX = 256  # digests a worker may report its cache holds


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


def worker_cache(digests: list[str] | None) -> list[str] | None:
    """What a pilot says its cache holds, checked: at most CACHE_MAX `sha256:<64 hex>`
    digests (repeats dropped); None when it said nothing."""
    if digests is None:
        return None
    if len(digests) > CACHE_MAX:
        raise ApplicationError(f"cache: at most {CACHE_MAX} digests", field="cache")
    for i, d in enumerate(digests):
        if not isinstance(d, str) or not DIGEST_RE.match(d):
            raise ApplicationError(
                f"cache[{i}] must be a digest 'sha256:<64 hex digits>'", field=f"cache[{i}]"
            )
    return list(dict.fromkeys(digests))


def worker_register(
    *, worker: PoolWorker, cores: int | None, cache: list[str] | None = None
) -> dict[str, Any]:
    """The pilot is up: a booting worker becomes idle (a repeat is fine); the pool's boot
    failures start afresh. `cache`: the image and layer digests its cache holds."""
    now = timezone.now()
    held = worker_cache(cache)
    booted = PoolWorker.objects.filter(pk=worker.pk, state=WorkerState.BOOTING).update(
        state=WorkerState.IDLE, registered_at=now, heartbeat_at=now, idle_since=now
    )
    if booted:
        Pool.objects.filter(pk=worker.pool_id).update(boot_failures=0, next_boot_at=None)
        log.info("pool %s: worker %s registered (%s cores)", worker.pool.name, worker.pk, cores)
    elif worker.state not in REGISTERED_STATES:
        raise WorkerGone(worker.state)
    if held is not None:
        PoolWorker.objects.filter(pk=worker.pk).update(cache=held)
    return _answer(
        heartbeat_interval=settings.WINDTUNNEL["HEARTBEAT_INTERVAL"], poll_interval=POLL_INTERVAL
    )


def worker_lease(*, worker: PoolWorker, free_cores: int) -> dict[str, Any]:
    """The admitted runs of the worker's pool that its placement policy gives this worker
    (within `free_cores`), claimed for it: their run specs (each with its attempt and
    token), oldest admitted first, and the digests of their images (its cache will hold
    them)."""
    with transaction.atomic():
        row = (
            PoolWorker.objects.select_for_update()
            .select_related("pool", "pool__image")
            .get(pk=worker.pk)
        )
        if row.state == WorkerState.DRAINING or row.pool.draining:
            return _answer(runs=[], stop=not _held(row))
        if row.state not in (WorkerState.IDLE, WorkerState.BUSY):
            raise WorkerGone(row.state)
        now = timezone.now()
        chosen = _placed(row, free_cores, now)
        runs: list[Run] = []
        if chosen:
            runs, tokens = runs_claim(run_ids=chosen)
            stored = runs_record_handles(
                rows=[(str(r.pk), r.attempt, row.handle, "") for r in runs]
            )
            runs = [r for r in runs if str(r.pk) in stored]
        taken = sum(r.processes for r in runs)
        PoolWorker.objects.filter(pk=row.pk).update(
            heartbeat_at=now, asked_at=now, free_cores=max(0, free_cores - taken)
        )
        if not runs:
            return _answer(runs=[])
        Run.objects.filter(pk__in=[r.pk for r in runs]).update(wait_reason="", wait_detail="")
        PoolWorker.objects.filter(pk=row.pk).update(state=WorkerState.BUSY, idle_since=None)
    specs = []
    for run in runs:
        try:
            spec = run_spec(run=run, study=run.study, token=tokens[run.pk])
        except casecheck.CaseCheckError as exc:
            run_case_refused(run=run, error=exc)
            continue
        specs.append(json.loads(spec.to_json(sandbox="uid")))
        log.info(
            "pool %s: run %s attempt %s leased by %s", row.pool.name, run.pk, run.attempt, row.pk
        )
    return _answer(runs=specs, cache=list(image_digests(image=row.pool.image)))


def _placed(asker: PoolWorker, free_cores: int, now: Any) -> list[Any]:
    """Ids of the pool's admitted runs (the oldest LEASE_BATCH * 4) that its placement
    policy gives `asker`, which has `free_cores` free: at most LEASE_BATCH."""
    pool = asker.pool
    waiting = Run.objects.filter(backend_id=pool.backend_id, state=RunState.ADMITTED).order_by(
        "admitted_at", "queued_at", "index"
    )[: LEASE_BATCH * 4]
    shapes = [s for s in run_shapes(waiting) if pool_of(s, [pool]) is pool]
    if not shapes:
        return []
    digest, layers = pool.image.digest, image_layers(image=pool.image)
    queue = [
        RunView(id=str(s.id), processes=s.processes, image_digest=digest, layer_digests=layers)
        for s in shapes
    ]
    fresh = now - timedelta(seconds=settings.POOL_PLACEMENT_HOLD)
    views = []
    for wid, cores, free, asked_at, cache in pool.workers.filter(
        state__in=(WorkerState.IDLE, WorkerState.BUSY)
    ).values_list("id", "cores", "free_cores", "asked_at", "cache"):
        if wid == asker.pk:
            free = free_cores
        elif asked_at is None or asked_at < fresh:
            free = 0  # full or silent since the hold: it takes nothing now
        free = max(0, min(free, cores))
        views.append(
            WorkerView(
                id=str(wid),
                free_cores=free,
                total_cores=cores,
                load=(cores - free) / cores if cores else 1.0,
                cached=frozenset(cache or ()),
            )
        )
    policy = policy_named(pool.placement, threshold=settings.POOL_PLACEMENT_THRESHOLD)
    state = PlacementState(
        cursor=pool.placement_cursor, rng=random.Random(f"{pool.pk}:{queue[0].id}")
    )
    taken = lease(str(asker.pk), queue, Fleet(views), policy, state, limit=LEASE_BATCH)
    if taken and state.cursor != pool.placement_cursor:
        Pool.objects.filter(pk=pool.pk).update(placement_cursor=state.cursor)
    by_id = {str(s.id): s.id for s in shapes}
    return [by_id[x] for x in taken]


def _held(worker: PoolWorker) -> list[tuple[str, int]]:
    """The attempts the portal counts as this worker's."""
    return [
        (str(pk), attempt)
        for pk, attempt in Run.objects.filter(
            handle=worker.handle, state__in=STARTED_STATES
        ).values_list("id", "attempt")
    ]


def worker_heartbeat(
    *, worker: PoolWorker, runs: list[tuple[str, int]], cache: list[str] | None = None
) -> dict[str, Any]:
    """A sign of life, and what the pilot holds (the attempts; `cache`: the image and layer
    digests its cache holds): the answer names the attempts it must stop (cancelled, ended,
    no longer its own) and whether to stop (draining and empty)."""
    now = timezone.now()
    held_cache = worker_cache(cache)
    changes: dict[str, Any] = {"heartbeat_at": now}
    if held_cache is not None:
        changes["cache"] = held_cache
    alive = PoolWorker.objects.filter(pk=worker.pk, state__in=REGISTERED_STATES).update(**changes)
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
