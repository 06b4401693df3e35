"""Thin, idempotent tasks: take ids, call one service. Their names are core.jobs' Job."""

from celery import shared_task

from core.db import advisory_lock
from dispatch import autoscale, leaks, reaper, start


@shared_task(name="dispatch.schedule_tenant", ignore_result=True)
def schedule_tenant(tenant_id: int) -> None:
    start.schedule_and_start(tenant_id=tenant_id)


@shared_task(name="dispatch.tick", ignore_result=True)
def tick() -> None:
    start.schedule_everyone()


@shared_task(name="dispatch.dispatch_runs", ignore_result=True)
def dispatch_runs(run_ids: list[str]) -> None:
    start.runs_dispatch(run_ids=run_ids)


@shared_task(name="dispatch.reap", ignore_result=True)
def reap() -> None:
    # one pass at a time: a pass waiting on a slow backend (a cancel can take a minute) would
    # otherwise be joined by one a second, each judging the same runs, until they held every
    # worker thread
    with advisory_lock("windtunnel.reaper") as held:
        if held:
            reaper.runs_reap()


@shared_task(name="dispatch.reap_leaks", ignore_result=True)
def reap_leaks() -> None:
    leaks.leaks_reap()


@shared_task(name="dispatch.backend_events", ignore_result=True)
def backend_events() -> None:
    leaks.backend_events_sync()


@shared_task(name="dispatch.pools_autoscale", ignore_result=True)
def pools_autoscale() -> None:
    autoscale.pools_autoscale()
