"""Every job a module can start by name is the name of a registered Celery task."""

from __future__ import annotations

import pytest

from core import jobs
from core.jobs import Job


@pytest.mark.parametrize("job", list(Job))
def test_every_job_names_a_registered_task(job: Job) -> None:
    assert jobs.task(job).name == str(job)


RACE = """
import threading
import django
django.setup()
from core.jobs import Job, task
barrier = threading.Barrier(16)
errors = []
def go():
    barrier.wait()
    try:
        task(Job.REFRESH_STUDY)
    except Exception as exc:
        errors.append(repr(exc))
threads = [threading.Thread(target=go) for _ in range(16)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(len(errors), errors[:1])
"""


def test_threads_of_a_fresh_process_asking_for_a_task_at_once_all_find_it() -> None:
    """A fresh web process gets 20 agents' `running` reports at once: every thread that
    enqueues a job finds its task, none while another imports the task modules (seen: 11
    of 20 answered 500, and their runs' first live data waited for the retry)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    backend = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": f"{backend}{os.pathsep}{backend.parent}"}
    for _ in range(3):  # the race was lost 2 times in 3 without the lock
        out = subprocess.run(
            [sys.executable, "-c", RACE], env=env, cwd=backend, capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.split()[0] == "0", out.stdout
