"""The portal as separate processes (uvicorn + a Celery worker with beat), for tests and benchmarks.

Beat runs inside the worker (`celery worker -B`) unless asked for apart (`start_worker(beat=False)`
then `start_beat()`): bench/chaos.py kills and restarts each on its own."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Stack:
    """The portal as separate processes: uvicorn (ASGI) and a Celery worker with beat."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings.test",
            "PYTHONPATH": f"{ROOT / 'backend'}:{ROOT}",
            "WINDTUNNEL_PUBLIC_URL": self.url,
            "PORT": str(self.port),
            "DB_POOL": "1",  # as in production (the test runner's own process has no pool)
        }
        self.logs = Path(settings.DATA_DIR) / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.web: subprocess.Popen | None = None
        self.worker: subprocess.Popen | None = None
        self.beat: subprocess.Popen | None = None
        self.extra_workers: list[subprocess.Popen] = []

    def start_web(self, *, workers: int | None = None) -> None:
        """uvicorn on a free port; `workers` processes (else WINDTUNNEL_WEB_WORKERS, 1)."""
        self.web = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "config.asgi:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--log-level",
                "warning",
                "--workers",
                str(workers or os.environ.get("WINDTUNNEL_WEB_WORKERS", "1")),
            ],
            env=self.env,
            cwd=ROOT,
            stdout=open(self.logs / "web.log", "ab"),
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"uvicorn did not come up; see {self.logs / 'web.log'}")

    def start_worker(self, *, beat: bool = True, wait: bool = False) -> None:
        """The Celery worker; with `beat`, the beat scheduler inside it (else start_beat()).
        With `wait`, returns once it is ready (as a portal that has been up a while is: a
        measurement taken while it imports and warms up would be of its start)."""
        log = self.logs / "worker.log"
        start = log.stat().st_size if log.exists() else 0
        self.worker = self._celery_worker(beat=beat, log="worker.log")
        if wait:
            self._wait_ready(self.worker, log, start)

    def _wait_ready(self, proc: subprocess.Popen, log: Path, start: int) -> None:
        """Until the worker logs Celery's `… ready.` (after its worker_ready handlers ran)."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"the Celery worker exited; see {log}")
            with open(log, "rb") as fh:
                fh.seek(start)
                if b" ready." in fh.read():
                    return
            time.sleep(0.2)
        raise RuntimeError(f"the Celery worker was not ready within 120 s; see {log}")

    def add_worker(self) -> None:
        """One more Celery worker process (no beat, a node name of its own) beside the first:
        bench/cdi.py measures how the portal's capacity holds up with 1, 2, 4 of them."""
        n = len(self.extra_workers) + 2
        self.extra_workers.append(
            self._celery_worker(beat=False, log=f"worker{n}.log", name=f"worker{n}@%h")
        )

    def _celery_worker(self, *, beat: bool, log: str, name: str = "") -> subprocess.Popen:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config",
                "worker",
                *(["-B", "--schedule", str(self.logs / "beat-schedule")] if beat else []),
                *(["-n", name] if name else []),
                "--pool",
                "threads",
                "--concurrency",
                "4",
                # no cluster chatter (it costs CPU every second, even idle)
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "--loglevel",
                "INFO",
            ],
            env=self.env,
            cwd=ROOT,
            stdout=open(self.logs / log, "ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its embedded beat is a child: signal them together
        )

    def start_beat(self) -> None:
        """The beat scheduler as a process of its own (with start_worker(beat=False))."""
        self.beat = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config",
                "beat",
                "--loglevel",
                "INFO",
                "--schedule",
                str(self.logs / "beat-schedule-apart"),
            ],
            env=self.env,
            cwd=ROOT,
            stdout=open(self.logs / "beat.log", "ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def stop_worker(self, sig: int = signal.SIGTERM) -> None:
        if self.worker is None:
            return
        _stop_group(self.worker, sig)

    def stop_beat(self, sig: int = signal.SIGTERM) -> None:
        if self.beat is None:
            return
        _stop_group(self.beat, sig)

    def stop(self) -> None:
        self.stop_beat()
        for worker in self.extra_workers:
            _stop_group(worker, signal.SIGTERM)
        self.extra_workers.clear()
        self.stop_worker()
        if self.web and self.web.poll() is None:
            self.web.terminate()
            self.web.wait(timeout=30)


def _stop_group(proc: subprocess.Popen, sig: int) -> None:
    """Signal a process started in a session of its own and its group, and wait for it:
    SIGKILL after 30 s."""
    group = proc.pid
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, sig)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
        proc.wait()
    # a child (the worker's embedded beat, its agent launcher) may outlive a SIGKILLed
    # parent by a moment: make sure the group is gone
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)
