"""An ended run's trust evidence (telemetry.convergence.trust_of) and objectives, as the run
API shows them, match the API's schema (and so the web UI's generated client)."""

from __future__ import annotations

from studies.models import Run
from studies.tests.test_api_schema import SWEEP, api_schema, assert_matches
from telemetry.convergence import trust_of


def test_an_ended_runs_trust_evidence_and_objectives_match_the_schema(api):
    openapi = api_schema()
    study = api.post("/api/v1/studies/", SWEEP, format="json").json()
    run = Run.objects.filter(study_id=study["id"]).first()
    assert run is not None
    trust, detail = trust_of(
        state="completed",
        end_reason="success",
        solver_converged=False,
        final_residuals={"p": 1e-5, "Ux": None},
        drifts={"Cl": 1e-4},
        iterations=500,
    )
    Run.objects.filter(pk=run.pk).update(
        state="completed", trust=trust, trust_detail=detail, objectives={"Cl": 0.41, "Cd": None}
    )
    detail_json = api.get(f"/api/v1/runs/{run.pk}/").json()
    assert detail_json["trust_detail"]["basis"] == "diverged"  # a NaN residual says so
    assert_matches(openapi, "RunDetail", detail_json)
    telemetry = api.get(f"/api/v1/runs/{run.pk}/telemetry/").json()
    assert_matches(openapi, "Telemetry", telemetry)
