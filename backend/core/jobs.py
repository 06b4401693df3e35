"""Work for the Celery worker, named: the one way a module starts a step of another.

A lower layer must not import a higher one (docs/development/layers.md), yet it often has to
start the next step: a submission asks the scheduler, a finished build wakes the runs that
waited for it. It names that step here, as a `Job`, and the job runs after the transaction
that caused it commits. Each Job is the explicit `name=` of one Celery task, defined in the
app that owns the step; `core/tests/test_jobs.py` proves every name has its task.
"""

from __future__ import annotations

import enum
import logging
import threading
from typing import Any

from celery import current_app
from django.db import transaction

logger = logging.getLogger(__name__)


class Job(enum.StrEnum):
    # dispatch: admit within quotas and start what was admitted; the periodic safety tick
    SCHEDULE_TENANT = "dispatch.schedule_tenant"
    SCHEDULE_ALL = "dispatch.tick"
    DISPATCH_RUNS = "dispatch.dispatch_runs"
    # dispatch: warm pools boot workers for admitted runs waiting, delete idle ones
    AUTOSCALE_POOLS = "dispatch.pools_autoscale"
    # studies: derive a study's state from its runs
    REFRESH_STUDY = "studies.refresh_study"
    # studies: a cancelled study's queued runs ended in chunks (studies.services)
    CANCEL_QUEUED_RUNS = "studies.cancel_queued_runs"
    # studies: a deleted study's runs and files removed in chunks (studies.deletion)
    DELETE_STUDY = "studies.delete_study"
    # studies: an adaptive study's next batch, once the previous one has ended
    NEXT_BATCH = "studies.next_batch"
    # studies: the live events of a large set of runs that changed at once (a cancel)
    PUBLISH_RUNS = "studies.publish_runs"
    # runs: what a run's end leaves to do on its backend and on disk
    KILL_RUN = "runs.kill_run"
    RELEASE_RUN = "runs.release_run"
    DELETE_RUN_FILES = "runs.delete_run_files"
    # runs: a completed run's flow fields, made when someone first wants them
    MAKE_FIELDS = "runs.make_fields"
    # images: a composed image's build (a container image, or VM bakes on cloud backends)
    BUILD_IMAGE = "images.build_image"
    BAKE_VM_IMAGE = "images.bake_vm_image"
    # notifications: a study's end, runs that failed or diverged (webhooks, e-mail)
    NOTIFY_STUDY_ENDED = "notifications.study_ended"
    NOTIFY_RUNS_FAILED = "notifications.runs_failed"
    # notifications: one webhook delivery's next attempt; one e-mail to one user
    DELIVER_WEBHOOK = "notifications.deliver"
    SEND_EMAIL = "notifications.send_email"


def enqueue(job: Job, *args: Any, countdown: float | None = None, **kwargs: Any) -> None:
    """Run `job` with these arguments once the current transaction commits (at once outside
    one), after `countdown` seconds when given."""
    transaction.on_commit(lambda: send(job, *args, countdown=countdown, **kwargs))


def send(job: Job, *args: Any, countdown: float | None = None, **kwargs: Any) -> None:
    """Hand `job` to the broker now (for callers already after commit)."""
    task(job).apply_async(args, kwargs or None, countdown=countdown)


_IMPORTING = threading.Lock()


def import_tasks() -> None:
    """Import every app's task modules (once; the web process does it at start-up)."""
    with _IMPORTING:
        current_app.loader.import_default_modules()


def warm_up() -> None:
    """Import the task modules and open the broker connection now (at a web process's
    start-up), not with the first job a request hands over: the first submission waited a
    quarter of a second for the connection and the producer pool."""
    import_tasks()
    app = current_app
    app.finalize(auto=True)  # the task registry, bound once
    # what sending a task message makes on first use: the result backend (found by a scan
    # of the installed packages' entry points), the router, the message makers
    for made_on_first_use in ("router", "queues", "create_task_message", "send_task_message"):
        getattr(app.amqp, made_on_first_use)
    app.backend  # noqa: B018
    try:
        with app.producer_or_acquire() as producer:
            producer.connection.ensure_connection(max_retries=3)
            producer.channel  # noqa: B018 (the transport's channel, made on first use)
    except Exception as exc:  # noqa: BLE001 (made on the first job instead, which says why)
        logger.warning("the broker is not reachable at start-up (%s): connecting on first use", exc)


def task(job: Job) -> Any:
    """The Celery task named `job`. Outside a worker the apps' task modules are imported on
    first use (Celery's autodiscovery is lazy: a worker imports them when it starts), under
    a lock: a thread that came while another was importing them found its task missing (a
    500 for 11 of 20 agents reporting `running` at once to a fresh web process)."""
    tasks = current_app.tasks
    if str(job) not in tasks:
        import_tasks()
    return tasks[str(job)]
