"""Multi-objective and constrained adaptive studies (adaptive goal pareto, constraints) and the
Pareto front of any study (GET /api/v1/studies/{id}/pareto/).

Runs are not solved here: a batch's runs are set completed with objective values from a known
function, as the ingest would leave them (studies/tests/test_adaptive.py does the same).
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from rich.console import Console
from windtunnel.cli_analysis import front_summary, front_table

from studies.batches import adaptive_next_batch
from studies.models import Run, Study
from studies.state import study_refresh_state
from studies.tests.test_adaptive import SPEC, complete, create, known
from tenancy.testing import TenantAPIClient

PARETO: dict[str, Any] = {
    "goal": "pareto",
    "objectives": ["Cl", "Cd"],
    "direction": {"Cl": "max", "Cd": "min"},
    "initial": 6,
    "batch": 3,
    "budget": 18,
}


def dominated_by_another(values: list[tuple[float, float]], i: int) -> bool:
    """Whether row i (both objectives minimised) is dominated by another row, by hand."""
    a = values[i]
    return any(
        b[0] <= a[0] and b[1] <= a[1] and (b[0] < a[0] or b[1] < a[1])
        for j, b in enumerate(values)
        if j != i
    )


def run_batches(study_id: str, *, upto: int, objectives=known) -> None:
    for after in range(1, upto):
        complete(study_id, objectives=objectives)
        adaptive_next_batch(study_id=study_id, after=after)
    complete(study_id, objectives=objectives)


@pytest.mark.parametrize(
    ("adaptive", "field", "needle"),
    [
        ({**PARETO, "objectives": ["Cl"]}, "adaptive.objectives", "two or three objectives"),
        (
            {**PARETO, "objectives": ["Cl", "Cd", "LD", "Cm"]},
            "adaptive.objectives",
            "no objective 'Cm'",
        ),
        ({**PARETO, "objectives": ["Cl", "Cl"]}, "adaptive.objectives", "named twice"),
        ({**PARETO, "direction": {"Cl": "max"}}, "adaptive.direction", "whether Cd is"),
        (
            {**PARETO, "direction": {"Cl": "max", "Cd": "min", "LD": "max"}},
            "adaptive.direction",
            "'LD'",
        ),
        ({**PARETO, "direction": {"Cl": "up", "Cd": "min"}}, "adaptive.direction", "max or min"),
        (
            {**PARETO, "constraints": {"Cm": {"min": 0.5}}},
            "adaptive.constraints.Cm",
            "no objective 'Cm' to constrain",
        ),
        (
            {**PARETO, "constraints": {"LD": {"min": 30, "max": 10}}},
            "adaptive.constraints.LD",
            "min (30) is above max (10)",
        ),
        ({**PARETO, "constraints": {"LD": {}}}, "adaptive.constraints.LD", "min, max or both"),
        (
            {**SPEC["adaptive"], "constraints": {"LD": {"min": 10}}},
            "adaptive.constraints",
            "for goals optimise and pareto",
        ),
        ({**SPEC["adaptive"], "direction": "min"}, "adaptive.direction", "goal map"),
    ],
)
def test_bad_pareto_specs_are_400s_naming_the_field(api, adaptive, field, needle):
    r = create(api, adaptive=adaptive)
    assert r.status_code == 400, r.json()
    body = r.json()
    assert body["field"] == field, body
    assert needle in body["message"], body
    assert Study.objects.count() == 0


def test_a_pareto_study_grows_its_front_batch_after_batch(api, published):
    study_id = create(api, adaptive=PARETO).json()["id"]
    run_batches(study_id, upto=5)
    assert Run.objects.filter(study_id=study_id).count() == 18
    body = api.get(f"/api/v1/studies/{study_id}/pareto/").json()
    assert body["objectives"] == [
        {"name": "Cl", "direction": "max"},
        {"name": "Cd", "direction": "min"},
    ]
    assert body["completed"] == 18 and body["feasible"] == 18 and body["missing"] == 0
    # the front is exactly the runs no other run beats at both (checked by hand)
    runs = body["runs"]
    values = [(-r["values"]["Cl"], r["values"]["Cd"]) for r in runs]
    for i, run in enumerate(runs):
        assert run["front"] == (not dominated_by_another(values, i)), run
    assert body["front_size"] == sum(r["front"] for r in runs) >= 3
    # the hypervolume after each batch, to one reference point: it never falls, and the
    # batches placed by the surrogate add to what the initial design found
    history = body["history"]
    assert [h["batch"] for h in history] == [1, 2, 3, 4, 5]
    assert [h["runs"] for h in history] == [6, 9, 12, 15, 18]
    shares = [h["hypervolume_share"] for h in history]
    assert all(b >= a for a, b in zip(shares, shares[1:], strict=False))
    assert shares[-1] > shares[0] and shares[-1] == pytest.approx(body["hypervolume_share"])
    assert 0 < body["hypervolume_share"] <= 1
    assert body["progress"]["goal"] == "pareto"
    assert body["progress"]["directions"] == {"Cl": "max", "Cd": "min"}

    # the command line's table: the front's runs along Cl, each with its values
    console = Console(width=120, record=True)
    console.print(front_summary(body))
    console.print(front_table(body))
    text = console.export_text()
    assert f"{body['front_size']} runs on the front of 18 feasible (18 completed)" in text
    assert "Cl ↑" in text and "Cd ↓" in text
    front = sorted((r for r in runs if r["front"]), key=lambda r: r["values"]["Cl"])
    lines = [line.split() for line in text.splitlines() if line.strip()[:1] in "│┃"]
    indexes = [int(cells[1]) for cells in lines if len(cells) > 1 and cells[1].isdigit()]
    assert indexes == [r["index"] for r in front], text


def test_a_constrained_front_keeps_to_the_constraint_and_sends_runs_where_it_holds(api, published):
    # LD ≥ 13 holds in a quarter of the box (near aoa 4 at high speed)
    adaptive = {**PARETO, "constraints": {"LD": {"min": 13}}, "budget": 21}
    study_id = create(api, adaptive=adaptive).json()["id"]
    run_batches(study_id, upto=6)
    runs = list(Run.objects.filter(study_id=study_id).order_by("index"))
    later = runs[6:]
    holds = [r for r in later if r.objectives["LD"] >= 13]
    assert len(holds) >= 0.7 * len(later), [round(r.objectives["LD"], 1) for r in later]
    body = api.get(f"/api/v1/studies/{study_id}/pareto/").json()
    assert body["constraints"] == [{"objective": "LD", "min": 13.0, "max": None}]
    for run in body["runs"]:
        assert run["feasible"] == (run["values"]["LD"] >= 13), run
        assert not run["front"] or run["feasible"], run  # a run breaking it is never on it
    assert body["front_size"] >= 1


def test_a_constrained_optimise_finds_the_best_run_that_keeps_the_constraint(api, published):
    # the largest Cl is at aoa 14, speed 40; with Cd ≤ 0.035 it must stay at a lower angle
    adaptive = {
        "goal": "optimise",
        "objectives": ["Cl"],
        "direction": "max",
        "constraints": {"Cd": {"max": 0.035}},
        "initial": 6,
        "batch": 3,
        "budget": 24,
    }
    study_id = create(api, adaptive=adaptive).json()["id"]
    run_batches(study_id, upto=7)
    feasible = [r for r in Run.objects.filter(study_id=study_id) if r.objectives["Cd"] <= 0.035]
    best = max(r.objectives["Cl"] for r in feasible)
    # the constrained optimum, by a fine grid of the known function
    truth = max(
        v["Cl"]
        for aoa in [i * 0.05 - 4 for i in range(361)]
        for speed in [10 + j * 0.5 for j in range(61)]
        if (v := known(aoa, speed))["Cd"] <= 0.035
    )
    assert best >= truth - 0.05 * abs(truth), (best, truth)
    body = api.get(f"/api/v1/studies/{study_id}/pareto/?objectives=Cl:max,Cd:min").json()
    assert body["constraints"] == []  # objectives asked in the query: no constraint unless asked


def test_the_front_of_any_study_is_asked_with_objectives_and_constraints(api):
    study_id = create(api, adaptive={**SPEC["adaptive"], "budget": 11}).json()["id"]
    complete(study_id)
    r = api.get(f"/api/v1/studies/{study_id}/pareto/")
    assert r.status_code == 400 and r.json()["field"] == "objectives", r.json()
    assert "?objectives=Cd:max,Cl:min" in r.json()["message"]
    r = api.get(
        f"/api/v1/studies/{study_id}/pareto/",
        {"objectives": "LD:max,Cd:min", "constraint": ["Cl>=0.4"]},
    )
    assert r.status_code == 200, r.json()
    body = r.json()
    assert body["constraints"] == [{"objective": "Cl", "min": 0.4, "max": None}]
    assert body["history"] == [] or body["progress"] is None
    for run in body["runs"]:
        assert set(run["values"]) == {"LD", "Cd", "Cl"}
        assert run["feasible"] == (run["values"]["Cl"] >= 0.4)


@pytest.mark.parametrize(
    ("query", "field", "needle"),
    [
        ({"objectives": "Cl:max"}, "objectives", "two or three objectives, not 1"),
        ({"objectives": "Cl:max,Cm:min"}, "objectives", "no objective 'Cm'"),
        ({"objectives": "Cl:max,Cd"}, "objectives", "Cd:max or Cd:min"),
        ({"objectives": "Cl:max,Cl:min"}, "objectives", "named twice"),
        ({"objectives": "Cl:max,Cd:min", "constraint": "Cl>0.5"}, "constraint", "Cl>=0.5"),
        ({"objectives": "Cl:max,Cd:min", "constraint": "Cm>=1"}, "constraint", "'Cm'"),
        ({"objectives": "Cl:max,Cd:min", "constraint": "Cl>=nan"}, "constraint", "not a number"),
    ],
)
def test_bad_front_queries_are_400s_naming_the_parameter(api, query, field, needle):
    study_id = create(api, adaptive={**SPEC["adaptive"], "budget": 11}).json()["id"]
    r = api.get(f"/api/v1/studies/{study_id}/pareto/", query)
    assert r.status_code == 400, r.json()
    assert r.json()["field"] == field and needle in r.json()["message"], r.json()


def test_a_front_before_any_feasible_run_has_no_hypervolume(api):
    study_id = create(api, adaptive=PARETO).json()["id"]
    body = api.get(f"/api/v1/studies/{study_id}/pareto/").json()
    assert body["completed"] == 0 and body["runs"] == [] and body["hypervolume"] is None
    # a run without one of the values is shown, as missing, never on the front
    run = Run.objects.filter(study_id=study_id).earliest("index")
    Run.objects.filter(pk=run.pk).update(state="completed", objectives={"Cl": 0.3})
    study_refresh_state(study_id=study_id)
    body = api.get(f"/api/v1/studies/{study_id}/pareto/").json()
    assert body["missing"] == 1 and body["front_size"] == 0
    (shown,) = body["runs"]
    assert shown["values"] == {"Cl": 0.3, "Cd": None} and not shown["feasible"]


def test_another_tenants_front_is_a_404(api, make_tenant):
    study_id = create(api, adaptive=PARETO).json()["id"]
    client = TenantAPIClient()
    client.force_authenticate(make_tenant().user)
    r = client.get(f"/api/v1/studies/{study_id}/pareto/?objectives=Cl:max,Cd:min")
    assert r.status_code == 404


def test_three_objectives_make_a_front_in_three_dimensions(api, published):
    adaptive = {
        **PARETO,
        "objectives": ["Cl", "Cd", "LD"],
        "direction": {"Cl": "max", "Cd": "min", "LD": "max"},
        "budget": 12,
    }
    study_id = create(api, adaptive=adaptive).json()["id"]
    run_batches(study_id, upto=3)
    body = api.get(f"/api/v1/studies/{study_id}/pareto/").json()
    assert [o["name"] for o in body["objectives"]] == ["Cl", "Cd", "LD"]
    assert body["completed"] == 12 and len(body["history"]) == 3
    assert math.isfinite(body["hypervolume"]) and body["front_size"] >= 2
