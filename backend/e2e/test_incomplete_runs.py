"""A run cancelled mid-solve on the real stack (uvicorn, Celery, PostgreSQL, Redis, the run
agent and icoFoam) keeps no objective: its results are null everywhere, what its partial
series gave is kept apart as partial."""

from __future__ import annotations

import csv
import io

import pytest

from core.testing import wait_for

pytestmark = [pytest.mark.solver, pytest.mark.slow]


def test_a_run_cancelled_mid_solve_keeps_no_objectives_only_partial_ones(live):
    # 50 s of simulated time on 400 cells: still solving when it is cancelled
    spec = {"name": "stopped", "template": "cavity", "parameters": {"cells": 20, "end_time": 50}}
    study = live.post("/api/v1/studies/", json=spec).json()
    run_id = live.get(f"/api/v1/studies/{study['id']}/runs/").json()["results"][0]["id"]
    wait_for(
        lambda: (
            "meanSpeed.volAverage(mag(U))"
            in live.get(f"/api/v1/runs/{run_id}/telemetry/").json()["available"]
        ),
        timeout=120,
        what="the run's objective series",
    )
    r = live.post(f"/api/v1/runs/{run_id}/cancel/")
    assert r.status_code == 200 and r.json()["state"] == "cancelled"
    # the agent's last report, after the cancel, brings what its series gave
    run = wait_for(
        lambda: (b := live.get(f"/api/v1/runs/{run_id}/").json())["partial_objectives"] and b,
        timeout=60,
        what="the agent's final report",
    )
    names = set(study["objectives"])
    assert run["state"] == "cancelled" and run["trust"] == ""
    assert run["objectives"] == dict.fromkeys(names)
    assert set(run["partial_objectives"]) <= names
    assert run["partial_objectives"]["mean_speed"] > 0
    text = live.get(f"/api/v1/studies/{study['id']}/results.csv").text
    (line,) = list(csv.DictReader(io.StringIO(text)))
    assert all(line[name] == "" for name in names)
    assert float(line["partial.mean_speed"]) == run["partial_objectives"]["mean_speed"]
