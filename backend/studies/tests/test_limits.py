"""Limits on what a tenant may pile up: runs in the queue (the quota's max_queued_runs, at
submission and extension) and the size of a study's texts (the spec's schema)."""

from __future__ import annotations

from quotas.services import quota_set
from studies.models import Run, Study

SWEEP = {  # 18 runs
    "name": "sweep",
    "template": "airfoil2d",
    "parameters": {"aoa": {"range": [-4, 12, 2]}, "speed": {"values": [20, 26]}},
}


def post(api, path, data):
    return api.post(path, data, format="json")


def test_a_submission_past_the_cap_on_queued_runs_is_a_400_naming_the_limit(api):
    quota_set(tenant=api.tenant, limits={"max_queued_runs": 20})
    first = post(api, "/api/v1/studies/", SWEEP)
    assert first.status_code == 201, first.json()

    r = post(api, "/api/v1/studies/", {**SWEEP, "name": "again"})
    assert r.status_code == 400
    body = r.json()
    assert body["code"] == "quota_exceeded" and body["field"] == "parameters"
    assert "adds 18 run(s) to the 18 your tenant has queued or running" in body["message"]
    assert "allows 20 queued or running runs" in body["message"]
    assert body["details"] == {"max_queued_runs": 20, "active": 18, "adding": 18}
    assert Run.objects.filter(tenant=api.tenant).count() == 18
    assert not Study.objects.filter(name="again").exists()

    # the wizard's preview says it before submission
    preview = post(api, "/api/v1/studies/preview/", SWEEP).json()["quota"]
    assert preview["fits"] is True  # a single run does
    assert "allows 20 queued or running runs" in preview["problem"]
    assert preview["limits"]["queued_runs"] == 20 and preview["in_use"]["queued_runs"] == 18

    # a draft is no queue: saved, then refused at submission
    draft = post(api, "/api/v1/studies/", {**SWEEP, "name": "later", "draft": True})
    assert draft.status_code == 201
    r = post(api, f"/api/v1/studies/{draft.json()['id']}/submit/", {})
    assert r.status_code == 400 and r.json()["code"] == "quota_exceeded"


def test_an_extension_past_the_cap_on_queued_runs_is_refused_and_ended_runs_free_room(api):
    quota_set(tenant=api.tenant, limits={"max_queued_runs": 20})
    study = post(api, "/api/v1/studies/", SWEEP).json()
    extend = f"/api/v1/studies/{study['id']}/extend/"
    r = post(api, extend, {"parameters": {"aoa": {"values": [14]}}})  # 2 more: 20
    assert r.status_code == 200, r.json()
    r = post(api, extend, {"parameters": {"aoa": {"values": [16]}}})  # 2 more: 22
    assert r.status_code == 400
    assert "adds 2 run(s) to the 20 your tenant has queued or running" in r.json()["message"]
    Run.objects.filter(study_id=study["id"], index__lt=2).update(state="completed")
    r = post(api, extend, {"parameters": {"aoa": {"values": [16]}}})
    assert r.status_code == 200, r.json()
    assert Run.objects.filter(study_id=study["id"]).count() == 22


def test_the_quota_panel_shows_the_cap_on_queued_runs(api):
    quota_set(tenant=api.tenant, limits={"max_queued_runs": 500})
    assert api.get("/api/v1/quota/").json()["limits"]["queued_runs"] == 500


def test_a_huge_description_or_name_is_a_400_naming_the_limit(api):
    r = post(api, "/api/v1/studies/", {**SWEEP, "description": "x" * 5_000_000})
    assert r.status_code == 400
    assert r.json()["field"] == "description"
    assert "at most 10000 characters" in r.json()["message"]
    r = post(api, "/api/v1/studies/", {**SWEEP, "name": "x" * 201})
    assert r.status_code == 400
    assert r.json()["field"] == "name" and "up to 200 characters" in r.json()["message"]
    assert not Study.objects.exists()


def test_a_study_past_the_per_study_limit_is_a_400_naming_the_count_and_the_limit(api, settings):
    # the default allows a million runs: 1,001 x 1,000 is one grid too many, refused from
    # the count alone (nothing is expanded, nothing is saved)
    assert settings.WINDTUNNEL["MAX_RUNS_PER_STUDY"] == 1_000_000
    huge = {
        "name": "too big",
        "template": "airfoil2d",
        "parameters": {
            "aoa": {"linspace": [-4, 12, 1001]},
            "speed": {"linspace": [10, 40, 1000]},
        },
    }
    r = post(api, "/api/v1/studies/", huge)
    assert r.status_code == 400, r.content
    body = r.json()
    assert body["code"] == "too_many_runs" and body["field"] == "parameters"
    assert "1,001,000 runs" in body["message"] and "at most 1,000,000" in body["message"]
    assert not Study.objects.filter(name="too big").exists()
    # an admin's lower limit is the one named
    settings.WINDTUNNEL = {**settings.WINDTUNNEL, "MAX_RUNS_PER_STUDY": 10}
    r = post(api, "/api/v1/studies/", SWEEP)
    assert r.status_code == 400 and "makes 18 runs" in r.json()["message"]
    assert "at most 10." in r.json()["message"]
