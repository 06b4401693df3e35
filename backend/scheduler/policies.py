"""Admission policies: the order in which a tenant's queued runs are considered, what a run
that does not fit does to the runs behind it, and who gets capacity another tenant waits for.

A policy is a plain object behind one small interface, registered by name and chosen per
backend by an admin (Backend.admission_policy; blank: WINDTUNNEL_ADMISSION_POLICY):

- `fifo`: queued runs in submission order (queued at, study, index); a run that does not fit
  the tenant's quota stops admission (strict FIFO: later, smaller runs do not overtake it); a
  full backend only holds back its own runs; what frees up on a backend is held for the oldest
  waiting run of another tenant.
- `priority`: the tenant's high-priority studies first, then normal, then low (FIFO inside
  each), with backfill: a run that does not fit gets a reserved start (when enough running
  runs will have ended, from their studies' `max_wall_seconds`), and a later run may start
  ahead of it only if it ends before that start or fits beside it then (scheduler.backfill).
- `fair_share`: `priority` within a tenant; across tenants, what frees up on the backend is
  held for the tenant furthest below its fair share (dominant-resource fairness with weights
  and decayed usage, scheduler.fairshare) instead of the oldest run.

The decisions themselves are pure functions (scheduler.backfill, scheduler.fairshare,
quotas.fit) that the simulator (bench/sim) drives too. Adding one:
docs/development/adding-a-policy.md.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from catalog.models import Backend
from quotas.fit import Problem
from studies.choices import Priority, RunState, StudyState
from studies.models import Run, Study
from studies.policy import wall_seconds_sql


class Candidate(NamedTuple):
    """A queued run as admission reads it."""

    run_id: Any
    backend_id: int
    processes: int
    memory_gb: float
    nodes: int
    image_id: int | None
    queued_at: datetime
    retry_at: datetime | None
    priority: int = Priority.NORMAL
    wall_limit: float | None = None  # its study's max_wall_seconds: what backfill plans with
    study_id: int = 0
    run_index: int = 0


class AdmissionPolicy(Protocol):
    name: str
    by_priority: bool  # a tenant's queue is taken high priority first (else submission order)
    backfills: bool  # a run that does not fit reserves its start; later runs backfill around it
    fair_share: bool  # capacity other tenants wait for goes to the one below its fair share

    def queue(self, cur: Any, *, tenant_id: int, backend_ids: Sequence[int]) -> Iterator[Candidate]:
        """The tenant's queued runs on these backends in the order admission considers them
        (read lazily: admission usually stops early)."""
        ...

    def blocks(self, problem: Problem) -> bool:
        """Whether a run that does not fit stops admission of the runs behind it."""
        ...

    def order_key(self, run: Candidate) -> tuple[Any, ...]:
        """The key its queue is sorted by: queues of several policies merge on it."""
        ...


_COLUMNS = (
    "r.id, r.backend_id, r.processes, r.memory_gb, r.nodes, s.image_id, r.queued_at,"
    f" r.retry_at, r.priority, {wall_seconds_sql()}, r.study_id, r.index"
)
_FROM = (
    f" FROM {Run._meta.db_table} r JOIN {Study._meta.db_table} s ON s.id = r.study_id"
    f" JOIN {Backend._meta.db_table} b ON b.id = r.backend_id"
    " WHERE r.tenant_id = %s AND r.state = %s AND r.backend_id = ANY(%s)"
    # a cancelled study's queued runs are ended in the background: never admitted
    f" AND s.state <> '{StudyState.CANCELLED.value}'"
)
SCAN_BATCH = 500


def _scan(cur: Any, sql: str, args: list[Any]) -> Iterator[Candidate]:
    """SCAN_BATCH runs at a time, each batch one plain query (no server-side cursor and its
    three round trips): admission usually stops within the first."""
    start = 0
    while True:
        cur.execute(sql, [*args, SCAN_BATCH, start])
        batch = cur.fetchall()
        for row in batch:
            yield Candidate(*row)
        if len(batch) < SCAN_BATCH:
            return
        start += SCAN_BATCH


class Fifo:
    """First in, first out per tenant; a quota that is full stops the tenant's queue."""

    name = "fifo"
    by_priority = False
    backfills = False
    fair_share = False

    # index run_queue: read from its head, however many runs wait
    SQL = f"SELECT {_COLUMNS}{_FROM} ORDER BY r.queued_at, r.study_id, r.index LIMIT %s OFFSET %s"

    def queue(self, cur: Any, *, tenant_id: int, backend_ids: Sequence[int]) -> Iterator[Candidate]:
        return _scan(cur, self.SQL, [tenant_id, RunState.PENDING, list(backend_ids)])

    def blocks(self, problem: Problem) -> bool:
        return problem.limit == "quota"

    def order_key(self, run: Candidate) -> tuple[Any, ...]:
        return (-Priority.NORMAL, run.queued_at, run.study_id, run.run_index)


class ByPriority:
    """High-priority studies first, then normal, then low; FIFO inside each; backfill."""

    name = "priority"
    by_priority = True
    backfills = True
    fair_share = False

    # high and low from index run_queue_prioritised, normal from run_queue (skipping the
    # non-normal runs queued before: a cost only tenants that use priorities pay)
    # (the partial index's condition spelled out as constants: a generic plan for bound
    # values could not use it)
    SQL = {
        int(p): f"SELECT {_COLUMNS}{_FROM} AND r.state = '{RunState.PENDING.value}'"
        f" AND r.priority = {int(p)}"
        + (f" AND r.priority <> {int(Priority.NORMAL)}" if p != Priority.NORMAL else "")
        + " ORDER BY r.queued_at, r.study_id, r.index LIMIT %s OFFSET %s"
        for p in Priority
    }

    def queue(self, cur: Any, *, tenant_id: int, backend_ids: Sequence[int]) -> Iterator[Candidate]:
        for priority in (Priority.HIGH, Priority.NORMAL, Priority.LOW):
            yield from _scan(
                cur, self.SQL[int(priority)], [tenant_id, RunState.PENDING, list(backend_ids)]
            )

    def blocks(self, problem: Problem) -> bool:
        return False  # backfill decides what may pass a run that does not fit

    def order_key(self, run: Candidate) -> tuple[Any, ...]:
        return (-run.priority, run.queued_at, run.study_id, run.run_index)


class FairShare(ByPriority):
    """ByPriority within a tenant; across tenants, dominant-resource fair share."""

    name = "fair_share"
    fair_share = True


POLICIES: dict[str, AdmissionPolicy] = {p.name: p for p in (Fifo(), ByPriority(), FairShare())}


def policy_named(name: str) -> AdmissionPolicy:
    """The policy of a backend's `admission_policy` (blank: the portal's default)."""
    name = name or settings.WINDTUNNEL["ADMISSION_POLICY"]
    try:
        return POLICIES[name]
    except KeyError:
        raise ImproperlyConfigured(
            f"admission policy {name!r}: known policies are {', '.join(POLICIES)}"
        ) from None


def policy_in_use() -> AdmissionPolicy:
    """The portal's default policy (WINDTUNNEL_ADMISSION_POLICY)."""
    return policy_named("")


def queue_by_priority(*, policy: str) -> bool:
    """Whether the policy `policy` (a backend's admission_policy; blank: the default) takes a
    tenant's queued runs by priority first: what queue positions count by (core.hooks)."""
    return policy_named(policy).by_priority
