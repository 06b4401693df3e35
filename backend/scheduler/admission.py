"""Admission within quotas, never over-admitting under concurrency.

Admission takes the tenant's quota row FOR UPDATE, then the rows of the backends involved
(in id order, so concurrent schedulers never deadlock), derives usage from the runs that
hold resources, and admits queued runs in the policy's order (scheduler.policies) while they
fit (quotas.fit, the one capacity check). Runs left waiting are told why (scheduler.reasons).

Every run that ends calls this, so it is plain SQL, a statement per step (the ORM's query
building was most of a worker's CPU per run). Starting what was admitted is the caller's
(dispatch).
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterator
from typing import Any

from django.db import connection, transaction
from django.db.models import OuterRef, Subquery
from django.utils import timezone

from catalog.choices import ImageStatus
from catalog.images import image_wait_detail
from catalog.models import Backend, Image
from compute.capacity import BackendCapacity, capacity_of
from core import jobs
from core.jobs import Job
from core.metrics import ADMISSION_DURATION, RUNS_ADMITTED
from quotas.fit import Shape, Usage, budget_problem, storage_problem
from quotas.models import Quota
from scheduler.backfill import Held
from scheduler.decide import (
    FairShareView,
    HeldList,
    PassState,
    Waiting,
    admission_decide,
)
from scheduler.fairshare import Recent
from scheduler.policies import POLICIES, AdmissionPolicy, Candidate, policy_named
from scheduler.reasons import ACTIVE_STUDY_STATES, runs_hold, wait_reasons_write
from studies.choices import HOLDING_STATES, RunState, WaitReason
from studies.models import Run, Study
from studies.policy import wall_seconds_sql
from studies.transitions import runs_admit
from studies.usage import (
    budget_period_end,
    budget_period_start,
    core_hours_used,
    node_holding_kinds,
    storage_used_bytes,
)
from tenancy.models import Tenant


@ADMISSION_DURATION.time()  # every pass, also one that finds nothing to admit
def admit(*, tenant_id: int, publish: bool = True, seqs_over: int | None = None) -> list[Any]:
    """Admit the tenant's queued runs that fit; return their ids. Safe to run concurrently.

    A backend is shared by tenants: capacity that frees up is held for another tenant's
    waiting run (the oldest under fifo and priority, the one of the tenant furthest below
    its fair share under fair_share): a later run takes only what that run does not need.
    The tenants holding such a reservation are scheduled next.

    `publish`: the admitted runs' events go out after commit. `seqs_over` (without
    `publish`): when more runs than that are admitted, their event seqs are taken with the
    admission and the caller publishes them (studies.events.publish_runs_taken)."""
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute(_QUOTA_SQL, [tenant_id])
        row = cur.fetchone()
        if row is None or not row[4]:  # no quota, or the tenant deactivated: nothing starts
            return []
        quota = Quota(tenant_id=tenant_id, cores=row[0], memory_gb=row[1], max_runs=row[2])
        quota.max_nodes, quota.storage_gb = row[3], row[6]
        tenant_name = row[5]
        cur.execute(_PENDING_KEYS_SQL, [tenant_id, list(ACTIVE_STUDY_STATES)])
        keys = cur.fetchall()
        backend_ids = sorted({b for b, _ in keys})
        if not backend_ids:
            return []
        full = storage_problem(quota=quota, stored_bytes=storage_used_bytes(tenant_id=tenant_id))
        if full is not None:  # no room for the files of another run: every queued run waits
            runs_hold(cur, tenant_id=tenant_id, reason=WaitReason.STORAGE, detail=str(full))
            return []
        spent = _budget_spent(tenant_id=tenant_id, budget=row[7])
        if spent is not None:  # the month's core-hours are used: every queued run waits
            runs_hold(cur, tenant_id=tenant_id, reason=WaitReason.BUDGET, detail=spent)
            return []
        cur.execute(_BACKENDS_SQL, [backend_ids])  # locked in id order: no deadlocks
        rows = cur.fetchall()
        backends = {r[0]: capacity_of(_backend(r)) for r in rows}
        policies = {r[0]: policy_named(r[8]) for r in rows}
        usage, backend_usage = _usages(cur, tenant_id=tenant_id, backend_ids=list(backends))
        images = _images_not_ready(cur, {i for _, i in keys if i is not None})
        fair_ids = [b for b in backends if policies[b].fair_share]
        reserved = _reservations(
            cur, tenant_id=tenant_id, backends=[b for b in backends if b not in fair_ids]
        )
        fair = _fair_shares(
            cur,
            tenant_id=tenant_id,
            backends={r[0]: (backends[r[0]], float(r[9])) for r in rows if r[0] in fair_ids},
        )
        held = _HeldRuns(cur, tenant_id=tenant_id, backend_ids=list(backends))
        decision = admission_decide(
            PassState(
                tenant_id=tenant_id,
                tenant_name=tenant_name,
                quota=quota,
                backends=backends,
                policies=policies,
                usage=usage,
                backend_usage=backend_usage,
                images=images,
                reserved=reserved,
                fair=fair,
                held=held,
                now=timezone.now(),
            ),
            _queue(cur, tenant_id=tenant_id, policies=policies),
        )
        admitted, held_for = decision.admitted, decision.held_for
        quota_problem, full_backends = decision.quota_problem, decision.full_backends
        take_seqs = seqs_over is not None and len(admitted) > seqs_over
        runs_admit(run_ids=admitted, publish=publish, take_seqs=take_seqs)
        for other_tenant in sorted(held_for):  # their turn: the capacity may be theirs now
            jobs.enqueue(Job.SCHEDULE_TENANT, other_tenant)
    RUNS_ADMITTED.inc(len(admitted))
    # why the others wait, told once the quota row is let go: on a large queue that is an
    # UPDATE of every queued run, which a user's cancel (it takes the quota row) need not
    # wait for. Passes of one tenant write their reasons one at a time.
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(%s, %s)", [REASONS_LOCK, tenant_id])
        wait_reasons_write(
            cur,
            tenant_id=tenant_id,
            quota_problem=quota_problem,
            full_backends=full_backends,
            images=images,
        )
    return admitted


REASONS_LOCK = 0x5754  # the advisory lock class of a tenant's wait reasons (key 2: the tenant)


def tenants_with_queued_runs() -> list[int]:
    """Every active tenant with queued runs, the tenant with the oldest queued run first
    (first come, first served across tenants too). A deactivated tenant's runs wait."""
    oldest = (  # the head of each tenant's queue (index run_queue): one probe per tenant
        Run.objects.filter(tenant=OuterRef("pk"), state=RunState.PENDING)
        .order_by("queued_at")
        .values("queued_at")[:1]
    )
    return list(
        Tenant.objects.filter(is_active=True)
        .annotate(oldest=Subquery(oldest))
        .filter(oldest__isnull=False)
        .order_by("oldest", "pk")
        .values_list("pk", flat=True)
    )


# per backend, the oldest run of another active tenant waiting for it: a probe per backend
# and tenant into the index of waiting runs (run_waits_for_backend), never a scan of a queue.
# The index's condition is spelled out as constants: a plan for bound values could not use it
_RESERVED_SQL = f"""
SELECT DISTINCT ON (b.id) b.id, t.id, r.queued_at, r.processes, r.memory_gb, r.nodes
FROM unnest(%(backends)s::bigint[]) AS b(id)
CROSS JOIN {Tenant._meta.db_table} t
CROSS JOIN LATERAL (
    SELECT r.queued_at, r.study_id, r.index, r.processes, r.memory_gb, r.nodes
    FROM {Run._meta.db_table} r
    WHERE r.backend_id = b.id AND r.tenant_id = t.id
      AND r.state = '{RunState.PENDING.value}' AND r.wait_reason = '{WaitReason.BACKEND.value}'
    ORDER BY r.queued_at, r.study_id, r.index
    LIMIT 1
) r
WHERE t.is_active AND t.id <> %(tenant)s
ORDER BY b.id, r.queued_at, r.study_id, r.index
"""


def _reservations(cur: Any, *, tenant_id: int, backends: list[int]) -> dict[int, Waiting]:
    """Per backend, the oldest queued run of another tenant that waits for its capacity (its
    own tenant's quota lets it run): what frees up there is held for it."""
    if not backends:
        return {}
    cur.execute(_RESERVED_SQL, {"backends": backends, "tenant": tenant_id})
    out = {}
    for bid, other, queued_at, processes, memory_gb, nodes in cur.fetchall():
        out[bid] = Waiting(
            other, queued_at, Shape(cores=processes, memory_gb=memory_gb, nodes=nodes)
        )
    return out


def _budget_spent(*, tenant_id: int, budget: float | None) -> str | None:
    """Why nothing is admitted while the tenant's monthly core-hour budget is used up, or
    None (no budget: nothing is summed)."""
    if budget is None:
        return None
    now = timezone.now()
    since = budget_period_start(now=now)
    used = core_hours_used(tenant_id=tenant_id, since=since, until=now)
    return budget_problem(budget=budget, used=used, resets=budget_period_end(start=since))


_QUOTA_SQL = (
    "SELECT q.cores, q.memory_gb, q.max_runs, q.max_nodes, t.is_active, t.name, q.storage_gb,"
    " q.core_hours_budget"
    f" FROM {Quota._meta.db_table} q JOIN {Tenant._meta.db_table} t ON t.id = q.tenant_id"
    " WHERE q.tenant_id = %s FOR UPDATE OF q"
)
# the backends and images of the tenant's queued runs, from its active studies: a study's
# runs share its backend and image, and a queued run's study is submitted or running (a
# study ends only when none of its runs is queued or holding, studies.services): the cost
# is the tenant's active studies, however many runs wait
_PENDING_KEYS_SQL = (
    f"SELECT DISTINCT s.backend_id, s.image_id FROM {Study._meta.db_table} s"
    " WHERE s.tenant_id = %s AND s.state = ANY(%s)"
)
_BACKENDS_SQL = (
    "SELECT id, name, kind, cores, memory_gb, max_nodes, enabled, cloud_limits,"
    " admission_policy, fair_share_half_life"
    f" FROM {Backend._meta.db_table} WHERE id = ANY(%s) ORDER BY id FOR UPDATE"
)
_USAGE_SQL = f"""
SELECT r.backend_id,
       count(*) FILTER (WHERE r.tenant_id = %(tenant)s),
       coalesce(sum(r.processes) FILTER (WHERE r.tenant_id = %(tenant)s), 0),
       coalesce(sum(r.memory_gb) FILTER (WHERE r.tenant_id = %(tenant)s), 0),
       coalesce(sum(r.nodes) FILTER (WHERE r.tenant_id = %(tenant)s AND b.kind = ANY(%(kinds)s)), 0),
       count(*),
       coalesce(sum(r.processes), 0),
       coalesce(sum(r.memory_gb), 0),
       coalesce(sum(r.nodes) FILTER (WHERE b.kind = ANY(%(kinds)s)), 0)
FROM {Run._meta.db_table} r JOIN {Backend._meta.db_table} b ON b.id = r.backend_id
WHERE r.state = ANY(%(holding)s) AND r.released_at IS NULL
  AND (r.tenant_id = %(tenant)s OR r.backend_id = ANY(%(backends)s))
GROUP BY r.backend_id
"""


def _backend(row: tuple[Any, ...]) -> Backend:
    """A locked backend row as a Backend (unsaved: what admission reads of it)."""
    backend_id, name, kind, cores, memory_gb, max_nodes, enabled, limits = row[:8]
    if isinstance(limits, str):  # Django reads jsonb as text
        limits = json.loads(limits)
    backend = Backend(name=name, kind=kind, cores=cores, memory_gb=memory_gb)
    backend.id, backend.max_nodes, backend.enabled = backend_id, max_nodes, enabled
    backend.cloud_limits = limits
    return backend


def _usages(cur: Any, *, tenant_id: int, backend_ids: list[int]) -> tuple[Usage, dict[int, Usage]]:
    """What the tenant's runs hold, and what every tenant's runs hold on each backend, in one
    query: studies.usage.usage_for_tenant and usage_for_backend, together."""
    cur.execute(
        _USAGE_SQL,
        {
            "tenant": tenant_id,
            "backends": backend_ids,
            "kinds": node_holding_kinds(),
            "holding": [str(s) for s in HOLDING_STATES],
        },
    )
    tenant = Usage()
    backends = {bid: Usage() for bid in backend_ids}
    for bid, runs, cores, memory, nodes, all_runs, all_cores, all_memory, all_nodes in cur:
        tenant = Usage(
            cores=tenant.cores + cores,
            memory_gb=tenant.memory_gb + float(memory),
            nodes=tenant.nodes + nodes,
            runs=tenant.runs + runs,
        )
        if bid in backends:
            backends[bid] = Usage(
                cores=all_cores, memory_gb=float(all_memory), nodes=all_nodes, runs=all_runs
            )
    return tenant, backends


def _images_not_ready(cur: Any, image_ids: set[int]) -> dict[int, str]:
    """Images of the pending runs' studies that are not ready yet → why the runs wait."""
    if not image_ids:
        return {}
    cur.execute(
        f"SELECT id, name, digest, status, progress FROM {Image._meta.db_table}"
        " WHERE id = ANY(%s) AND status <> %s",
        [list(image_ids), ImageStatus.READY],
    )
    columns = ("id", "name", "digest", "status", "progress")
    return {row[0]: image_wait_detail(dict(zip(columns, row, strict=True))) for row in cur}


def _queue(
    cur: Any, *, tenant_id: int, policies: dict[int, AdmissionPolicy]
) -> Iterator[Candidate]:
    """The tenant's queued runs in admission's order: one queue per policy in use on its
    backends, merged on the policies' common order key (priority, then queued at, study,
    index; under fifo every run counts as normal)."""
    groups: dict[str, list[int]] = {}
    for bid, policy in policies.items():
        groups.setdefault(policy.name, []).append(bid)
    if len(groups) == 1:
        ((name, ids),) = groups.items()
        yield from POLICIES[name].queue(cur, tenant_id=tenant_id, backend_ids=ids)
        return
    # each queue is read lazily on its own cursor (they interleave)
    streams = []
    for name, ids in sorted(groups.items()):
        policy = POLICIES[name]
        stream_cur = connection.cursor()
        streams.append(
            (policy.order_key(c), c)
            for c in policy.queue(stream_cur, tenant_id=tenant_id, backend_ids=ids)
        )
    for _, candidate in heapq.merge(*streams, key=lambda pair: pair[0]):
        yield candidate


# what holds resources, with its expected end (start + its wall-time limit, its study's or
# its backend's: studies.policy; NULL: no limit): read once per pass, and only when a run does not fit under a backfill policy
_HELD_SQL = f"""
SELECT r.tenant_id, r.backend_id, r.processes, r.memory_gb,
       CASE WHEN b.kind = ANY(%(kinds)s) THEN r.nodes ELSE 0 END,
       COALESCE(r.started_at, r.admitted_at, now())
         + make_interval(secs => {wall_seconds_sql()})
FROM {Run._meta.db_table} r
JOIN {Study._meta.db_table} s ON s.id = r.study_id
JOIN {Backend._meta.db_table} b ON b.id = r.backend_id
WHERE r.state = ANY(%(holding)s) AND r.released_at IS NULL
  AND (r.tenant_id = %(tenant)s OR r.backend_id = ANY(%(backends)s))
"""


class _HeldRuns(HeldList):
    """The runs holding resources that backfill plans with (the tenant's and its backends'),
    read on first use."""

    def __init__(self, cur: Any, *, tenant_id: int, backend_ids: list[int]) -> None:
        super().__init__(tenant_id, [])
        self._cur, self._backends, self._loaded = cur, backend_ids, False

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        self._cur.execute(
            _HELD_SQL,
            {
                "kinds": node_holding_kinds(),
                "holding": [str(s) for s in HOLDING_STATES],
                "tenant": self.tenant_id,
                "backends": self._backends,
            },
        )
        rows = [
            (
                tenant,
                bid,
                Held(
                    holds=Usage(cores=cores, memory_gb=float(memory), nodes=nodes, runs=1),
                    ends_at=ends_at,
                ),
            )
            for tenant, bid, cores, memory, nodes, ends_at in self._cur.fetchall()
        ]
        self.rows = rows + self.rows  # and the runs this pass admitted before the read

    def of_tenant(self) -> list[Held]:
        self._load()
        return super().of_tenant()

    def of_backend(self, backend_id: int) -> list[Held]:
        self._load()
        return super().of_backend(backend_id)


_FAIR_HOLDS_SQL = f"""
SELECT r.tenant_id, count(*), coalesce(sum(r.processes), 0), coalesce(sum(r.memory_gb), 0),
       coalesce(sum(r.nodes), 0)
FROM {Run._meta.db_table} r
WHERE r.backend_id = %(backend)s AND r.state = ANY(%(holding)s) AND r.released_at IS NULL
GROUP BY r.tenant_id
"""
# the decayed average (scheduler.fairshare.decay_factor, in SQL): each run's resources times
# 2^(-age at its end / H) - 2^(-age at its start / H), over the runs started in the last 10
# half-lives (older ones weigh under 0.1 %), from index run_started
_FAIR_RECENT_SQL = f"""
SELECT r.tenant_id,
       sum(r.processes * f.w), sum(r.memory_gb * f.w), sum(r.nodes * f.w)
FROM {Run._meta.db_table} r
CROSS JOIN LATERAL (SELECT
    power(2.0, -greatest(extract(epoch FROM now() - coalesce(r.released_at, r.finished_at, now())), 0) / %(half)s)
  - power(2.0, -greatest(extract(epoch FROM now() - r.started_at), 0) / %(half)s) AS w) f
WHERE r.started_at IS NOT NULL AND r.started_at > now() - make_interval(secs => %(window)s)
  AND r.backend_id = %(backend)s
GROUP BY r.tenant_id
"""
_FAIR_WEIGHTS_SQL = (
    f"SELECT tenant_id, share_weight FROM {Quota._meta.db_table} WHERE tenant_id = ANY(%s)"
)
_FAIR_HEADS_SQL = _RESERVED_SQL.replace("SELECT DISTINCT ON (b.id)", "SELECT")


def _fair_shares(
    cur: Any, *, tenant_id: int, backends: dict[int, tuple[BackendCapacity, float]]
) -> dict[int, FairShareView]:
    """What fair share decides with on each fair_share backend (a few small aggregates)."""
    if not backends:
        return {}
    holding = [str(s) for s in HOLDING_STATES]
    cur.execute(_FAIR_HEADS_SQL, {"backends": list(backends), "tenant": tenant_id})
    heads: dict[int, dict[int, Waiting]] = {b: {} for b in backends}
    for bid, other, queued_at, processes, memory_gb, nodes in cur.fetchall():
        heads[bid][other] = Waiting(
            other, queued_at, Shape(cores=processes, memory_gb=memory_gb, nodes=nodes)
        )
    out = {}
    for bid, (capacity, half_life) in backends.items():
        cur.execute(_FAIR_HOLDS_SQL, {"backend": bid, "holding": holding})
        holds = {
            t: Usage(cores=c, memory_gb=float(m), nodes=n if capacity.holds_nodes else 0, runs=k)
            for t, k, c, m, n in cur.fetchall()
        }
        recent: dict[int, Recent] = {}
        if half_life > 0:
            cur.execute(
                _FAIR_RECENT_SQL, {"backend": bid, "half": half_life, "window": 10 * half_life}
            )
            recent = {
                t: Recent(cores=float(c or 0), memory_gb=float(m or 0), nodes=float(n or 0))
                for t, c, m, n in cur.fetchall()
            }
        tenants = {tenant_id, *holds, *heads[bid]}
        cur.execute(_FAIR_WEIGHTS_SQL, [sorted(tenants)])
        weights = {t: 1.0 for t in tenants} | {t: float(w) for t, w in cur.fetchall()}
        out[bid] = FairShareView(
            backend=capacity, holds=holds, recent=recent, weights=weights, heads=heads[bid]
        )
    return out
