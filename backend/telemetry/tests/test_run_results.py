"""A finished run's results recomputed from the series it stored: objectives edited or added
after the fact on a study whose runs are over (studies.objectives_edit), with the same
checks as the study spec."""

from __future__ import annotations

from django.utils import timezone
from rest_framework.test import APIClient

from studies.models import Run
from studies.tests.test_inspection import upload_pitzdaily
from telemetry.ingest import telemetry_ingest


def _finished_run_with_series(study_id: str, series: dict) -> Run:
    run = Run.objects.filter(study_id=study_id).order_by("index")[0]
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(
        state="running", attempt=1, admitted_at=now, started_at=now, heartbeat_at=now
    )
    run.refresh_from_db()
    telemetry_ingest(run=run, attempt=1, series=series)
    Run.objects.filter(pk=run.pk).update(
        state="completed", end_reason="success", finished_at=now, results_at=now
    )
    run.refresh_from_db()
    return run


def _study(api, objectives: dict | None = None, name: str = "s") -> str:
    """A one-run study of the pitzDaily upload with these objectives; its id."""
    up = upload_pitzdaily(api)
    spec = {"name": name, "case": up["id"], "parameters": {"Uin": 10}}
    if objectives is not None:
        spec["objectives"] = objectives
    r = api.post("/api/v1/studies/", spec, format="json")
    assert r.status_code == 201, r.json()
    return r.json()["id"]


def test_objectives_edited_after_the_runs_are_recomputed_from_the_stored_series(api):
    study_id = _study(api, {"res_p": {"series": "residual.p", "reduce": "last"}}, "inlet sweep")
    run = _finished_run_with_series(
        study_id,
        {
            "residual.p": [[1, 1.0], [2, 0.1], [3, 0.01]],
            "inletP.areaAverage(p)": [[1, 30.0], [2, 20.0], [3, 12.0]],
        },
    )
    r = api.put(
        f"/api/v1/studies/{study_id}/objectives/",
        {
            "objectives": {
                "p_in": {"series": "inletP.areaAverage(p)", "reduce": "max"},
                "p_last": {"series": "inletP.areaAverage(p)"},
                "ratio": {"expr": "p_in / p_last"},
            }
        },
        format="json",
    )
    assert r.status_code == 200, r.json()
    assert set(r.json()["objectives"]) == {"p_in", "p_last", "ratio"}
    run.refresh_from_db()
    assert run.objectives == {"p_in": 30.0, "p_last": 12.0, "ratio": 2.5}
    csv = b"".join(api.get(f"/api/v1/studies/{study_id}/results.csv").streaming_content)
    header, row = csv.decode().splitlines()[:2]
    assert "p_in" in header.split(",") and "res_p" not in header.split(",")
    assert "30.0" in row.split(",")


def test_an_objectives_edit_with_a_wrong_series_is_a_400_and_changes_nothing(api):
    study_id = _study(api, {"p_in": {"series": "inletP.areaAverage(p)"}})
    url = f"/api/v1/studies/{study_id}/objectives/"
    r = api.put(url, {"objectives": {"p_in": {"series": "inletp.areaAverage(p)"}}}, format="json")
    assert r.status_code == 400
    assert r.json()["details"]["close_matches"][0] == "inletP.areaAverage(p)"
    r = api.put(
        url, {"objectives": {"p_in": {"series": "residual.p", "reduce": "mean"}}}, format="json"
    )
    assert r.status_code == 400 and "reduce" in r.json()["message"]
    r = api.put(url, {"objectives": "p"}, format="json")
    assert r.status_code == 400 and r.json()["field"] == "objectives"
    assert api.get(f"/api/v1/studies/{study_id}/").json()["objectives"] == {
        "p_in": {"series": "inletP.areaAverage(p)", "reduce": "last"}
    }


def test_another_tenants_study_objectives_are_a_404(api, make_tenant):
    study_id = _study(api)
    other = APIClient()
    other.force_authenticate(make_tenant().user)
    r = other.put(f"/api/v1/studies/{study_id}/objectives/", {"objectives": {}}, format="json")
    assert r.status_code == 404


def test_trust_rules_edited_after_the_runs_recompute_the_trust_flag(api):
    objectives = {"p_in": {"series": "inletP.areaAverage(p)"}}
    study_id = _study(api, objectives)
    series = {
        "residual.p": [[1, 1.0], [2, 0.02], [3, 0.005]],  # above the default 1e-3
        "inletP.areaAverage(p)": [[1, 12.0], [2, 12.0], [3, 12.0]],
    }
    run = _finished_run_with_series(study_id, series)
    url = f"/api/v1/studies/{study_id}/objectives/"
    r = api.put(url, {"objectives": objectives}, format="json")
    assert r.status_code == 200, r.json()
    run.refresh_from_db()
    # no rule of the study's own: it ran to its iteration limit, whatever its residuals
    assert (run.trust, run.trust_detail["basis"]) == ("iteration_limit", "iteration_limit")
    for below, trust, why in [
        (0.001, "not_converged", "not all below 0.001"),
        (0.01, "converged", "below 0.01"),
    ]:
        rules = {"residuals_below": below}
        r = api.put(url, {"objectives": objectives, "trust": rules}, format="json")
        assert r.status_code == 200, r.json()
        run.refresh_from_db()
        assert (run.trust, run.trust_detail["basis"]) == (trust, "trust_rule")
        assert why in run.trust_detail["why"]
    assert r.json()["spec"]["trust"] == {"residuals_below": 0.01}
    r = api.put(url, {"objectives": {}, "trust": {"residuals_below": -1}}, format="json")
    assert r.status_code == 400 and "trust.residuals_below" in r.json()["field"]
