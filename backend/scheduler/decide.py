"""One admission pass's decisions, pure: given what is in use and the tenant's queue in its
policy's order, which runs start, which wait and why, and which other tenants' runs the
capacity is held for.

`scheduler.admission.admit` reads the inputs from PostgreSQL under its locks and writes the
outcome; the simulator (bench/sim) models them and calls the same function, so what it
measures is this code, not a copy.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, NamedTuple, Protocol

from compute.capacity import BackendCapacity
from quotas.fit import (
    NOTHING,
    Shape,
    Usage,
    backend_problem,
    cloud_problem,
    quota_problem,
    run_fit_problem,
)
from quotas.models import Quota
from scheduler.backfill import Fits, Held, Reservation, reserve
from scheduler.fairshare import Recent, Standing, standing
from scheduler.policies import AdmissionPolicy, Candidate
from studies.choices import WaitReason

WAIT_REASONS = {"quota": WaitReason.QUOTA, "backend": WaitReason.BACKEND, "cloud": WaitReason.CLOUD}
WAIT_PREFIXES = {
    "quota": "tenant quota",
    "backend": "backend capacity",
    "cloud": "cloud project limit",
}


class Waiting(NamedTuple):
    """Another tenant's run waiting for a backend's capacity."""

    tenant_id: int
    queued_at: Any
    shape: Shape


class HeldSource(Protocol):
    """The runs holding resources, as backfill plans with them (read lazily: only a run that
    does not fit under a backfill policy asks)."""

    def of_tenant(self) -> list[Held]: ...

    def of_backend(self, backend_id: int) -> list[Held]: ...

    def started(
        self, backend_id: int, need: Usage, wall_limit: float | None, now: datetime
    ) -> None: ...


class HeldList:
    """A HeldSource over rows already read: (tenant, backend, Held)."""

    def __init__(self, tenant_id: int, rows: Iterable[tuple[int, int, Held]]) -> None:
        self.tenant_id, self.rows = tenant_id, list(rows)

    def of_tenant(self) -> list[Held]:
        return [h for tenant, _, h in self.rows if tenant == self.tenant_id]

    def of_backend(self, backend_id: int) -> list[Held]:
        return [h for _, bid, h in self.rows if bid == backend_id]

    def started(
        self, backend_id: int, need: Usage, wall_limit: float | None, now: datetime
    ) -> None:
        ends = now + timedelta(seconds=wall_limit) if wall_limit is not None else None
        self.rows.append((self.tenant_id, backend_id, Held(holds=need, ends_at=ends)))


class FairShareView:
    """One fair_share backend as a pass sees it: what each tenant with work there holds and
    used recently, their weights, and the head of each other tenant's waiting runs."""

    def __init__(
        self,
        *,
        backend: BackendCapacity,
        holds: dict[int, Usage],
        recent: dict[int, Recent],
        weights: dict[int, float],
        heads: dict[int, Waiting],
    ) -> None:
        self.backend, self.holds, self.recent = backend, holds, recent
        self.weights, self.heads = weights, heads

    def standing(self, tenant_id: int) -> Standing:
        return standing(
            holds=self.holds.get(tenant_id, NOTHING),
            recent=self.recent.get(tenant_id, Recent()),
            backend=self.backend,
            weight=self.weights.get(tenant_id, 1.0),
            weights=sum(self.weights.values()),
        )

    def take(self, tenant_id: int, need: Usage) -> None:
        self.holds[tenant_id] = self.holds.get(tenant_id, NOTHING).plus_usage(need)


@dataclasses.dataclass(kw_only=True)
class PassState:
    """What a pass decides with. `usage` (the tenant's) and `backend_usage` (every tenant's,
    per backend) grow as the pass admits."""

    tenant_id: int
    tenant_name: str
    quota: Quota
    backends: dict[int, BackendCapacity]
    policies: dict[int, AdmissionPolicy]
    usage: Usage
    backend_usage: dict[int, Usage]
    images: Mapping[int, str]  # images not ready yet → why their runs wait
    reserved: dict[int, Waiting]  # fifo and priority backends: another tenant's oldest waiting
    fair: dict[int, FairShareView]  # fair_share backends
    held: HeldSource
    now: datetime


@dataclasses.dataclass(kw_only=True)
class PassDecision:
    admitted: list[Any]
    held_for: set[int]  # other tenants whose runs the capacity is held for: schedule them
    full_backends: dict[int, tuple[str, str]]  # backend → (wait reason, detail)
    quota_problem: str | None  # why runs over the tenant's quota wait


def admission_decide(state: PassState, queue: Iterable[Candidate]) -> PassDecision:
    """Walk the tenant's queue (its policy's order) and admit each run that fits, unless a run
    with a reserved start (backfill) or another tenant's waiting run needs what it would take.
    Stops early when nothing more can start."""
    s = state
    usage, backend_usage, now = s.usage, s.backend_usage, s.now
    held_for: set[int] = set()
    admitted: list[Any] = []
    full_backends: dict[int, tuple[str, str]] = {}
    quota_problem_text: str | None = None
    quota_blocked: Blocked | None = None  # a run over the quota, backfilled around
    backend_blocked: dict[int, Blocked] = {}  # per backend, a run that did not fit there
    for run in queue:
        if run.image_id in s.images:
            continue  # its image is still building: not admitted, holds nothing
        if run.retry_at is not None and run.retry_at > now:
            continue  # its backend could not take it a moment ago: it waits its turn
        bid = run.backend_id
        if bid in full_backends and bid not in backend_blocked:
            if len(full_backends) == len(s.backends) and not backend_blocked:
                break
            continue
        backend, policy = s.backends[bid], s.policies[bid]
        shape = Shape(cores=run.processes, memory_gb=run.memory_gb, nodes=run.nodes)
        need = NOTHING.plus(shape, holds_nodes=backend.holds_nodes)
        # a later run tried around a blocked one spends that one's budget
        for blocked in (quota_blocked, backend_blocked.get(bid)):
            if blocked is not None:
                blocked.budget -= 1
        if quota_blocked is not None and quota_blocked.budget < 0:
            break  # enough tried around the run over the quota: the rest wait behind it
        if bid in backend_blocked and backend_blocked[bid].budget < 0:
            del backend_blocked[bid]  # the backend's other runs wait behind its blocked one
            continue
        problem = run_fit_problem(
            shape=shape,
            quota=s.quota,
            backend=backend,
            usage=usage,
            backend_usage=backend_usage[bid],
        )
        if problem is not None:
            if problem.limit == "quota":
                if quota_blocked is not None:
                    continue  # behind the reserved run: it waits, as that one does
                quota_problem_text = str(problem)
                if policy.blocks(problem) or not policy.backfills or not _room(usage, s.quota):
                    break  # e.g. strict FIFO: later runs of the tenant wait behind this one
                quota_blocked = Blocked(
                    need=need, held=s.held.of_tenant, fits=quota_fits(s.quota), now=now
                )
                continue
            if bid not in full_backends:
                full_backends[bid] = (
                    WAIT_REASONS[problem.limit],
                    f"{WAIT_PREFIXES[problem.limit]}: {problem}",
                )
                if policy.backfills and _backend_room(backend_usage[bid], backend):
                    backend_blocked[bid] = Blocked(
                        need=need,
                        held=functools.partial(s.held.of_backend, bid),
                        fits=backend_fits(backend),
                        now=now,
                    )
            continue
        # it fits now: it may still have to leave room for a run with a reserved start
        if quota_blocked is not None:
            if not quota_blocked.admits(need=need, wall_limit=run.wall_limit, in_use=usage):
                if quota_blocked.reservation is None:
                    break  # the blocked run's start is unknown: nothing passes it
                continue
            if quota_problem_text and "reserved" not in quota_problem_text:
                quota_problem_text += f"; {quota_blocked.describe()}"
        if bid in backend_blocked:
            blocked = backend_blocked[bid]
            if not blocked.admits(need=need, wall_limit=run.wall_limit, in_use=backend_usage[bid]):
                if blocked.reservation is None:
                    del backend_blocked[bid]  # its start is unknown: the backend's runs wait
                continue
            reason, detail = full_backends[bid]
            if "reserved" not in detail:
                full_backends[bid] = (reason, f"{detail}; {blocked.describe()}")
        other = held_for_other(
            run=run,
            shape=shape,
            backend=backend,
            backend_usage=backend_usage[bid],
            older=s.reserved.get(bid),
            fair=s.fair.get(bid),
            tenant=(s.tenant_id, s.tenant_name),
        )
        if other is not None:
            held_for.add(other[0])
            if bid not in full_backends:
                full_backends[bid] = (WaitReason.BACKEND, other[1])
            continue
        for blocked in (quota_blocked, backend_blocked.get(bid)):
            if blocked is not None and blocked.reservation is not None:
                blocked.reservation.count(need=need, wall_limit=run.wall_limit, now=now)
        usage = usage.plus(shape, holds_nodes=backend.holds_nodes)
        backend_usage[bid] = backend_usage[bid].plus(shape, holds_nodes=backend.holds_nodes)
        if bid in s.fair:
            s.fair[bid].take(s.tenant_id, need)
        s.held.started(bid, need, run.wall_limit, now)
        admitted.append(run.run_id)
    # fair share: another tenant whose waiting run fits what this pass left free gets its
    # pass now (it may have been held for this tenant, which has stopped taking)
    for bid, view in s.fair.items():
        for other_id, head in view.heads.items():
            if backend_problem(shape=head.shape, backend=s.backends[bid], usage=backend_usage[bid]):
                continue
            held_for.add(other_id)
    s.usage = usage
    return PassDecision(
        admitted=admitted,
        held_for=held_for,
        full_backends=full_backends,
        quota_problem=quota_problem_text,
    )


# later runs a pass tries around one blocked run (Slurm's bf_max_job_test): past it, the
# rest of the queue waits behind the blocked run, so a pass costs what it may admit
BACKFILL_DEPTH = 200


class Blocked:
    """A run that did not fit, under a backfill policy. Its reservation is worked out when a
    later run first fits now (a pass that meets a full backend reads nothing more)."""

    def __init__(
        self, *, need: Usage, held: Callable[[], list[Held]], fits: Fits, now: datetime
    ) -> None:
        self.need, self._held, self.fits, self.now = need, held, fits, now
        self.reservation: Reservation | None = None
        self._tried = False
        self.budget = BACKFILL_DEPTH

    def admits(self, *, need: Usage, wall_limit: float | None, in_use: Usage) -> bool:
        """Whether a run that fits now may pass the blocked run (False, with no reservation:
        the blocked run's start depends on a run with no wall limit)."""
        if not self._tried:
            self._tried = True
            self.reservation = reserve(
                need=self.need, in_use=in_use, held=self._held(), fits=self.fits, now=self.now
            )
        if self.reservation is None:
            return False
        return self.reservation.admits(need=need, wall_limit=wall_limit, now=self.now)

    def describe(self) -> str:
        return self.reservation.describe(now=self.now) if self.reservation else ""


def _room(usage: Usage, quota: Quota) -> bool:
    """Whether the tenant's quota has room for any run at all now."""
    return usage.cores < quota.cores and usage.runs < quota.max_runs


def _backend_room(usage: Usage, backend: BackendCapacity) -> bool:
    """Whether the backend has room for any run at all now."""
    return usage.cores < backend.cores and usage.memory_gb < backend.memory_gb


def quota_fits(quota: Quota) -> Fits:
    """Backfill's check against the tenant's quota."""

    def fits(in_use: Usage, need: Usage) -> bool:
        shape = Shape(cores=need.cores, memory_gb=need.memory_gb, nodes=need.nodes)
        return quota_problem(shape=shape, quota=quota, usage=in_use, holds_nodes=True) is None

    return fits


def backend_fits(backend: BackendCapacity) -> Fits:
    """Backfill's check against a backend's capacity and its cloud project's limits."""

    def fits(in_use: Usage, need: Usage) -> bool:
        shape = Shape(cores=need.cores, memory_gb=need.memory_gb, nodes=max(need.nodes, 1))
        return (
            backend_problem(shape=shape, backend=backend, usage=in_use) is None
            and cloud_problem(shape=shape, backend=backend, usage=in_use) is None
        )

    return fits


def held_for_other(
    *,
    run: Candidate,
    shape: Shape,
    backend: BackendCapacity,
    backend_usage: Usage,
    older: Waiting | None,
    fair: FairShareView | None,
    tenant: tuple[int, str],
) -> tuple[int, str] | None:
    """Whether what this run would take is held for another tenant's waiting run: (that
    tenant, why) or None. fifo and priority: the oldest such run, if older than this one and
    the capacity cannot take both; fair_share: the run of the tenant furthest below its fair
    share, if further than this run's tenant (the same distance: the older run)."""
    if fair is not None:
        mine = fair.standing(tenant[0])
        ahead = []
        for other, head in fair.heads.items():
            theirs = fair.standing(other)
            if theirs.ratio < mine.ratio - 1e-9 or (
                abs(theirs.ratio - mine.ratio) <= 1e-9 and head.queued_at < run.queued_at
            ):
                ahead.append((theirs.ratio, head.queued_at, other))
        if not ahead:
            return None
        # progressive filling, one run at a time: the tenant furthest below its share goes
        # first, even where there would be room for both (its pass is scheduled next)
        first = fair.heads[min(ahead)[2]]
        return first.tenant_id, (
            f"backend capacity: {backend.name}: fair share: {mine.describe(tenant[1])}; "
            "what frees up goes first to a tenant further below its share"
        )
    if older is None or older.queued_at >= run.queued_at:
        return None
    # this run may only take what the older run of another tenant does not need
    if not backend_problem(
        shape=shape,
        backend=backend,
        usage=backend_usage.plus(older.shape, holds_nodes=backend.holds_nodes),
    ):
        return None
    return older.tenant_id, (
        f"backend capacity: {backend.name}: what frees up is held for an older "
        f"queued run ({older.shape.describe(holds_nodes=backend.holds_nodes)}); "
        "this run follows it"
    )
