"""Every job a module can start by name is the name of a registered Celery task."""

from __future__ import annotations

import pytest

from core import jobs
from core.jobs import Job


@pytest.mark.parametrize("job", list(Job))
def test_every_job_names_a_registered_task(job: Job) -> None:
    assert jobs.task(job).name == str(job)
