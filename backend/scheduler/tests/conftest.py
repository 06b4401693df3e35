"""Fixtures of the scheduler's tests."""

import pytest

from core import jobs
from core.jobs import Job


@pytest.fixture
def scheduled(monkeypatch):
    """The tenants whose scheduling was enqueued (kept from any running worker: the test
    schedules by hand)."""
    calls: list[int] = []
    real = jobs.enqueue

    def record(job, *args, **kwargs):
        if job == Job.SCHEDULE_TENANT:
            calls.append(args[0])
        else:
            real(job, *args, **kwargs)

    monkeypatch.setattr(jobs, "enqueue", record)
    return calls
