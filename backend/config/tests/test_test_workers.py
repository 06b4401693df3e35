"""The test suite runs on several pytest-xdist workers at once (scripts/test -n N): each
worker's settings name a database, Redis DB, Celery queue and data directory of its own, and
the processes a test starts (the live stack, the scripts) use that worker's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parents[3]
# what the settings of a process print (and, with CHILD=1, those of a process it starts)
PRINT = """
import json, os, subprocess, sys
from django.conf import settings
from config.celery_app import app

def seen():
    return {
        "database": settings.DATABASES["default"]["NAME"],
        "redis": settings.REDIS_URL,
        "broker": app.conf.broker_url,
        "live_prefix": settings.CHANNEL_LAYERS["default"]["CONFIG"]["prefix"],
        "queue": settings.CELERY_TASK_DEFAULT_QUEUE,
        "data_dir": str(settings.DATA_DIR),
        "metrics_dir": str(settings.WINDTUNNEL["METRICS_DIR"]),
    }

out = {"self": seen()}
if os.environ.get("CHILD"):
    child = {k: v for k, v in os.environ.items() if k != "CHILD"}
    child.update(json.loads(os.environ["CHILD"]))
    done = subprocess.run([sys.executable, "-c", sys.argv[1]], env=child, capture_output=True,
                          text=True, check=True)
    out["child"] = json.loads(done.stdout)["self"]
print(json.dumps(out))
"""


def settings_of(worker: str | None, **extra: str) -> dict:
    """The test settings a process of `worker` (None: no xdist) reads, from a plain
    environment: the test database `wt`, test Redis DB 1, data directory /srv/wt-test."""
    environ = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "PYTEST_XDIST_WORKER",
            "WINDTUNNEL_TEST_WORKER",
            "CELERY_QUEUE",
            "WINDTUNNEL_METRICS_DIR",
            "CELERY_BROKER_URL",
        )
    }
    environ |= {
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "PYTHONPATH": f"{ROOT / 'backend'}:{ROOT}",
        "TEST_DATABASE_URL": "postgres://wt@127.0.0.1:5432/wt",
        "TEST_REDIS_URL": "redis://127.0.0.1:6379/1",
        "WINDTUNNEL_DATA_DIR": "/srv/wt-test",
        **({"PYTEST_XDIST_WORKER": worker} if worker else {}),
        **extra,
    }
    done = subprocess.run(
        [sys.executable, "-c", PRINT, PRINT],
        env=environ,
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_two_workers_share_no_database_redis_db_queue_or_directory():
    alone, gw0, gw1 = (settings_of(w)["self"] for w in (None, "gw0", "gw1"))
    assert alone["database"] == "wt" and alone["queue"] == "windtunnel-test"
    assert gw0["database"] == "wt_gw0" and gw1["database"] == "wt_gw1"
    assert alone["redis"].endswith("/1")
    assert gw0["redis"].endswith("/17") and gw1["redis"].endswith("/33")
    assert gw0["data_dir"] == "/srv/wt-test-gw0" and gw1["data_dir"] == "/srv/wt-test-gw1"
    for name in gw0:
        assert gw0[name] != gw1[name], name  # broker, live-event prefix, metrics too


def test_a_process_a_worker_starts_uses_that_workers_database_and_queue():
    seen = settings_of("gw1", CHILD="{}")
    assert seen["child"] == seen["self"]
    assert seen["self"]["database"] == "wt_gw1"


def test_a_process_handed_a_database_of_its_own_keeps_it():
    """e2e/test_backup.py restores into a fresh database through a script it starts."""
    own = {"TEST_DATABASE_URL": "postgres://wt@127.0.0.1:5432/restored"}
    seen = settings_of("gw1", CHILD=json.dumps(own))
    assert seen["child"]["database"] == "restored"
    assert seen["child"]["queue"] == seen["self"]["queue"] == "windtunnel-test-gw1"


def test_more_workers_than_the_private_redis_has_databases_for_are_refused():
    environ = {k: v for k, v in os.environ.items() if k != "WINDTUNNEL_TEST_WORKER"}
    environ |= {
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "PYTHONPATH": f"{ROOT / 'backend'}:{ROOT}",
        "TEST_REDIS_URL": "redis://127.0.0.1:6379/4",
        "PYTEST_XDIST_WORKER": "gw7",
    }
    done = subprocess.run(
        [sys.executable, "-c", "from django.conf import settings; settings.REDIS_URL"],
        env=environ,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    assert "worker gw7 would need Redis DB 132" in done.stderr


def test_this_test_runs_on_its_own_workers_database_and_queue():
    worker = os.environ.get("PYTEST_XDIST_WORKER")  # None with -n 0
    suffix = f"_{worker}" if worker else ""
    assert settings.DATABASES["default"]["NAME"].endswith(suffix)
    assert settings.CELERY_TASK_DEFAULT_QUEUE.endswith(suffix.replace("_", "-"))


def test_the_tests_of_one_xdist_group_run_on_one_worker(tmp_path: Path) -> None:
    """The tests sharing the run's one Slurm cluster are an xdist_group: with the suite's
    options (pyproject's addopts, --dist loadgroup) all of a group go to one worker, one
    after another, whatever module they are in; the other tests go to whichever is free."""
    for name in ("a", "b"):
        (tmp_path / f"test_{name}.py").write_text(
            "import pytest, time\n"
            'pytestmark = pytest.mark.xdist_group("cluster")\n'
            + "".join(f"def test_{name}{i}():\n    time.sleep(0.2)\n" for i in range(3))
        )
    (tmp_path / "test_free.py").write_text(
        "import time\n" + "".join(f"def test_f{i}():\n    time.sleep(0.2)\n" for i in range(6))
    )
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-n",
            "2",
            "--dist",
            "loadgroup",
            "-v",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:django",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        # a plain pytest, with none of this worker's settings (its database, its Redis DB)
        env={
            k: v
            for k, v in os.environ.items()
            if k not in ("PYTEST_ADDOPTS", "DJANGO_SETTINGS_MODULE", "PYTEST_XDIST_WORKER")
        },
    ).stdout
    workers = {
        line.split()[0] for line in out.splitlines() if "PASSED" in line and "@cluster" in line
    }
    assert out.count("PASSED") == 12, out
    assert len(workers) == 1, out
