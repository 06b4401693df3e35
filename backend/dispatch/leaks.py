"""What the portal made on its backends beyond a run's life: leaked servers and stacks, and
the backends' own events of running runs.

Servers and stacks the portal made carry their run id and attempt: the leak reaper deletes
those whose attempt the portal no longer tracks (backends with the LeakReaper capability),
sparing the builders of VM image bakes in progress. Backends with the RunEvents capability
(Heat stacks) have their events of a run copied into its log, so the dashboard's log view
shows a multi-node run coming up.
"""

from __future__ import annotations

import functools
import logging

import redis
from django.conf import settings

from catalog.models import Backend
from compute.drivers import DriverError, LeakReaper, RunEvents, driver_for, supports
from core.exceptions import StaleAttempt
from images.vm import builders_in_progress
from pools.selectors import live_worker_ids
from studies.choices import HOLDING_STATES, STARTED_STATES, RunState
from studies.models import Run
from telemetry.ingest import telemetry_ingest

log = logging.getLogger(__name__)

EVENTS_KEY = "windtunnel:backend-events:{run}:{attempt}"


def leaks_reap() -> dict[str, list[str]]:
    """Delete, on every backend that can, what no tracked run attempt holds; per backend the
    names of what was deleted."""
    reapers = [b for b in Backend.objects.all() if supports(b, LeakReaper)]
    backends = [b for b in reapers if b.enabled]
    if not backends:
        return {}
    # every such backend's live attempts: several backends may share one project. ADMITTED
    # runs may be creating their server right now; ended runs and superseded attempts leak.
    tracked = {
        (str(run_id), attempt)
        for run_id, attempt in Run.objects.filter(
            backend__in=reapers, state__in=[*HOLDING_STATES, RunState.ADMITTED]
        ).values_list("id", "attempt")
    }
    builders = builders_in_progress()
    workers = live_worker_ids()  # pool workers the portal keeps (docs/pools.md)
    deleted: dict[str, list[str]] = {}
    for backend in backends:
        try:
            names = driver_for(backend).reap_leaks(
                tracked=tracked, builders=builders, workers=workers
            )
        except DriverError as exc:
            log.warning("leak reaper on %s: %s", backend.name, exc)
            continue
        if names:
            log.warning("leak reaper deleted on %s: %s", backend.name, ", ".join(names))
            deleted[backend.name] = names
    return deleted


@functools.cache
def _redis() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=5)


def backend_events_sync() -> int:
    """Copy new backend events of started runs into their run logs; the newest event id seen
    per attempt is kept in Redis. How many lines were copied."""
    runs = [
        run
        for run in Run.objects.select_related("backend")
        .filter(state__in=STARTED_STATES)
        .exclude(handle="")
        if supports(run.backend, RunEvents)
    ]
    copied = 0
    for run in runs:
        key = EVENTS_KEY.format(run=run.pk, attempt=run.attempt)
        since = _redis().get(key)
        assert since is None or isinstance(since, bytes)  # a synchronous client
        try:
            lines, newest = driver_for(run.backend).run_events(
                run.handle, since=since.decode() if since else None
            )
        except DriverError as exc:
            log.warning("backend events of run %s: %s", run.pk, exc)
            continue
        if lines:
            try:
                telemetry_ingest(
                    run=run, attempt=run.attempt, series={}, log=[f"[heat] {x}" for x in lines]
                )
            except StaleAttempt as exc:  # the attempt ended meanwhile: nothing to add to
                log.info("backend events of run %s not stored: %s", run.pk, exc)
                continue
            copied += len(lines)
        if newest:
            _redis().set(key, newest, ex=7 * 24 * 3600)
    return copied
