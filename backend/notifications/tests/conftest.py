from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.utils import timezone

from core.jobs import Job
from notifications import tasks
from notifications.tests.receivers import HttpReceiver, SmtpReceiver
from studies import state as study_state
from studies.models import Run
from studies.services import study_create

# what the tests run of the jobs a change hands the worker (admission and the rest are other
# apps' tests): the study's refresh, a cancel's background half and every notification step
WORKER: dict[Job, Callable[..., Any]] = {
    Job.REFRESH_STUDY: lambda study_id: study_state.study_refresh_state(study_id=study_id),
    Job.CANCEL_QUEUED_RUNS: lambda study_id, who: study_state.study_cancel_queued(
        study_id=study_id, who=who
    ),
    Job.NOTIFY_STUDY_ENDED: tasks.study_ended,
    Job.NOTIFY_RUNS_FAILED: tasks.runs_failed,
    Job.DELIVER_WEBHOOK: tasks.deliver,
    Job.SEND_EMAIL: tasks.send_email,
}


def work(published: Any) -> list[Job]:
    """Run the jobs handed to the worker so far (and those they hand on), as a worker would
    after each commit; the jobs run, in order."""
    done: list[Job] = []
    while published.worked < len(published.jobs):
        job, args, kwargs = published.jobs[published.worked]
        published.worked += 1
        if job in WORKER:
            WORKER[job](*args, **{k: v for k, v in kwargs.items() if k != "countdown"})
            done.append(job)
    return done


@pytest.fixture
def published(published: Any) -> Any:
    """The project's `published` (jobs recorded, not sent), remembering which ran (work)."""
    published.worked = 0
    return published


@pytest.fixture
def receiver() -> Iterator[HttpReceiver]:
    r = HttpReceiver().start()
    yield r
    r.stop()


@pytest.fixture
def smtp(settings) -> Iterator[SmtpReceiver]:
    server = SmtpReceiver().start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST = "127.0.0.1"
    settings.EMAIL_PORT = server.port
    settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
    yield server
    server.stop()


def make_study(api: Any, *, values: list[float] | None = None) -> Any:
    return study_create(
        tenant=api.tenant,
        owner=api.tenant.user,
        spec={
            "name": "lid sweep",
            "template": "cavity",
            "parameters": {"lid_velocity": {"values": values or [1, 2, 3]}},
        },
        submit=True,
    )


def started(run: Run) -> Run:
    """A run as dispatch and its agent's first report leave it (not a transition)."""
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(
        state="running", attempt=1, admitted_at=now, provisioning_at=now, started_at=now
    )
    run.refresh_from_db()
    return run
