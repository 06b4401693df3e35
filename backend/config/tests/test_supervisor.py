"""`make run`'s supervisor (config/supervisor.py) keeps the portal up when one of its processes dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from config.supervisor import Layout, supervisor_conf
from core.stack import Stack


def _ctl(layout: Layout, *args: str) -> str:
    bin_dir = layout.bin
    out = subprocess.run(
        [str(bin_dir / "supervisorctl"), "-c", str(layout.conf), *args],
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


def _wait(predicate, what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    pytest.fail(f"gave up waiting for {what}")


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _pid(layout: Layout, program: str) -> int:
    out = _ctl(layout, "pid", program)
    return int(out) if out.isdigit() else 0


def test_the_configuration_quotes_what_supervisord_would_split_or_expand(tmp_path):
    odd = tmp_path / "my data 100%"
    layout = Layout(data=odd, port=8123, python=Path(sys.executable), bin=Path("/opt/a b/bin"))
    conf = supervisor_conf(layout=layout)
    assert 'command="/opt/a b/bin/uvicorn" config.asgi:application' in conf
    assert "my data 100%%" in conf  # supervisord would expand a bare %
    assert "--port 8123" in conf
    # beat is a program of its own: a crashed worker does not take the schedule with it
    assert "[program:beat]" in conf and " -B" not in conf


def test_a_crashed_worker_is_restarted_the_log_says_why_and_the_web_stays_up(
    tmp_path, django_db_setup
):
    stack = Stack()  # its port and environment (the test settings); nothing started
    layout = Layout(
        data=tmp_path, port=stack.port, python=Path(sys.executable), bin=Path(sys.executable).parent
    )
    layout.logs.mkdir(parents=True)
    layout.conf.write_text(supervisor_conf(layout=layout))
    sup = subprocess.Popen(
        [str(layout.bin / "supervisord"), "-c", str(layout.conf)],
        env=stack.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        _wait(lambda: _healthy(stack.url), "the web server")
        _wait(lambda: "RUNNING" in _ctl(layout, "status", "worker"), "the worker")
        first = _pid(layout, "worker")
        assert first > 0

        os.kill(first, signal.SIGKILL)

        _wait(
            lambda: (
                _pid(layout, "worker") not in (0, first)
                and "RUNNING" in _ctl(layout, "status", "worker")
            ),
            "the worker's restart",
        )
        log = (layout.logs / "supervisord.log").read_text()
        assert "exited: worker (terminated by SIGKILL; not expected)" in log
        assert _healthy(stack.url)
        assert "RUNNING" in _ctl(layout, "status", "web")
        assert "RUNNING" in _ctl(layout, "status", "beat")
        children = [_pid(layout, p) for p in ("web", "worker", "beat")]
    finally:
        sup.send_signal(signal.SIGTERM)
        sup.wait(timeout=60)
    # Ctrl-C / SIGTERM stops every program with it
    for pid in children:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
