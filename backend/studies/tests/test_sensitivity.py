"""A study's sensitivity: first-order and total Sobol indices of its objectives over the
parameters it varies, on the surrogate of its completed runs (studies/sensitivity.py).

Runs are not solved here: they are set completed with values of known functions, whose
indices are known (backend/e2e runs real ones; `make bench NAME=analysis` checks the
Ishigami function's indices at a stated number of runs)."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient
from rich.console import Console
from windtunnel.cli_analysis import sensitivity_tables

from orchestration.planning import surrogate
from orchestration.planning.sensitivity import sobol
from studies.models import Run
from studies.state import study_refresh_state

GRID: dict[str, Any] = {
    "name": "polar over speed",
    "template": "airfoil2d",
    "parameters": {
        "aoa": {"linspace": [-4, 12, 5]},
        "speed": {"values": [10, 20, 30, 40]},
        "iterations": 60,
    },
}


def complete(study_id, objectives) -> None:
    """The study's runs end completed with `objectives(parameters)`."""
    for run in Run.objects.filter(study_id=study_id):
        Run.objects.filter(pk=run.pk).update(
            state="completed", objectives=objectives(run.parameters)
        )
    study_refresh_state(study_id=study_id)


def test_an_additive_function_splits_its_variance_as_its_terms_do() -> None:
    """f = 2 a + b over the unit square: variances 4/12 and 1/12, so S_a = 0.8, S_b = 0.2,
    no interaction (total = first), and c, which f ignores, 0."""
    bounds = [surrogate.Bound(name=n, low=0.0, high=1.0) for n in "abc"]
    points = surrogate.latin_hypercube(bounds, 24, seed=3)
    model = surrogate.fit(bounds, points, [2 * p["a"] + p["b"] for p in points])
    got = {i.name: i for i in sobol(model, samples=1024)}
    assert got["a"].first == pytest.approx(0.8, abs=0.03)
    assert got["b"].first == pytest.approx(0.2, abs=0.03)
    assert got["c"].first == pytest.approx(0.0, abs=0.02)
    truth = {"a": 0.8, "b": 0.2, "c": 0.0}
    for index in got.values():
        assert index.total == pytest.approx(index.first, abs=0.03)
        low, high = index.first_interval  # the estimator's interval holds the true share
        assert low - 0.01 <= truth[index.name] <= high + 0.01 and high - low < 0.2


def test_a_grid_study_shows_which_parameter_each_objective_depends_on(api) -> None:
    study_id = api.post("/api/v1/studies/", GRID, format="json").json()["id"]
    body = api.get(f"/api/v1/studies/{study_id}/sensitivity/?samples=1024").json()
    # no run has ended: every objective waits for its runs
    assert body["objectives"] == [] and body["runs_needed"] == 8
    assert [s["name"] for s in body["skipped"]] == ["Cd", "Cl", "LD"]
    assert body["skipped"][0]["runs"] == 0

    # Cl depends on the angle alone, Cd on the speed alone; LD on both, with an interaction
    complete(
        study_id,
        lambda p: {
            "Cl": 0.1 * p["aoa"],
            "Cd": 0.001 * p["speed"],
            "LD": 100 * p["aoa"] / p["speed"],
        },
    )
    body = api.get(f"/api/v1/studies/{study_id}/sensitivity/?samples=1024").json()
    assert body["samples"] == 1024 and body["confidence"] == 0.95 and body["skipped"] == []
    assert body["parameters"] == [
        {"name": "aoa", "min": -4.0, "max": 12.0, "unit": "deg"},
        {"name": "speed", "min": 10.0, "max": 40.0, "unit": "m/s"},
    ]
    shares = {
        o["name"]: {i["parameter"]: (i["first"], i["total"]) for i in o["indices"]}
        for o in body["objectives"]
    }
    assert {o["runs"] for o in body["objectives"]} == {20}
    assert shares["Cl"]["aoa"][0] > 0.97 and shares["Cl"]["speed"][1] < 0.03
    assert shares["Cd"]["speed"][0] > 0.97 and shares["Cd"]["aoa"][1] < 0.03
    # a product's parameters interact: each one's total exceeds its first-order share
    for first, total in shares["LD"].values():
        assert total > first + 0.01

    # the command line's tables: a parameter per row, the largest total first, with its bar
    console = Console(width=120, record=True)
    for table in sensitivity_tables(body):
        console.print(table)
    text = console.export_text()
    cl = text[text.index("Cl (20 runs)") : text.index("LD (20 runs)")]
    assert cl.index("aoa") < cl.index("speed") and "█" * 20 in cl, text

    one = api.get(f"/api/v1/studies/{study_id}/sensitivity/?objective=Cd&samples=1024").json()
    assert [o["name"] for o in one["objectives"]] == ["Cd"]
    assert (
        one["objectives"][0]["indices"]
        == next(o for o in body["objectives"] if o["name"] == "Cd")["indices"]
    )


@pytest.mark.parametrize(
    ("query", "field", "says"),
    [
        ("objective=Lift", "objective", "no objective 'Lift'; one of Cd, Cl, LD"),
        ("samples=1000", "samples", "'1000' is not one of 256, 512"),
        ("samples=many", "samples", "a power of two"),
        ("samples=131072", "samples", "65536"),
    ],
)
def test_bad_queries_are_400s_naming_the_parameter(api, query, field, says) -> None:
    study_id = api.post("/api/v1/studies/", GRID, format="json").json()["id"]
    r = api.get(f"/api/v1/studies/{study_id}/sensitivity/?{query}")
    assert r.status_code == 400, r.content
    assert r.json()["field"] == field and says in r.json()["message"], r.json()


def test_an_objective_asked_for_without_enough_runs_is_a_400_saying_how_many(api) -> None:
    study_id = api.post("/api/v1/studies/", GRID, format="json").json()["id"]
    first = Run.objects.filter(study_id=study_id).order_by("index")[:3]
    for run in first:
        Run.objects.filter(pk=run.pk).update(state="completed", objectives={"Cl": 0.1})
    r = api.get(f"/api/v1/studies/{study_id}/sensitivity/?objective=Cl")
    assert r.status_code == 400 and r.json()["field"] == "objective"
    message = r.json()["message"]
    assert "a value in 3 completed run(s)" in message and "needs 8" in message


def test_a_study_that_varies_no_number_has_no_sensitivity(api) -> None:
    spec = {**GRID, "parameters": {"aoa": 4, "iterations": 60}}
    study_id = api.post("/api/v1/studies/", spec, format="json").json()["id"]
    r = api.get(f"/api/v1/studies/{study_id}/sensitivity/")
    assert r.status_code == 400 and r.json()["field"] == "parameters", r.json()


def test_another_tenants_study_is_not_found(api, make_tenant) -> None:
    study_id = api.post("/api/v1/studies/", GRID, format="json").json()["id"]
    intruder = APIClient()
    intruder.force_authenticate(make_tenant().user)
    assert intruder.get(f"/api/v1/studies/{study_id}/sensitivity/").status_code == 404
    assert api.get(f"/api/v1/studies/{study_id}/sensitivity/").status_code == 200
