"""Only a run that completed has results: a run cancelled, failed or stopped at a limit shows
no objective in the API, the results and results.csv; what its partial series give is kept
apart as partial. And a mean_last objective that oscillates makes its run unsteady."""

from __future__ import annotations

import csv
import importlib
import io
import json
import math

import pytest
from django.db import connection
from django.utils import timezone

from runs.services import run_report_end
from studies.models import Run
from studies.tests.test_inspection import upload_pitzdaily
from telemetry.ingest import telemetry_ingest

P_IN = {"series": "inletP.areaAverage(p)"}
OBJECTIVES = {"p_in": P_IN, "twice": {"expr": "2 * p_in"}}


def _study(api, objectives: dict, trust: dict | None = None) -> str:
    up = upload_pitzdaily(api)
    spec = {"name": "inlet", "case": up["id"], "parameters": {"Uin": 10}, "objectives": objectives}
    if trust is not None:
        spec["trust"] = trust
    r = api.post("/api/v1/studies/", spec, format="json")
    assert r.status_code == 201, r.json()
    return r.json()["id"]


def _running_run_with_series(study_id: str, series: dict) -> Run:
    run = Run.objects.filter(study_id=study_id).order_by("index")[0]
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(
        state="running", attempt=1, admitted_at=now, started_at=now, heartbeat_at=now
    )
    run.refresh_from_db()
    telemetry_ingest(run=run, attempt=1, series=series)
    return run


def _end(run: Run, state: str, reason: str = "") -> Run:
    """The agent's final report, as the ingest API applies it."""
    run_report_end(run=run, attempt=1, state=state, backend_end=None, reason=reason)
    run.refresh_from_db()
    return run


def _csv_rows(api, study_id: str) -> list[dict[str, str]]:
    text = b"".join(api.get(f"/api/v1/studies/{study_id}/results.csv").streaming_content)
    return list(csv.DictReader(io.StringIO(text.decode())))


SERIES = {
    "residual.p": [[1, 1.0], [2, 0.1]],
    "inletP.areaAverage(p)": [[1, 30.0], [2, 20.0]],
}


@pytest.mark.parametrize(
    ("state", "reason"),
    [("cancelled", "cancelled_by_user"), ("failed", "exit_code"), ("failed", "max_wall_time")],
)
def test_a_run_that_did_not_complete_has_no_objectives_only_partial_ones(api, state, reason):
    study_id = _study(api, OBJECTIVES)
    run = _end(_running_run_with_series(study_id, SERIES), state, reason)
    assert (run.state, run.end_reason) == (state, reason)
    assert run.objectives == {"p_in": None, "twice": None}
    assert run.partial_objectives == {"p_in": 20.0, "twice": 40.0}
    assert run.trust == ""

    detail = api.get(f"/api/v1/runs/{run.pk}/").json()
    assert detail["objectives"] == {"p_in": None, "twice": None}
    assert detail["partial_objectives"] == {"p_in": 20.0, "twice": 40.0}
    listed = api.get(f"/api/v1/studies/{study_id}/runs/").json()["results"][0]
    assert listed["objectives"] == {"p_in": None, "twice": None}
    results = api.get(f"/api/v1/studies/{study_id}/results/")
    rows = json.loads(b"".join(results.streaming_content))["rows"]
    assert rows[0]["objectives"] == {"p_in": None, "twice": None}
    assert rows[0]["partial_objectives"] == {"p_in": 20.0, "twice": 40.0}
    (line,) = _csv_rows(api, study_id)
    assert (line["p_in"], line["twice"]) == ("", "")
    assert (line["partial.p_in"], line["partial.twice"]) == ("20.0", "40.0")
    # the objective plot has no point for it
    plot = api.get(f"/api/v1/studies/{study_id}/plot/", {"x": "param.Uin", "y": "objective.p_in"})
    assert plot.status_code == 200, plot.json()
    assert plot.json()["total"] == 0


def test_a_run_that_completed_has_its_objectives_and_no_partial_ones(api):
    study_id = _study(api, OBJECTIVES)
    run = _end(_running_run_with_series(study_id, SERIES), "completed")
    assert run.objectives == {"p_in": 20.0, "twice": 40.0}
    assert run.partial_objectives == {}
    (line,) = _csv_rows(api, study_id)
    assert (line["p_in"], line["partial.p_in"]) == ("20.0", "")


def test_a_run_cancelled_by_the_portal_moves_its_values_to_partial_when_its_agent_reports(api):
    study_id = _study(api, OBJECTIVES)
    run = _running_run_with_series(study_id, SERIES)
    r = api.post(f"/api/v1/runs/{run.pk}/cancel/")
    assert r.status_code == 200 and r.json()["objectives"] == {}
    # the agent's last word after the cancel: the run stays cancelled, its values are partial
    run = _end(run, "cancelled", "cancelled_by_user")
    assert run.state == "cancelled"
    assert run.objectives == {"p_in": None, "twice": None}
    assert run.partial_objectives == {"p_in": 20.0, "twice": 40.0}


def test_already_ended_incomplete_runs_have_their_objectives_moved_to_partial(api):
    study_id = _study(api, OBJECTIVES)
    runs = list(Run.objects.filter(study_id=study_id))
    assert len(runs) == 1
    run = runs[0]
    values = {"p_in": 7.458, "twice": 14.916}
    Run.objects.filter(pk=run.pk).update(state="cancelled", end_reason="cancelled_by_user")
    Run.objects.filter(pk=run.pk).update(objectives=values, partial_objectives={})
    done = _study(api, OBJECTIVES)
    Run.objects.filter(study_id=done).update(
        state="completed", end_reason="success", objectives=values
    )
    migration = importlib.import_module(
        "studies.migrations.0023_run_partial_objectives_and_unsteady_trust"
    )
    with connection.cursor() as cur:
        cur.execute(migration.ENDED_INCOMPLETE)
    run.refresh_from_db()
    assert run.objectives == {"p_in": None, "twice": None}
    assert run.partial_objectives == values
    completed = Run.objects.get(study_id=done)
    assert (completed.objectives, completed.partial_objectives) == (values, {})


def _swinging(mean: float, amplitude: float, n: int = 40) -> list[list[float]]:
    return [[i + 1, mean + amplitude * math.sin(i * 1.3)] for i in range(n)]


def test_an_oscillating_averaged_objective_makes_its_run_unsteady_with_its_swing(api):
    objectives = {"Cl": {"series": "inletP.areaAverage(p)", "reduce": "mean_last", "n": 20}}
    study_id = _study(api, objectives)
    series = {"residual.p": [[1, 1.0], [40, 0.01]], "inletP.areaAverage(p)": _swinging(1.21, 0.18)}
    run = _end(_running_run_with_series(study_id, series), "completed")
    assert run.trust == "unsteady"
    swing = run.trust_detail["oscillation"]["Cl"]
    assert swing["oscillating"] and swing["window"] == 20
    assert swing["mean"] == pytest.approx(run.objectives["Cl"])
    assert 0.15 < swing["amplitude"] <= 0.18
    assert run.trust_detail["steady_trust"] == "iteration_limit"
    assert "oscillating" in run.trust_detail["why"] and "Cl" in run.trust_detail["why"]
    (line,) = _csv_rows(api, study_id)
    assert line["trust"] == "unsteady"
    assert float(line["amplitude.Cl"]) == pytest.approx(swing["amplitude"])

    # the study's trust rules set the tolerance: a swing of ~15 % within 20 % is steady enough
    url = f"/api/v1/studies/{study_id}/objectives/"
    r = api.put(url, {"objectives": objectives, "trust": {"oscillation_below": 0.2}}, format="json")
    assert r.status_code == 200, r.json()
    run.refresh_from_db()
    # and only that rule: the residual judgement stays as it was (iteration limit)
    assert run.trust == "iteration_limit"
    assert run.trust_detail["oscillation"]["Cl"]["oscillating"] is False
    (line,) = _csv_rows(api, study_id)
    assert line["amplitude.Cl"] == ""


@pytest.mark.parametrize(
    "values",
    [
        [1.0 + 0.5 * i / 40 for i in range(40)],  # a steady climb: drift, not a swing
        [1.21 + 1e-4 * math.sin(i * 1.3) for i in range(40)],  # a ripple within 2 %
        [1e-5 * math.sin(i * 1.3) for i in range(40)],  # a ripple about 0, below the floor
    ],
    ids=["drift", "ripple", "ripple-about-zero"],
)
def test_an_averaged_objective_that_does_not_swing_leaves_the_run_steady(api, values):
    objectives = {"Cl": {"series": "inletP.areaAverage(p)", "reduce": "mean_last", "n": 20}}
    study_id = _study(api, objectives)
    series = {
        "residual.p": [[1, 1.0], [40, 0.01]],
        "inletP.areaAverage(p)": [[i + 1, v] for i, v in enumerate(values)],
    }
    run = _end(_running_run_with_series(study_id, series), "completed")
    assert run.trust == "iteration_limit"
    assert run.trust_detail["oscillation"]["Cl"]["oscillating"] is False


def test_adding_an_objective_keeps_the_trust_rules_and_flags_as_they_were(api):
    study_id = _study(api, {"p_in": P_IN})
    run = _end(_running_run_with_series(study_id, SERIES), "completed")
    assert run.trust == "iteration_limit"
    before = api.get(f"/api/v1/studies/{study_id}/").json()["spec"]
    url = f"/api/v1/studies/{study_id}/objectives/"
    added = {"p_in": P_IN, "p_max": {"series": "inletP.areaAverage(p)", "reduce": "max"}}
    r = api.put(url, {"objectives": added}, format="json")
    assert r.status_code == 200, r.json()
    assert "trust" not in r.json()["spec"] and "trust" not in before
    run.refresh_from_db()
    assert run.trust == "iteration_limit"
    assert run.objectives == {"p_in": 20.0, "p_max": 30.0}
