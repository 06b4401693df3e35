"""The simulator's model and event loop (see bench.sim). Django must be set up first (the
decisions are the backend's functions; the model touches no database)."""

from __future__ import annotations

import heapq
import itertools
import math
import random
import statistics
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from bench.sim.scenario import BACKEND_ID, EPOCH, Image, Result, Run, Scenario, Worker, jain
from compute.capacity import BackendCapacity
from dispatch.autoscale import scale_down_plan, scale_up_plan
from orchestration.planning.placement import (
    Fleet,
    PlacementState,
    RunView,
    WorkerView,
    policy_named,
)
from quotas.fit import NOTHING, Shape, Usage
from quotas.models import Quota
from scheduler.backfill import Held
from scheduler.decide import FairShareView, PassState, Waiting, admission_decide
from scheduler.fairshare import Recent, decay_factor
from scheduler.policies import POLICIES, Candidate


class Simulation:
    """One scenario on the virtual clock."""

    def __init__(self, scenario: Scenario, name: str = "") -> None:
        self.sc, self.name = scenario, name
        self.rng = random.Random(scenario.seed)
        self.now = 0.0
        self._events: list[tuple[float, int, str, Any]] = []
        self._seq = itertools.count()
        self.tenant_ids = {t: i + 1 for i, t in enumerate(scenario.tenants)}
        self.queues: dict[str, list[Run]] = {t: [] for t in scenario.tenants}
        self.heads: dict[str, int] = {t: 0 for t in scenario.tenants}  # queue read position
        self.holds: dict[str, Usage] = {t: NOTHING for t in scenario.tenants}
        # fair share's recent use of ended runs: (decayed cores, as of)
        self.recent: dict[str, tuple[float, float]] = {t: (0.0, 0.0) for t in scenario.tenants}
        self.admitted: list[Run] = []  # admitted, waiting for a worker
        self.running: dict[str, Run] = {}
        self.runs: list[Run] = []
        self.by_id: dict[str, Run] = {}
        self.workers: dict[str, Worker] = {}
        self.fleet = Fleet()
        # kept as workers change: the deciding code's inputs without a walk over the fleet
        self.live_cores = 0  # cores of the workers booted and not yet ended
        self.fleet_free = 0  # free cores of the ready workers (the fleet's)
        self._recent_memo: dict[tuple[str, float], float] = {}
        self.placement = policy_named(scenario.placement)
        self.place_state = PlacementState(rng=random.Random(scenario.seed))
        self.policy = POLICIES[scenario.admission]
        self.quota = Quota(cores=scenario.quota_cores, memory_gb=1e12, max_runs=10**9)
        self.quota.max_nodes = 10**9
        self.decisions = 0
        self.cpu = 0.0
        self.saturated: dict[str, float] = {t: 0.0 for t in scenario.tenants}
        self._last_share_at = 0.0
        self._worker_ids = itertools.count(1)
        for i, study in enumerate(scenario.studies):
            self._push(study.submit_at, "submit", i)
        if not scenario.autoscale:
            for _ in range(scenario.workers):
                self._boot(ready_now=True)
        else:
            for _ in range(scenario.min_workers):
                self._boot(ready_now=True)
            self._push(0.0, "autoscale", None)

    # --- the clock ------------------------------------------------------------------------

    def _push(self, at: float, kind: str, payload: Any) -> None:
        heapq.heappush(self._events, (at, next(self._seq), kind, payload))

    def run(self) -> Result:
        while self._events:
            at, _, kind, payload = heapq.heappop(self._events)
            if self.sc.until_s is not None and at > self.sc.until_s:
                break
            self._account(at)
            self.now = at
            changed = self._handle(kind, payload)
            # everything at this instant first, then one round of decisions
            while self._events and self._events[0][0] == at:
                _, _, kind, payload = heapq.heappop(self._events)
                changed |= self._handle(kind, payload)
            if changed:
                self._decide()
            if kind == "autoscale" and self._work_left():
                self._push(at + self.sc.autoscale_every_s, "autoscale", None)
        return self._result()

    def _work_left(self) -> bool:
        """Runs to come or to end, or (autoscaled) workers above min still to scale down."""
        live = sum(1 for w in self.workers.values() if w.ended_at is None)
        return (
            any(r.end_at is None or r.end_at > self.now for r in self.runs)
            or any(s.submit_at > self.now for s in self.sc.studies)
            or (self.sc.autoscale and live > self.sc.min_workers)
        )

    def _handle(self, kind: str, payload: Any) -> bool:
        if kind == "submit":
            self._submit(payload)
        elif kind == "end":
            self._end(self.by_id[payload])
        elif kind == "ready":
            self.workers[payload].idle_since = self.now
            self._put(self.workers[payload])
        elif kind == "autoscale":
            self._autoscale()
        return True

    # --- what the machines do ---------------------------------------------------------------

    def _submit(self, index: int) -> None:
        study = self.sc.studies[index]
        image = self.sc.images[study.image]
        for i in range(study.runs):
            duration = study.duration_s * (
                math.exp(self.rng.gauss(0, study.spread)) if study.spread else 1.0
            )
            run = Run(
                id=f"r{len(self.runs)}",
                tenant=study.tenant,
                study=index,
                index=i,
                processes=study.processes,
                image=image,
                duration=duration,
                submit_at=self.now,
                priority=study.priority,
                wall_limit=study.wall_limit,
            )
            self.runs.append(run)
            self.by_id[run.id] = run
            self.queues[study.tenant].append(run)
        key = self._order_key
        # the policy's order (queued at, then study and index; priority where it counts)
        q = self.queues[study.tenant]
        head = self.heads[study.tenant]
        q[head:] = sorted(q[head:], key=key)

    def _order_key(self, run: Run) -> tuple[Any, ...]:
        return self.policy.order_key(self._candidate(run))

    def _boot(self, *, ready_now: bool = False) -> Worker:
        wid = f"w{next(self._worker_ids):05d}"
        ready = self.now if ready_now else self.now + self.sc.boot_s
        worker = Worker(
            id=wid,
            cores=self.sc.worker_cores,
            booted_at=self.now,
            ready_at=ready,
            free=self.sc.worker_cores,
            link_free_at=ready,
        )
        self.workers[wid] = worker
        self.live_cores += worker.cores
        if ready_now:
            worker.idle_since = self.now
            self._put(worker)
        else:
            self._push(ready, "ready", wid)
        return worker

    def _put(self, w: Worker) -> None:
        """The fleet learns the worker's state (new, or its room and cache changed)."""
        old = self.fleet[w.id].free_cores if w.id in self.fleet else 0
        view = self._view(w)
        self.fleet.put(view)
        self.fleet_free += view.free_cores - old

    def _drop(self, wid: str) -> None:
        if wid in self.fleet:
            self.fleet_free -= self.fleet[wid].free_cores
            self.fleet.remove(wid)

    def _view(self, w: Worker) -> WorkerView:
        cached = set(w.cache)
        for image in self.sc.images:
            if all(d in w.cache for d, _ in image.layers):
                cached.add(image.digest)
        busy = w.cores - w.free
        return WorkerView(
            id=w.id,
            free_cores=w.free,
            total_cores=w.cores,
            load=busy / w.cores,
            cached=frozenset(cached),
        )

    def _pull(self, w: Worker, image: Image) -> float:
        """When the image is on the worker: its missing layers come over the link one after
        another; the cache drops the least recently used layers past its size."""
        ready = self.now
        for layer, size in image.layers:
            if layer in w.cache:
                w.cache.move_to_end(layer)
                ready = max(ready, w.layer_ready.get(layer, self.now))
                continue
            start = max(self.now, w.link_free_at)
            done = start + size * 8 / self.sc.link_gbps
            w.link_free_at = done
            w.cache[layer] = size
            w.layer_ready[layer] = done
            ready = max(ready, done)
        while sum(w.cache.values()) > self.sc.cache_gb and len(w.cache) > 1:
            old, _ = w.cache.popitem(last=False)
            w.layer_ready.pop(old, None)
        return ready

    def _start(self, run: Run, wid: str) -> None:
        w = self.workers[wid]
        w.free -= run.processes
        w.idle_since = None
        run.worker = wid
        run.start_at = self._pull(w, run.image)
        run.end_at = run.start_at + run.duration
        self.running[run.id] = run
        self._push(run.end_at, "end", run.id)
        self._put(w)

    def _end(self, run: Run) -> None:
        self.running.pop(run.id, None)
        w = self.workers[run.worker or ""]
        w.free += run.processes
        if w.free == w.cores:
            w.idle_since = self.now
        self._put(w)
        self.holds[run.tenant] = self.holds[run.tenant].minus(
            Usage(cores=run.processes, memory_gb=0.0, runs=1)
        )
        self._remember(run)

    def _remember(self, run: Run) -> None:
        """An ended run's part of its tenant's recent use (scheduler.fairshare.decay_factor):
        the sum so far decayed to now, plus the run's cores times its weight."""
        h = self.sc.half_life_s
        if h <= 0:
            return
        value, as_of = self.recent[run.tenant]
        start = run.start_at if run.start_at is not None else self.now
        self.recent[run.tenant] = (
            value * 2.0 ** (-(self.now - as_of) / h)
            + run.processes * decay_factor(start_age=self.now - start, end_age=0.0, half_life=h),
            self.now,
        )

    def _recent(self, tenant: str) -> float:
        """The tenant's recent use now: ended runs' (decayed) and running runs' so far;
        worked out once an instant (no run starts or ends while the instant's passes run)."""
        key = (tenant, self.now)
        if key not in self._recent_memo:
            self._recent_memo = {k: v for k, v in self._recent_memo.items() if k[1] == self.now}
            self._recent_memo[key] = self._recent_now(tenant)
        return self._recent_memo[key]

    def _recent_now(self, tenant: str) -> float:
        h = self.sc.half_life_s
        if h <= 0:
            return 0.0
        value, as_of = self.recent[tenant]
        value *= 2.0 ** (-(self.now - as_of) / h)
        for r in self.running.values():
            if r.tenant == tenant and r.start_at is not None and r.start_at < self.now:
                value += r.processes * decay_factor(
                    start_age=self.now - r.start_at, end_age=0.0, half_life=h
                )
        return value

    def _account(self, until: float) -> None:
        """Core-seconds each tenant holds while every tenant has work waiting (fairness is
        measured over that window only)."""
        span = until - self._last_share_at
        self._last_share_at = until
        if span <= 0 or not all(self._waiting(t) for t in self.sc.tenants):
            return
        for t in self.sc.tenants:
            self.saturated[t] += self.holds[t].cores * span

    def _waiting(self, tenant: str) -> bool:
        return self.heads[tenant] < len(self.queues[tenant])

    # --- the decisions: the portal's own functions ----------------------------------------

    def _capacity(self) -> BackendCapacity:
        cores = self.sc.workers * self.sc.worker_cores
        if not self.sc.autoscale:
            cores = self.live_cores
        return BackendCapacity(name="pool", kind="noop", cores=cores, memory_gb=1e12, max_nodes=1)

    def _candidate(self, run: Run) -> Candidate:
        if run.candidate is None:
            run.candidate = self._make_candidate(run)
        return run.candidate

    def _make_candidate(self, run: Run) -> Candidate:
        return Candidate(
            run_id=run.id,
            backend_id=BACKEND_ID,
            processes=run.processes,
            memory_gb=0.0,
            nodes=1,
            image_id=None,
            queued_at=EPOCH + timedelta(seconds=run.submit_at),
            retry_at=None,
            priority=run.priority,
            wall_limit=run.wall_limit,
            study_id=run.study,
            run_index=run.index,
        )

    def _queue(self, tenant: str) -> Iterator[Candidate]:
        q = self.queues[tenant]
        for i in range(self.heads[tenant], len(q)):
            if q[i].admitted_at is None:
                yield self._candidate(q[i])

    def _decide(self) -> None:
        t0 = time.process_time()
        self._admit()
        self._place()
        self.cpu += time.process_time() - t0

    def _admit(self) -> None:
        capacity = self._capacity()
        now = EPOCH + timedelta(seconds=self.now)
        backend_usage = NOTHING
        for u in self.holds.values():
            backend_usage = backend_usage.plus_usage(u)
        order = sorted(
            (t for t in self.sc.tenants if self._waiting(t)),
            key=lambda t: (self.queues[t][self.heads[t]].submit_at, self.tenant_ids[t]),
        )
        names = {v: k for k, v in self.tenant_ids.items()}
        # the tenants a pass held capacity for are scheduled next, as the portal enqueues
        # their passes; until a round admits nothing
        todo, progress = list(order), True
        while todo and progress:
            progress = False
            again: list[str] = []
            for tenant in todo:
                if not self._waiting(tenant):
                    continue
                state = PassState(
                    tenant_id=self.tenant_ids[tenant],
                    tenant_name=tenant,
                    quota=self.quota,
                    backends={BACKEND_ID: capacity},
                    policies={BACKEND_ID: self.policy},
                    usage=self.holds[tenant],
                    backend_usage={BACKEND_ID: backend_usage},
                    images={},
                    reserved=self._oldest_other(tenant),
                    fair=self._fair(tenant, capacity),
                    held=_Held(self, tenant),
                    now=now,
                )
                decision = admission_decide(state, self._queue(tenant))
                for rid in decision.admitted:
                    run = self.by_id[rid]
                    run.admitted_at = self.now
                    self.admitted.append(run)
                    need = Usage(cores=run.processes, memory_gb=0.0, runs=1)
                    self.holds[tenant] = self.holds[tenant].plus_usage(need)
                    backend_usage = backend_usage.plus_usage(need)
                self.decisions += len(decision.admitted)
                progress |= bool(decision.admitted)
                q = self.queues[tenant]
                while self.heads[tenant] < len(q) and q[self.heads[tenant]].admitted_at is not None:
                    self.heads[tenant] += 1
                again += [names[t] for t in decision.held_for if names[t] not in again]
            todo = again

    def _oldest_other(self, tenant: str) -> dict[int, Waiting]:
        if self.policy.fair_share:
            return {}
        heads = [
            self.queues[t][self.heads[t]]
            for t in self.sc.tenants
            if t != tenant and self._waiting(t)
        ]
        if not heads:
            return {}
        r = min(heads, key=lambda r: r.submit_at)
        return {BACKEND_ID: self._waiting_of(r)}

    def _waiting_of(self, r: Run) -> Waiting:
        if r.waiting is None:
            r.waiting = self._make_waiting(r)
        return r.waiting

    def _make_waiting(self, r: Run) -> Waiting:
        return Waiting(
            self.tenant_ids[r.tenant],
            EPOCH + timedelta(seconds=r.submit_at),
            Shape(cores=r.processes, memory_gb=0.0, nodes=1),
        )

    def _fair(self, tenant: str, capacity: BackendCapacity) -> dict[int, FairShareView]:
        if not self.policy.fair_share:
            return {}
        active = [t for t in self.sc.tenants if self._waiting(t) or self.holds[t].runs]
        return {
            BACKEND_ID: FairShareView(
                backend=capacity,
                holds={self.tenant_ids[t]: self.holds[t] for t in active},
                recent={self.tenant_ids[t]: Recent(cores=self._recent(t)) for t in active},
                weights={self.tenant_ids[t]: self.sc.tenants[t] for t in {*active, tenant}},
                heads={
                    self.tenant_ids[t]: self._waiting_of(self.queues[t][self.heads[t]])
                    for t in active
                    if t != tenant and self._waiting(t)
                },
            )
        }

    def _place(self) -> None:
        if not self.admitted:
            return
        views = [
            RunView(
                id=r.id,
                processes=r.processes,
                image_digest=r.image.digest,
                layer_digests=tuple(d for d, _ in r.image.layers),
            )
            for r in self.admitted
        ]
        placed: set[str] = set()
        for view in views:
            if self.fleet_free <= 0:
                break  # no worker has a free core: the rest wait
            wid = self.placement.place(view, self.fleet, self.place_state)
            if wid is None:
                continue
            self._start(self.by_id[view.id], wid)  # the fleet learns its new room
            placed.add(view.id)
        self.decisions += len(placed)
        self.admitted = [r for r in self.admitted if r.id not in placed]

    def _autoscale(self) -> None:
        t0 = time.process_time()
        live = [w for w in self.workers.values() if w.ended_at is None]
        ready = [w for w in live if w.ready_at <= self.now]
        plan = scale_up_plan(
            waiting=len(self.admitted),
            demand_cores=sum(r.processes for r in self.admitted),
            free_cores=sum(w.free for w in ready),
            booting=len(live) - len(ready),
            live=len(live),
            worker_cores=self.sc.worker_cores,
            worker_memory_gb=self.sc.worker_memory_gb,
            min_workers=self.sc.min_workers,
            max_workers=self.sc.workers,
        )
        if plan is not None:
            for _ in range(plan.count):
                self._boot()
        if not self.admitted:
            now = EPOCH + timedelta(seconds=self.now)
            idle = {
                w.id: EPOCH + timedelta(seconds=w.idle_since)
                for w in ready
                if w.idle_since is not None and w.free == w.cores
            }
            for wid in scale_down_plan(
                idle_since=idle,
                live=len(live),
                min_workers=self.sc.min_workers,
                idle_timeout=self.sc.idle_timeout_s,
                now=now,
            ):
                self.workers[wid].ended_at = self.now
                self.live_cores -= self.workers[wid].cores
                self._drop(wid)
        self.cpu += time.process_time() - t0

    # --- the figures -------------------------------------------------------------------------

    def _result(self) -> Result:
        starts = sorted(r.start_at - r.submit_at for r in self.runs if r.start_at is not None)
        end = max((r.end_at or 0.0) for r in self.runs) if self.runs else 0.0
        first = min((s.submit_at for s in self.sc.studies), default=0.0)
        hours = sum(
            ((w.ended_at if w.ended_at is not None else end) - w.booted_at) / 3600
            for w in self.workers.values()
        )
        weights = self.sc.tenants
        shares = {t: self.saturated[t] / weights[t] for t in weights}
        fair = jain(list(shares.values())) if len(weights) > 1 and any(shares.values()) else None
        return Result(
            scenario=self.name,
            admission=self.sc.admission,
            placement=self.sc.placement,
            runs=len(starts),
            mean_start_s=statistics.fmean(starts) if starts else 0.0,
            p95_start_s=starts[min(len(starts) - 1, int(0.95 * len(starts)))] if starts else 0.0,
            makespan_s=end - first,
            worker_hours=hours,
            jain=fair,
            decisions=self.decisions,
            decision_cpu_s=self.cpu,
            shares=shares,
        )


class _Held:
    """Backfill's view of the model's running runs (read only when a run does not fit)."""

    def __init__(self, sim: Simulation, tenant: str) -> None:
        self.sim, self.tenant = sim, tenant

    def _held(self, runs: Iterator[Run]) -> list[Held]:
        return [
            Held(
                holds=Usage(cores=r.processes, memory_gb=0.0, runs=1),
                ends_at=EPOCH
                + timedelta(seconds=(r.start_at or r.admitted_at or 0.0) + r.wall_limit)
                if r.wall_limit is not None
                else None,
            )
            for r in runs
        ]

    def _holding(self) -> Iterator[Run]:
        yield from self.sim.running.values()
        yield from self.sim.admitted

    def of_tenant(self) -> list[Held]:
        return self._held(r for r in self._holding() if r.tenant == self.tenant)

    def of_backend(self, backend_id: int) -> list[Held]:
        return self._held(self._holding())

    def started(
        self, backend_id: int, need: Usage, wall_limit: float | None, now: datetime
    ) -> None:
        return None  # the model's runs are read afresh at each pass
