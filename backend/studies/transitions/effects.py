"""What every transition shares: the fields a run's end sets, setting them on the caller's
object, and what a change leaves to do elsewhere (publish, schedule, kill or release on its
backend, notify), enqueued by name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.db import transaction

from compute.drivers import traits_of
from core import jobs
from core.jobs import Job
from studies.choices import RunState
from studies.events import publish_runs_changed, publish_study
from studies.models import Run

MESSAGE_MAX = 5000


RESULT_FIELDS = (  # what results_compute and an agent's final report set
    "objectives",
    "partial_objectives",
    "iterations",
    "last_time",
    "trust",
    "trust_detail",
)

# from the final report: what its steps used, and the times its case wrote completely
USAGE_FIELDS = ("peak_memory_bytes", "cpu_seconds", "writes")

PUBLISH_INLINE = 500  # runs whose events a cancel sends itself; more are the worker's


PUBLISH_CHUNK = 2000


def fields_assign(run: Run, fields: Mapping[str, Any]) -> None:
    """What a transition wrote, set on the caller's object too."""
    for name, value in fields.items():
        setattr(run, name, value)


def runs_changed_publish(*, study_id: Any, run_ids: list[str]) -> None:
    """The live events of a set of one study's runs that changed at once: each run's own
    when they are few; for a large set the study's counts now and each run's event from the
    worker (an event per run of 100,000 would hold the request for seconds)."""
    if len(run_ids) <= PUBLISH_INLINE:
        publish_runs_changed(run_ids)
        return
    transaction.on_commit(lambda: publish_study(study_id=study_id, kind="study", payload={}))
    for i in range(0, len(run_ids), PUBLISH_CHUNK):
        jobs.enqueue(Job.PUBLISH_RUNS, run_ids[i : i + PUBLISH_CHUNK])


def after_end(run: Run, *, requeued: bool = False) -> None:
    """Publish, and enqueue what the end of an attempt leaves to do elsewhere."""
    if requeued:
        publish_runs_changed([run.pk])
        jobs.enqueue(Job.REFRESH_STUDY, str(run.study_id))
    else:  # the study's state changes only when its last active run ends
        publish_runs_changed([run.pk], refresh_when_done=True)
    if requeued or run.released_at is None:  # else its cores went back (and were scheduled)
        jobs.enqueue(Job.SCHEDULE_TENANT, run.tenant_id)
    if run.state == RunState.FAILED:  # failed or diverged: its subscribers are told
        jobs.enqueue(Job.NOTIFY_RUNS_FAILED, [str(run.pk)])
    if run.handle and traits_of(backend_kind(run)).frees_on_end:
        # the server (or stack) of a finished run costs money until deleted: at once
        jobs.enqueue(Job.RELEASE_RUN, str(run.pk), run.attempt, run.handle)


def backend_kind(run: Run) -> str:
    if Run.backend.is_cached(run):
        return run.backend.kind
    return str(Run.objects.filter(pk=run.pk).values_list("backend__kind", flat=True).first() or "")


def stop_started(run: Run) -> None:
    """A running agent sees `stop` on its next report and ends cleanly, keeping its results;
    the backend kill follows after STOP_GRACE as a safety net. One not yet running is killed."""
    if not run.handle:
        return
    countdown = (
        settings.WINDTUNNEL["STOP_GRACE"]
        if run.state == RunState.RUNNING or run.started_at
        else None
    )
    jobs.enqueue(Job.KILL_RUN, str(run.pk), run.attempt, run.handle, countdown=countdown)
