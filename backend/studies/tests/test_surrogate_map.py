"""The surrogate map's answer in one dimension and in three, and the preview of an adaptive
spec: what the study page and the wizard draw from.

Runs are not solved here (backend/e2e/test_adaptive.py runs a real one): they are set
completed with values of a known function, as the ingest would leave them.
"""

from __future__ import annotations

from typing import Any

import pytest

from studies.models import Run
from studies.state import study_refresh_state

ONE: dict[str, Any] = {
    "name": "Cl over aoa",
    "template": "airfoil2d",
    "combine": "adaptive",
    "seed": 2,
    "parameters": {"aoa": {"min": -4, "max": 12}, "iterations": 60},
    "adaptive": {"objectives": ["Cl"], "initial": 3, "batch": 1, "budget": 5},
}
THREE: dict[str, Any] = {
    "name": "three",
    "template": "airfoil2d",
    "combine": "adaptive",
    "seed": 4,
    "parameters": {
        "aoa": {"min": -4, "max": 12},
        "speed": {"min": 10, "max": 40},
        "nu": {"min": 1e-5, "max": 5e-5},
        "iterations": 60,
    },
    "adaptive": {"goal": "optimise", "objectives": ["Cd"], "direction": "min", "budget": 12},
}


def cl(aoa: float) -> float:
    return 0.11 * aoa - 0.003 * aoa**2


def complete(study_id, indexes=None) -> None:
    """The study's pending runs (or those of `indexes`) end completed with known values."""
    runs = Run.objects.filter(study_id=study_id, state="pending")
    if indexes is not None:
        runs = runs.filter(index__in=indexes)
    for run in runs:
        p = run.parameters
        Run.objects.filter(pk=run.pk).update(
            state="completed",
            objectives={
                "Cl": cl(p["aoa"]),
                "Cd": 0.02 + 0.0004 * p["aoa"] ** 2 + 0.002 * p.get("speed", 20) / 20,
                "LD": 1.0,
            },
        )
    study_refresh_state(study_id=study_id)


def test_a_one_parameter_map_is_a_line_over_the_bounds_with_the_runs_values(api):
    study_id = api.post("/api/v1/studies/", ONE, format="json").json()["id"]
    body = api.get(f"/api/v1/studies/{study_id}/surrogate/?grid.size=9").json()
    assert body["grid"] is None and body["needs"] == 2
    assert body["parameters"] == [{"name": "aoa", "min": -4.0, "max": 12.0, "unit": "deg"}]
    assert body["values"] == {"Cl": [None, None, None]}

    complete(study_id, indexes=[0])  # one value: not enough for a map
    body = api.get(f"/api/v1/studies/{study_id}/surrogate/").json()
    assert body["grid"] is None and body["observed"] == {"Cl": 1}

    complete(study_id)
    body = api.get(f"/api/v1/studies/{study_id}/surrogate/?grid.size=9").json()
    grid = body["grid"]
    assert grid["x"] == "aoa" and grid["y"] is None and grid["ys"] == []
    assert grid["xs"][0] == -4 and grid["xs"][-1] == 12 and len(grid["xs"]) == 9
    assert grid["fixed"] == {} and grid["fixed_from"] is None
    mean, std = grid["objectives"]["Cl"]["mean"], grid["objectives"]["Cl"]["std"]
    assert len(mean) == len(std) == 9 and all(s >= 0 for s in std)
    # each sampled run's value sits beside its point, and the line passes near it
    values = body["values"]["Cl"]
    assert len(values) == len(body["samples"]) == 3
    for sample, value in zip(body["samples"], values, strict=True):
        assert value == pytest.approx(cl(sample["aoa"]))
    assert body["observed"] == {"Cl": 3}


def test_parameters_off_a_three_parameter_map_are_held_at_the_best_runs_values(api):
    study_id = api.post("/api/v1/studies/", THREE, format="json").json()["id"]
    complete(study_id)
    body = api.get(f"/api/v1/studies/{study_id}/surrogate/?grid.x=aoa&grid.y=speed").json()
    grid = body["grid"]
    assert (grid["x"], grid["y"]) == ("aoa", "speed")
    runs = Run.objects.filter(study_id=study_id)
    lowest = min(runs, key=lambda r: r.objectives["Cd"])  # optimise, direction min
    assert grid["fixed_from"] == {
        "index": lowest.index,
        "objective": "Cd",
        "direction": "min",
        "value": pytest.approx(lowest.objectives["Cd"]),
    }
    assert grid["fixed"] == {"nu": pytest.approx(lowest.parameters["nu"])}
    other = api.get(f"/api/v1/studies/{study_id}/surrogate/?grid.x=nu&grid.y=aoa").json()
    assert other["grid"]["fixed"] == {"speed": pytest.approx(lowest.parameters["speed"])}
    units = {p["name"]: p["unit"] for p in body["parameters"]}
    assert units == {"aoa": "deg", "speed": "m/s", "nu": "m^2/s"}


def test_a_map_of_an_objective_the_surrogate_does_not_learn_is_a_400_naming_it(api):
    study_id = api.post("/api/v1/studies/", THREE, format="json").json()["id"]
    r = api.get(f"/api/v1/studies/{study_id}/surrogate/?grid.objective=Cl")
    assert r.status_code == 400
    assert r.json()["field"] == "grid.objective" and "one of Cd" in r.json()["message"]


def test_an_adaptive_preview_tells_the_initial_design_and_the_batches_after_it(api):
    r = api.post("/api/v1/studies/preview/", ONE, format="json")
    assert r.status_code == 200, r.json()
    body = r.json()
    assert body["run_count"] == 3
    assert body["adaptive"] == {
        "goal": "map",
        "objectives": ["Cl"],
        "direction": None,
        "directions": {},
        "constraints": [],
        "initial": 3,
        "batch": 1,
        "batch_auto": False,
        "budget": 5,
        "max_batches": 3,
        "tolerance": None,
    }
    grid = api.post(
        "/api/v1/studies/preview/",
        {"name": "g", "template": "airfoil2d", "parameters": {"aoa": {"values": [0, 4]}}},
        format="json",
    )
    assert grid.json()["adaptive"] is None
