"""Adaptive studies (combine: adaptive): the spec's checks, the batches (made once, ended by
the budget, the tolerance or a cancel), extend, and the surrogate API.

Runs are not solved here (backend/e2e/test_adaptive.py runs a real one): a batch's runs are
set completed with objective values from a known function, as the ingest would leave them.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from catalog.models import Backend
from core.jobs import Job
from quotas.models import Quota
from studies.batches import adaptive_next_batch
from studies.models import Run, Study
from studies.state import study_cancel, study_refresh_state
from tenancy.testing import TenantAPIClient

SPEC: dict[str, Any] = {
    "name": "map",
    "template": "airfoil2d",
    "combine": "adaptive",
    "seed": 3,
    "parameters": {
        "aoa": {"min": -4, "max": 14},
        "speed": {"min": 10, "max": 40},
        "iterations": 60,
    },
    "adaptive": {"goal": "map", "objectives": ["Cl", "Cd"], "initial": 5, "batch": 3, "budget": 11},
}


def known(aoa: float, speed: float) -> dict[str, float]:
    """A stand-in for the airfoil's answers: smooth in both parameters."""
    cl = 0.11 * aoa - 0.002 * aoa**2 + 0.001 * speed
    cd = 0.02 + 0.0004 * aoa**2 + 0.05 / math.sqrt(speed)
    return {"Cl": cl, "Cd": cd, "LD": cl / cd}


def create(api, **changes):
    return api.post("/api/v1/studies/", {**SPEC, **changes}, format="json")


def complete(study_id, *, objectives=known) -> None:
    """Every pending run of the study ends completed with the known function's values."""
    for run in Run.objects.filter(study_id=study_id, state="pending"):
        p = run.parameters
        Run.objects.filter(pk=run.pk).update(
            state="completed", objectives=objectives(p["aoa"], p["speed"])
        )
    study_refresh_state(study_id=study_id)


def next_batch_jobs(published) -> list[tuple]:
    return [args for job, args, _ in published.jobs if job == Job.NEXT_BATCH]


@pytest.mark.parametrize(
    ("change", "field", "needle"),
    [
        (
            {"parameters": {"aoa": {"min": 4, "max": 4}, "speed": {"min": 10, "max": 40}}},
            "parameters.aoa",
            "needs a range",
        ),
        (
            {"adaptive": {**SPEC["adaptive"], "initial": 8, "budget": 6}},
            "adaptive.budget",
            "below the initial design (8 runs)",
        ),
        (
            {"adaptive": {**SPEC["adaptive"], "objectives": ["Cm"]}},
            "adaptive.objectives",
            "no objective 'Cm'",
        ),
        (
            {"adaptive": {"goal": "optimise", "objectives": ["Cl", "Cd"], "budget": 10}},
            "adaptive.objectives",
            "exactly one objective",
        ),
        ({"adaptive": {**SPEC["adaptive"], "batch": 0}}, "adaptive.batch", "from 1 to 1000"),
        ({"adaptive": {"goal": "map"}}, "adaptive.budget", "required"),
        ({"adaptive": {**SPEC["adaptive"], "goal": "explore"}}, "adaptive.goal", "map"),
        ({"adaptive": {**SPEC["adaptive"], "tolerance": -1}}, "adaptive.tolerance", ""),
        ({"adaptive": None}, "adaptive", ""),
        ({"samples": 5}, "samples", "adaptive.initial"),
        ({"combine": "grid", "parameters": {"aoa": {"values": [0, 4]}}}, "adaptive", "combine"),
        (
            {"parameters": {"aoa": {"values": [0, 4]}, "speed": {"min": 10, "max": 40}}},
            "parameters.aoa",
            "min/max bounds or a single value",
        ),
        ({"parameters": {"aoa": 4, "speed": 20}}, "parameters", "at least one parameter"),
        (
            {"parameters": {"aoa": {"min": -30, "max": 14}}},
            "parameters.aoa",
            "below its minimum",
        ),
        ({"adaptive": {**SPEC["adaptive"], "budget": 2_000_000}}, "adaptive.budget", ""),
    ],
)
def test_bad_adaptive_specs_are_400s_naming_the_field(api, change, field, needle):
    r = create(api, **change)
    assert r.status_code == 400, r.json()
    body = r.json()
    assert body["field"] == field, body
    assert needle in body["message"], body
    assert Study.objects.count() == 0


def test_adaptive_over_a_text_parameter_is_a_400_naming_it(api):
    r = create(
        api,
        template="cavity",
        parameters={"lid_velocity": {"min": 1, "max": 2}, "model": {"values": ["a", "b"]}},
        adaptive={"budget": 8},
    )
    assert r.status_code == 400, r.json()
    assert r.json()["field"] in ("parameters.model", "parameters.model.values"), r.json()


def test_the_initial_design_is_a_latin_hypercube_queued_at_submission(api):
    r = create(api)
    assert r.status_code == 201, r.json()
    study = Study.objects.get(pk=r.json()["id"])
    assert study.run_count == 5 and study.batches == 1
    runs = list(study.runs.order_by("index"))
    assert len(runs) == 5 and all(r.state == "pending" for r in runs)
    # one run in each fifth of each range
    for name, low, high in (("aoa", -4, 14), ("speed", 10, 40)):
        strata = sorted(int((r.parameters[name] - low) / (high - low) * 5) for r in runs)
        assert strata == [0, 1, 2, 3, 4]
    assert all(r.parameters["iterations"] == 60 for r in runs)
    assert runs[0].context["Ux"] == pytest.approx(
        runs[0].parameters["speed"] * math.cos(math.radians(runs[0].parameters["aoa"]))
    )


def test_batches_follow_each_other_once_each_and_stop_at_the_budget(api, published):
    study_id = create(api).json()["id"]
    complete(study_id)
    assert next_batch_jobs(published)[-1] == (study_id, 1)
    study = Study.objects.get(pk=study_id)
    assert study.state == "running"  # between batches: not ended
    assert adaptive_next_batch(study_id=study_id, after=1) == 3
    # the same task delivered again (or a second refresh's): nothing more
    assert adaptive_next_batch(study_id=study_id, after=1) == 0
    study.refresh_from_db()
    assert study.batches == 2 and study.run_count == 8 and study.runs.count() == 8
    new = list(study.runs.filter(index__gte=5))
    assert all(r.state == "pending" for r in new)
    # the parameters held at one value go with the new points, into the case too
    assert all(r.parameters["iterations"] == 60 and r.context["iterations"] == 60 for r in new)
    old = {(r.parameters["aoa"], r.parameters["speed"]) for r in study.runs.filter(index__lt=5)}
    assert not old & {(r.parameters["aoa"], r.parameters["speed"]) for r in new}

    complete(study_id)
    assert adaptive_next_batch(study_id=study_id, after=2) == 3  # 11 - 8: the last 3
    complete(study_id)
    assert adaptive_next_batch(study_id=study_id, after=3) == 0
    study.refresh_from_db()
    assert study.runs.count() == 11 and study.run_count == 11
    assert study.adaptive_end == "budget" and study.state == "completed"
    assert study.finished_at is not None


def test_the_last_batch_is_cut_to_the_budget(api, published):
    study_id = create(api, adaptive={**SPEC["adaptive"], "budget": 7}).json()["id"]
    complete(study_id)
    assert adaptive_next_batch(study_id=study_id, after=1) == 2


def test_a_tolerance_met_ends_the_batches_and_says_so(api, published):
    study_id = create(api, adaptive={**SPEC["adaptive"], "tolerance": 50}).json()["id"]
    complete(study_id)
    assert adaptive_next_batch(study_id=study_id, after=1) == 0
    study = Study.objects.get(pk=study_id)
    assert study.adaptive_end == "tolerance" and study.state == "completed"
    assert study.runs.count() == 5


def test_a_batch_with_no_result_ends_the_study_with_failures(api, published):
    study_id = create(api).json()["id"]
    Run.objects.filter(study_id=study_id).update(state="failed")
    study_refresh_state(study_id=study_id)
    assert adaptive_next_batch(study_id=study_id, after=1) == 0
    study = Study.objects.get(pk=study_id)
    assert study.adaptive_end == "no_results" and study.state == "completed_with_failures"


def test_cancelling_between_batches_stops_them(api, published):
    study_id = create(api).json()["id"]
    complete(study_id)
    study = Study.objects.get(pk=study_id)
    study_cancel(study=study, by=api.tenant.user)
    assert adaptive_next_batch(study_id=study_id, after=1) == 0
    study.refresh_from_db()
    assert study.state == "cancelled" and study.adaptive_end == "cancelled"
    assert study.runs.count() == 5


def test_optimise_places_its_batch_near_the_best_value(api, published):
    spec = {"goal": "optimise", "objectives": ["Cl"], "direction": "max", "initial": 6}
    study_id = create(api, adaptive={**spec, "batch": 2, "budget": 30}).json()["id"]
    for after in range(1, 10):
        complete(study_id)
        adaptive_next_batch(study_id=study_id, after=after)
    best = max(
        Run.objects.filter(study_id=study_id, state="completed"),
        key=lambda r: r.objectives["Cl"],
    )
    # Cl = 0.11 aoa - 0.002 aoa² + 0.001 speed is largest at aoa 14 (the bound), speed 40
    assert best.parameters["aoa"] > 12 and best.parameters["speed"] > 34, best.parameters


def test_extend_raises_the_budget_and_resumes_the_batches(api, published):
    study_id = create(api, adaptive={**SPEC["adaptive"], "budget": 5}).json()["id"]
    complete(study_id)
    adaptive_next_batch(study_id=study_id, after=1)
    assert Study.objects.get(pk=study_id).adaptive_end == "budget"
    r = api.post(f"/api/v1/studies/{study_id}/extend/", {"budget": 8}, format="json")
    assert r.status_code == 200, r.json()
    assert r.json()["state"] == "running"
    assert next_batch_jobs(published)[-1] == (study_id, 1)
    assert adaptive_next_batch(study_id=study_id, after=1) == 3
    r = api.post(f"/api/v1/studies/{study_id}/extend/", {"budget": 4}, format="json")
    assert r.status_code == 400 and r.json()["field"] == "budget"
    r = api.post(
        f"/api/v1/studies/{study_id}/extend/",
        {"parameters": {"aoa": {"values": [1]}}},
        format="json",
    )
    assert r.status_code == 400 and r.json()["field"] == "parameters"


def test_the_surrogate_map_shows_mean_and_deviation_over_two_parameters(api, published):
    study_id = create(api).json()["id"]
    r = api.get(f"/api/v1/studies/{study_id}/surrogate/")
    assert r.status_code == 200, r.json()
    assert r.json()["grid"] is None  # nothing completed yet
    assert r.json()["progress"]["batch"] == 1 and r.json()["progress"]["max_batches"] == 3
    complete(study_id)
    adaptive_next_batch(study_id=study_id, after=1)
    body = api.get(f"/api/v1/studies/{study_id}/surrogate/?grid.size=9").json()
    progress = body["progress"]
    assert (progress["batch"], progress["max_batches"], progress["runs"], progress["budget"]) == (
        2,
        3,
        8,
        11,
    )
    grid = body["grid"]
    assert grid["x"] == "aoa" and grid["y"] == "speed"
    assert grid["xs"][0] == -4 and grid["xs"][-1] == 14 and len(grid["ys"]) == 9
    cl = grid["objectives"]["Cl"]
    assert len(cl["mean"]) == 9 and len(cl["mean"][0]) == 9
    # the map follows the function: Cl grows with aoa along the middle row
    row = cl["mean"][4]
    assert row[-1] - row[0] > 0.8 * (known(14, 25)["Cl"] - known(-4, 25)["Cl"])
    assert all(s >= 0 for line in cl["std"] for s in line)
    assert len(body["samples"]) == 8
    assert {s["batch"] for s in body["samples"]} == {1, 2}
    assert body["observed"] == {"Cl": 5, "Cd": 5}
    swapped = api.get(f"/api/v1/studies/{study_id}/surrogate/?grid.x=speed&grid.y=aoa").json()
    assert swapped["grid"]["x"] == "speed"


def test_a_prediction_at_a_point_has_a_mean_and_deviation(api, published):
    study_id = create(api).json()["id"]
    complete(study_id)
    r = api.get(f"/api/v1/studies/{study_id}/surrogate/?aoa=5&speed=25")
    assert r.status_code == 200, r.json()
    body = r.json()
    assert body["at"] == {"aoa": 5.0, "speed": 25.0}
    cl = body["prediction"]["Cl"]
    assert cl["mean"] == pytest.approx(known(5, 25)["Cl"], abs=0.15)
    assert cl["std"] >= 0
    # at a sampled point the surrogate is sure of itself; far from any, less so
    run = Run.objects.filter(study_id=study_id).first()
    assert run is not None
    at_run = api.get(
        f"/api/v1/studies/{study_id}/surrogate/?aoa={run.parameters['aoa']}"
        f"&speed={run.parameters['speed']}"
    ).json()
    assert at_run["prediction"]["Cl"]["mean"] == pytest.approx(run.objectives["Cl"], abs=0.02)


@pytest.mark.parametrize(
    ("query", "field", "needle"),
    [
        ("aoa=5", "speed", "needs a value for every sampled parameter"),
        ("aoa=5&speed=25&mach=0.1", "mach", "no parameter 'mach'"),
        ("aoa=50&speed=25", "aoa", "outside the sampled range"),
        ("aoa=five&speed=25", "aoa", "not a number"),
        ("aoa=nan&speed=25", "aoa", "not a number"),
        ("aoa=5&speed=", "speed", "needs a value"),
        ("grid.x=nu", "grid.x", "no parameter 'nu'"),
        ("grid.x=aoa&grid.y=aoa", "grid.y", "other than grid.x"),
        ("grid.size=1000", "grid.size", "from 2 to 60"),
        ("grid.size=x", "grid.size", "from 2 to 60"),
    ],
)
def test_bad_surrogate_queries_are_400s_naming_the_field(api, published, query, field, needle):
    study_id = create(api).json()["id"]
    complete(study_id)
    r = api.get(f"/api/v1/studies/{study_id}/surrogate/?{query}")
    assert r.status_code == 400, r.json()
    assert r.json()["field"] == field and needle in r.json()["message"], r.json()


def test_the_surrogate_is_another_tenants_404_and_a_grid_studys_400(api, make_tenant):
    study_id = create(api).json()["id"]
    other = make_tenant()
    client = TenantAPIClient()
    client.force_authenticate(other.user)
    assert client.get(f"/api/v1/studies/{study_id}/surrogate/").status_code == 404
    assert client.get(f"/api/v1/studies/{study_id}/surrogate/?aoa=1&speed=20").status_code == 404
    grid = api.post(
        "/api/v1/studies/",
        {"name": "g", "template": "airfoil2d", "parameters": {"aoa": {"values": [0, 4]}}},
        format="json",
    ).json()
    r = api.get(f"/api/v1/studies/{grid['id']}/surrogate/")
    assert r.status_code == 400 and r.json()["field"] == "combine"


def test_objectives_replaced_without_the_goals_end_the_batches_with_an_error(api, published):
    study_id = create(api).json()["id"]
    complete(study_id)
    Study.objects.filter(pk=study_id).update(objectives={"Cl": {"series": "forceCoeffs.Cl"}})
    assert adaptive_next_batch(study_id=study_id, after=1) == 0
    study = Study.objects.get(pk=study_id)
    assert study.adaptive_end == "error" and study.state == "completed"


def test_batch_auto_sizes_each_batch_to_what_the_tenant_can_run_at_once(api, published):
    # six 1-core runs at once: the tenant's quota is the limit, not the backend's cores
    Quota.objects.filter(tenant=api.tenant).update(max_runs=6, cores=6, memory_gb=64)
    Backend.objects.filter(name="local").update(cores=16, memory_gb=64)
    adaptive = {**SPEC["adaptive"], "batch": "auto", "budget": 30}
    preview = api.post("/api/v1/studies/preview/", {**SPEC, "adaptive": adaptive}, format="json")
    assert preview.status_code == 200, preview.json()
    outline = preview.json()["adaptive"]
    assert outline["batch_auto"] and outline["batch"] == 6 and outline["max_batches"] is None
    study_id = create(api, adaptive=adaptive).json()["id"]
    complete(study_id)
    assert adaptive_next_batch(study_id=study_id, after=1) == 6  # nothing else runs: 6 at once
    # another study of the tenant holds two runs: the next batch is what is left
    other = create(api, name="other", adaptive={**SPEC["adaptive"], "budget": 5}).json()["id"]
    held = Run.objects.filter(study_id=other).order_by("index")[:2]
    Run.objects.filter(pk__in=[r.pk for r in held]).update(state="running")
    complete(study_id)
    assert adaptive_next_batch(study_id=study_id, after=2) == 4
    study = Study.objects.get(pk=study_id)
    assert study.batch_starts == [0, 5, 11]
    body = api.get(f"/api/v1/studies/{study_id}/surrogate/").json()
    batches = [s["batch"] for s in sorted(body["samples"], key=lambda s: s["batch"])]
    assert batches == [1] * 5 + [2] * 6 + [3] * 4
    assert body["progress"]["max_batches"] is None and body["progress"]["batch_size"] is None
    # a bad word is a 400 naming the field
    r = create(api, name="bad", adaptive={**SPEC["adaptive"], "batch": "many"})
    assert r.status_code == 400 and r.json()["field"] == "adaptive.batch", r.json()
    assert "or auto" in r.json()["message"]
