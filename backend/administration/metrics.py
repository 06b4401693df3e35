"""What `/metrics` serves (docs/metrics.md): the processes' own counts plus what is read at
scrape time.

- The counters, histograms and live gauges every process of the portal writes into the
  shared metrics directory (`core.metrics`, prometheus-client's multiprocess mode), added up.
- Runs by state, and the queue (length, oldest wait) per tenant and backend, from PostgreSQL
  in one grouped query over the active runs (`run_activity`): no per-run Python, and
  finished runs are not scanned (the state index narrows the query to active ones).
- The Celery queues' depth, from the broker (Redis list lengths).

A source that fails (the database or the broker unreachable) leaves its metrics out and says
so in `windtunnel_metrics_source_up{source}`, instead of failing the whole scrape.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import redis
from django.conf import settings
from django.db import DatabaseError, connection
from django.utils import timezone
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector

from administration.selectors import HEALTH_WINDOW, backend_trouble_counts
from catalog.models import Backend
from core.metrics import METRICS_DIR, metrics_prune_dead
from pools.choices import LIVE_WORKER_STATES
from pools.models import Pool, PoolWorker
from pools.selectors import pooled_run_ids
from studies.choices import ACTIVE_STATES, RunState
from studies.models import Run
from tenancy.models import Tenant

log = logging.getLogger(__name__)

# kombu's Redis transport keeps a queue's messages of priority p > 0 in the list
# "<queue>\x06\x16<p>", p one of its priority steps (the plain list holds priority 0)
CELERY_PRIORITY_SEPARATOR = "\x06\x16"
CELERY_PRIORITY_STEPS = (3, 6, 9)
# the hash of messages a worker took but has not acknowledged yet (acks_late: running tasks)
CELERY_UNACKED_KEY = "unacked"


@dataclass(frozen=True)
class RunGroup:
    """Active runs of one tenant on one backend in one state (and, queued, one wait reason)."""

    tenant: str
    backend: str
    state: str
    wait_reason: str
    runs: int
    oldest_queued_at: datetime | None  # of its pending runs
    oldest_admitted_at: datetime | None  # of its admitted runs


_ACTIVITY_SQL = f"""
SELECT t.name, b.name, g.state, g.wait_reason, g.runs, g.oldest_queued, g.oldest_admitted
FROM (
    SELECT r.tenant_id, r.backend_id, r.state,
           CASE WHEN r.state = %(pending)s THEN r.wait_reason ELSE '' END AS wait_reason,
           count(*) AS runs,
           min(r.queued_at) FILTER (WHERE r.state = %(pending)s) AS oldest_queued,
           min(r.admitted_at) FILTER (WHERE r.state = %(admitted)s) AS oldest_admitted
    FROM {Run._meta.db_table} r
    WHERE r.state = ANY(%(active)s)
    GROUP BY r.tenant_id, r.backend_id, r.state, 4
) g
JOIN {Tenant._meta.db_table} t ON t.id = g.tenant_id
JOIN {Backend._meta.db_table} b ON b.id = g.backend_id
ORDER BY t.name, b.name, g.state, g.wait_reason
"""


def run_activity() -> list[RunGroup]:
    """The active runs (queued, admitted, provisioning, running) counted per tenant, backend,
    state and (queued) wait reason, with the oldest queued and admitted times: one query."""
    with connection.cursor() as cur:
        cur.execute(
            _ACTIVITY_SQL,
            {
                "pending": RunState.PENDING.value,
                "admitted": RunState.ADMITTED.value,
                "active": [str(s) for s in ACTIVE_STATES],
            },
        )
        return [RunGroup(*row) for row in cur.fetchall()]


class RunsCollector:
    """Runs by state and the queue per tenant and backend, read at scrape time."""

    def collect(self) -> Iterator[Metric]:
        runs = GaugeMetricFamily(
            "windtunnel_runs",
            "Active runs by state (pending, admitted, provisioning, running)",
            labels=["state", "tenant", "backend"],
        )
        queue = GaugeMetricFamily(
            "windtunnel_queue_length",
            "Queued (pending) runs, by why they wait",
            labels=["tenant", "backend", "wait_reason"],
        )
        oldest = GaugeMetricFamily(
            "windtunnel_queue_oldest_wait_seconds",
            "How long the oldest queued run has waited since its submission",
            labels=["tenant", "backend"],
        )
        admitted = GaugeMetricFamily(
            "windtunnel_admitted_oldest_wait_seconds",
            "How long the oldest admitted run has waited for its start since its admission",
            labels=["tenant", "backend"],
        )
        now = timezone.now()
        totals: dict[tuple[str, str, str], int] = {}
        oldest_queued: dict[tuple[str, str], datetime] = {}
        oldest_admitted: dict[tuple[str, str], datetime] = {}
        for g in run_activity():
            key = (g.tenant, g.backend)
            totals[(g.state, *key)] = totals.get((g.state, *key), 0) + g.runs
            if g.state == RunState.PENDING:
                queue.add_metric([*key, g.wait_reason or "none"], g.runs)
            if g.oldest_queued_at is not None:
                oldest_queued[key] = min(g.oldest_queued_at, oldest_queued.get(key, now))
            if g.oldest_admitted_at is not None:
                oldest_admitted[key] = min(g.oldest_admitted_at, oldest_admitted.get(key, now))
        for labels, count in totals.items():
            runs.add_metric(list(labels), count)
        for key, at in oldest_queued.items():
            oldest.add_metric(list(key), max(0.0, (now - at).total_seconds()))
        for key, at in oldest_admitted.items():
            admitted.add_metric(list(key), max(0.0, (now - at).total_seconds()))
        yield from (runs, queue, oldest, admitted)
        stalled = GaugeMetricFamily(
            "windtunnel_backend_stalled_runs",
            "Runs stopped in the last hour for making no progress, by backend",
            labels=["backend"],
        )
        trouble = backend_trouble_counts(since=now - HEALTH_WINDOW)
        for backend_id, name in Backend.objects.values_list("id", "name"):
            stalled.add_metric([name], trouble.get(backend_id, (0, 0))[1])
        yield stalled


class PoolsCollector:
    """Warm pools as the autoscaler sees them (docs/pools.md): the runs waiting for each
    pool, its workers by state, and its bounds, read at scrape time."""

    def collect(self) -> Iterator[Metric]:
        queue = GaugeMetricFamily(
            "windtunnel_pool_queue_length",
            "Admitted runs waiting for a worker of the pool",
            labels=["pool", "backend"],
        )
        workers = GaugeMetricFamily(
            "windtunnel_pool_workers",
            "The pool's workers by state (booting, idle, busy, draining)",
            labels=["pool", "backend", "state"],
        )
        bounds = GaugeMetricFamily(
            "windtunnel_pool_size_bound",
            "The pool's min and max workers",
            labels=["pool", "backend", "bound"],
        )
        pools = list(Pool.objects.select_related("backend"))
        waiting: dict[int, int] = {}
        for pool in pooled_run_ids(runs_qs=Run.objects.filter(state=RunState.ADMITTED)).values():
            waiting[pool.pk] = waiting.get(pool.pk, 0) + 1
        counts: dict[tuple[int, str], int] = {}
        for pool_id, state in PoolWorker.objects.filter(state__in=LIVE_WORKER_STATES).values_list(
            "pool_id", "state"
        ):
            counts[(pool_id, state)] = counts.get((pool_id, state), 0) + 1
        for pool in pools:
            labels = [pool.name, pool.backend.name]
            queue.add_metric(labels, waiting.get(pool.pk, 0))
            for state in LIVE_WORKER_STATES:
                workers.add_metric([*labels, str(state)], counts.get((pool.pk, state), 0))
            bounds.add_metric([*labels, "min"], pool.min_workers)
            bounds.add_metric([*labels, "max"], pool.max_workers)
        yield from (queue, workers, bounds)


def celery_queue_names() -> list[str]:
    """The broker queues the portal's tasks go to."""
    return [settings.CELERY_TASK_DEFAULT_QUEUE]


@functools.cache
def broker() -> redis.Redis:
    """This process's connection to the Celery broker (Redis), for the queue lengths."""
    return redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_timeout=2)


class CeleryCollector:
    """The Celery queues' depth: messages waiting in the broker, and messages workers hold."""

    def collect(self) -> Iterator[Metric]:
        names = celery_queue_names()
        pipe = broker().pipeline(transaction=False)
        for name in names:
            pipe.llen(name)
            for step in CELERY_PRIORITY_STEPS:
                pipe.llen(f"{name}{CELERY_PRIORITY_SEPARATOR}{step}")
        pipe.hlen(CELERY_UNACKED_KEY)
        lengths: list[Any] = pipe.execute()
        depth = GaugeMetricFamily(
            "windtunnel_celery_queue_length",
            "Tasks waiting in a Celery queue of the broker",
            labels=["queue"],
        )
        per_queue = 1 + len(CELERY_PRIORITY_STEPS)
        for i, name in enumerate(names):
            depth.add_metric([name], sum(lengths[i * per_queue : (i + 1) * per_queue]))
        yield depth
        yield GaugeMetricFamily(
            "windtunnel_celery_unacked_tasks",
            "Tasks Celery workers took and have not finished (acknowledged) yet",
            value=lengths[-1],
        )


class GuardedSources:
    """The scrape-time sources, each on its own: one that fails leaves its metrics out and
    reports 0 in windtunnel_metrics_source_up."""

    def __init__(self, sources: dict[str, Any]) -> None:
        self.sources = sources

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "windtunnel_metrics_source_up",
            "Whether a scrape-time source answered (database, broker)",
            labels=["source"],
        )
        for name, source in self.sources.items():
            try:
                metrics = list(source.collect())
            except (DatabaseError, redis.RedisError) as exc:
                log.warning("metrics source %s failed: %s", name, exc)
                up.add_metric([name], 0)
                continue
            up.add_metric([name], 1)
            yield from metrics
        yield up


class LiveFilesCollector(MultiProcessCollector):
    """The processes' metrics files, added up, after dropping the live gauges of this host's
    processes that died without cleaning up (SIGKILL)."""

    def collect(self) -> Any:
        metrics_prune_dead()
        return super().collect()


@functools.cache
def metrics_registry() -> CollectorRegistry:
    """Everything /metrics serves (one registry per process; it reads afresh every scrape)."""
    registry = CollectorRegistry()
    LiveFilesCollector(registry, path=str(METRICS_DIR))
    registry.register(
        GuardedSources(
            {"database": RunsCollector(), "pools": PoolsCollector(), "broker": CeleryCollector()}
        )
    )
    return registry
