"""A solver that stops making progress on the real stack (uvicorn, Celery, PostgreSQL, Redis,
the run agent and icoFoam): stopped with SIGSTOP, its run keeps heartbeating but reports no
new time step, and ends `failed` with end reason `stalled`, the message saying so, for its
owner in the API and in the study's results."""

from __future__ import annotations

import os
import signal

import psutil
import pytest

from core.testing import wait_for
from orchestration.drivers.local import parse_handle

pytestmark = [pytest.mark.solver, pytest.mark.slow]


def _solver(agent_pid: int, name: str) -> psutil.Process | None:
    try:
        found = [p for p in psutil.Process(agent_pid).children(recursive=True) if p.name() == name]
    except psutil.Error:
        return None
    return found[0] if found else None


def test_a_solver_stopped_with_sigstop_ends_its_run_as_stalled(live):
    # long enough in simulated time that it is still solving when it is stopped; the study's
    # stall floor (2 s) is the least a user may set, so the test waits seconds, not minutes
    spec = {
        "name": "hangs",
        "template": "cavity",
        "parameters": {"cells": 20, "end_time": 50},
        "convergence": {"stall_seconds": 2},
    }
    r = live.post("/api/v1/studies/", json=spec)
    assert r.status_code == 201, r.content
    study = r.json()
    run_id = live.get(f"/api/v1/studies/{study['id']}/runs/").json()["results"][0]["id"]
    # the solver has reported time steps: its pace is known
    wait_for(
        lambda: (live.get(f"/api/v1/runs/{run_id}/").json()["iterations"] or 0) >= 5,
        timeout=180,
        what="the run's first time steps",
    )
    handle = live.get(f"/api/v1/runs/{run_id}/").json()["backend_handle"]
    parsed = parse_handle(handle)
    assert parsed is not None, handle
    solver = wait_for(lambda: _solver(parsed[0], "icoFoam"), timeout=60, what="icoFoam")
    os.kill(solver.pid, signal.SIGSTOP)
    try:
        run = wait_for(
            lambda: (b := live.get(f"/api/v1/runs/{run_id}/").json())["state"] == "failed" and b,
            timeout=300,
            what="the stalled run to end",
        )
    finally:
        try:  # a test that fails leaves no stopped process behind
            os.kill(solver.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
    assert run["end_reason"] == "stalled", run
    assert "icoFoam made no progress for" in run["message"], run["message"]
    # it did not complete: no objective is shown as a result
    assert all(v is None for v in run["objectives"].values()), run["objectives"]
    # the solver is gone, not left stopped on the machine
    wait_for(
        lambda: not psutil.pid_exists(solver.pid) or solver.status() == "zombie",
        timeout=60,
        what="the stopped solver to be ended",
    )
    text = live.get(f"/api/v1/studies/{study['id']}/results.csv").text
    assert ",stalled," in text, text
