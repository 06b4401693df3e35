"""An adaptive study through the HTTP API on the real stack: the initial design solved by
OpenFOAM, the next batch made by the worker when it ends, the surrogate answering."""

from __future__ import annotations

import pytest

from core.testing import wait_for

pytestmark = [pytest.mark.solver, pytest.mark.slow]


def test_an_adaptive_airfoil_study_runs_its_batches_to_the_budget_and_predicts(live):
    spec = {
        "name": "adaptive map",
        "template": "airfoil2d",
        "combine": "adaptive",
        "seed": 2,
        "parameters": {
            "aoa": {"min": 0, "max": 8},
            "speed": {"min": 20, "max": 30},
            "iterations": 30,
        },
        "adaptive": {"goal": "map", "objectives": ["Cl"], "initial": 3, "batch": 2, "budget": 5},
    }
    r = live.post("/api/v1/studies/", json=spec)
    assert r.status_code == 201, r.text
    study_id = r.json()["id"]
    assert r.json()["run_count"] == 3

    def ended():
        body = live.get(f"/api/v1/studies/{study_id}/").json()
        return body if body["state"] in ("completed", "completed_with_failures") else None

    study = wait_for(ended, timeout=300, what="the adaptive study to end")
    assert study["state"] == "completed", study
    assert study["run_count"] == 5 and study["progress"]["by_state"]["completed"] == 5

    # the first answer imports scikit-learn and fits: slow on a loaded shared machine
    body = live.get(f"/api/v1/studies/{study_id}/surrogate/", timeout=180).json()
    assert body["progress"]["batch"] == 2 and body["progress"]["end"] == "budget"
    assert sorted(s["batch"] for s in body["samples"]) == [1, 1, 1, 2, 2]
    assert body["observed"] == {"Cl": 5}
    low = live.get(f"/api/v1/studies/{study_id}/surrogate/?aoa=0.5&speed=25", timeout=60).json()
    high = live.get(f"/api/v1/studies/{study_id}/surrogate/?aoa=7.5&speed=25", timeout=60).json()
    # lift grows with the angle of attack, and the surrogate learned it from the solver
    assert high["prediction"]["Cl"]["mean"] > low["prediction"]["Cl"]["mean"] + 0.2
    assert live.get(f"/api/v1/studies/{study_id}/surrogate/?aoa=20&speed=25").status_code == 400
