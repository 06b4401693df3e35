"""The study API with the database and catalog real; no runs are started here."""

import pytest

from core.jobs import Job
from studies.models import Run, Study
from studies.tasks import cancel_queued_runs

AIRFOIL = {
    "name": "sweep",
    "template": "airfoil2d",
    "parameters": {"aoa": {"range": [-4, 12, 2]}, "speed": {"values": [20, 26]}},
}


def post(api, path, data):
    return api.post(path, data, format="json")


def test_preview_counts_runs_shows_rows_and_quota_impact_without_creating_anything(api):
    r = post(api, "/api/v1/studies/preview/", AIRFOIL)
    assert r.status_code == 200, r.json()
    body = r.json()
    assert body["run_count"] == 18
    assert body["rows"][0]["parameters"] == {"aoa": -4, "speed": 20}
    assert body["rows"][0]["context"]["Ux"] == pytest.approx(20 * 0.99756, rel=1e-4)
    assert body["quota"]["fits"] is True and body["quota"]["concurrent_runs"] >= 1
    assert "wave" in body["quota"]["summary"]
    assert Study.objects.count() == 0


def test_draft_is_saved_and_launched_later(api):
    r = post(api, "/api/v1/studies/", {**AIRFOIL, "draft": True})
    assert r.status_code == 201, r.json()
    study = r.json()
    assert study["state"] == "draft" and study["run_count"] == 18
    assert Run.objects.count() == 0
    r = api.put(
        f"/api/v1/studies/{study['id']}/",
        {**AIRFOIL, "parameters": {"aoa": {"values": [0, 4]}}},
        format="json",
    )
    assert r.status_code == 200 and r.json()["run_count"] == 2
    r = post(api, f"/api/v1/studies/{study['id']}/submit/", {})
    assert r.status_code == 200 and r.json()["state"] == "submitted"
    assert Run.objects.filter(study_id=study["id"], state="pending").count() == 2
    r = post(api, f"/api/v1/studies/{study['id']}/submit/", {})
    assert r.status_code == 409


@pytest.mark.parametrize(
    ("change", "field", "needle"),
    [
        (
            {"parameters": {"aoa": {"range": [0, 100000, 1]}, "speed": {"range": [1, 100, 1]}}},
            "parameters",
            "makes 10,000,100 runs; a study may have at most 1,000,000",
        ),
        ({"parameters": {"aoa": {"values": []}}}, "parameters.aoa.values", "empty"),
        ({"derived": {"foo": "aoa * bogus"}}, "derived.foo", "unknown name(s) bogus"),
        ({"parameters": {"aoa": {"values": [45]}}}, "parameters.aoa", "above its maximum"),
        (
            {"parameters": {"alpha": {"values": [1]}}},
            "parameters.alpha",
            "has no parameter 'alpha'",
        ),
        ({"template": "nope"}, "template", "unknown template 'nope'"),
        ({"solver": "bashFoam"}, "solver", "unknown solver"),
        ({"resources": {"processes": 64}}, "resources", "quota allows 4 cores"),
        (
            {"objectives": {"Cl": {"series": "forceCoeffs.Cl"}, "LD": {"expr": "Cl / Cx"}}},
            "objectives.LD.expr",
            "unknown name(s) Cx",
        ),
        (
            {"objectives": {"Cl": {"series": "forceCoeffs.Cl", "reduce": "median"}}},
            "objectives.Cl.reduce",
            "must be one of",
        ),
        ({"bogus_key": 1}, "bogus_key", "unknown key"),
        ({"resources": {"processes": 0}}, "resources.processes", "from 1 to 4096, got 0"),
        ({"resources": {"memory_gb": "lots"}}, "resources.memory_gb", "must be a number"),
        ({"prepare": [["rm", "-rf", "/"]]}, "prepare[0][0]", "must be one of blockMesh"),
        (
            {"convergence": {"diverge": {"growth": {"factor": 0.5}}}},
            "convergence.diverge.growth.factor",
            "above 1",
        ),
        ({"name": "   "}, "name", "name is required"),
        ({"parameters": {"aoa": {"linspace": [0, 1]}}}, "parameters.aoa.linspace", "exactly 3"),
        (
            {"objectives": {"A": {"expr": "B + 1"}, "B": {"expr": "A + 1"}}},
            "objectives.A.expr",
            "in a circle (A -> B -> A)",
        ),
        ({"derived": {"huge": "1e308 * 10"}}, "derived.huge", "not a finite number"),
        (
            {"parameters": {"aoa": {"range": [1e20, 3e20, 1e20]}}},
            "parameters.aoa",
            "above its maximum",
        ),
        (
            {
                "combine": "lhs",
                "samples": 4,
                "parameters": {"aoa": {"min": 0, "max": 120}, "speed": 26},
            },
            "parameters.aoa",
            "max: aoa = 120.0 is above its maximum 20",
        ),
    ],
)
def test_bad_specs_answer_400_naming_the_field(api, change, field, needle):
    r = post(api, "/api/v1/studies/", {**AIRFOIL, **change})
    assert r.status_code == 400, r.content
    body = r.json()
    assert needle in body["message"], body
    assert body["field"] == field, body
    assert Study.objects.count() == 0


def test_errors_are_json_with_code_and_message_for_malformed_input(api):
    r = api.post("/api/v1/studies/", "not json", content_type="application/json")
    assert r.status_code == 400 and r.json()["code"] and r.json()["message"]
    r = api.get("/api/v1/studies/not-a-uuid/")
    assert r.status_code == 404 and r.json()["code"] == "not_found"
    r = api.get("/api/v1/runs/00000000-0000-0000-0000-000000000000/telemetry/?max_points=abc")
    assert r.status_code == 404
    r = api.get("/api/v1/no-such-thing/")  # an unknown endpoint answers JSON too
    assert r.status_code == 404 and r.json()["code"] == "not_found", r.content[:200]
    assert "/api/docs/" in r.json()["message"]


def test_another_tenants_objects_answer_404(api, make_tenant):
    from rest_framework.test import APIClient

    study = post(api, "/api/v1/studies/", AIRFOIL).json()
    run = Run.objects.filter(study_id=study["id"]).first()
    assert run is not None
    other = make_tenant()
    intruder = APIClient()
    intruder.force_authenticate(other.user)
    for path in (
        f"/api/v1/studies/{study['id']}/",
        f"/api/v1/studies/{study['id']}/results/",
        f"/api/v1/studies/{study['id']}/results.csv",
        f"/api/v1/runs/{run.id}/",
        f"/api/v1/runs/{run.id}/log/",
    ):
        assert intruder.get(path).status_code == 404, path
    assert intruder.post(f"/api/v1/studies/{study['id']}/cancel/").status_code == 404
    assert intruder.post(f"/api/v1/runs/{run.id}/cancel/").status_code == 404
    assert intruder.get("/api/v1/studies/").json()["count"] == 0
    assert intruder.get("/api/v1/runs/").json()["count"] == 0


def test_unauthenticated_requests_are_refused(db):
    from rest_framework.test import APIClient

    r = APIClient().get("/api/v1/studies/")
    assert r.status_code in (401, 403) and r.json()["code"] == "not_authenticated"


def test_token_login_gives_a_working_token(make_tenant, catalog):
    from rest_framework.test import APIClient

    tenant = make_tenant("acme")
    client = APIClient()
    r = client.post(
        "/api/v1/auth/token/", {"username": "acme-user", "password": "wrong"}, format="json"
    )
    assert r.status_code == 401
    r = client.post(
        "/api/v1/auth/token/", {"username": "acme-user", "password": "pw-acme"}, format="json"
    )
    assert r.status_code == 200 and r.json()["tenant"] == tenant.name
    client.credentials(HTTP_AUTHORIZATION=f"Token {r.json()['token']}")
    assert client.get("/api/v1/me/").json()["tenant"] == "acme"


def test_extend_adds_only_new_points_and_clone_makes_a_draft(api):
    study = post(
        api, "/api/v1/studies/", {**AIRFOIL, "parameters": {"aoa": {"values": [0, 4]}}}
    ).json()
    r = post(
        api,
        f"/api/v1/studies/{study['id']}/extend/",
        {"parameters": {"aoa": {"values": [0, 4, 8, 12]}}},
    )
    assert r.status_code == 200, r.json()
    assert r.json()["run_count"] == 4
    assert sorted(
        r["parameters"]["aoa"]
        for r in Run.objects.filter(study_id=study["id"]).values("parameters")
    ) == [0, 4, 8, 12]
    r = post(
        api, f"/api/v1/studies/{study['id']}/extend/", {"parameters": {"mach": {"values": [1]}}}
    )
    assert r.status_code == 400 and "not new parameters" in r.json()["message"]
    clone = post(api, f"/api/v1/studies/{study['id']}/clone/", {})
    assert clone.status_code == 201 and clone.json()["state"] == "draft"
    assert clone.json()["cloned_from"] == study["id"]
    assert api.delete(f"/api/v1/studies/{clone.json()['id']}/").status_code == 204


def test_extend_with_values_the_study_has_says_so_and_adds_nothing(api):
    """An extension that makes no new run is refused, naming the values already there (not
    a 200 that the page would read as "new runs queued")."""
    study = post(
        api, "/api/v1/studies/", {**AIRFOIL, "parameters": {"aoa": {"values": [0, 4]}}}
    ).json()
    r = post(api, f"/api/v1/studies/{study['id']}/extend/", {"parameters": {"aoa": [4]}})
    assert r.status_code == 400, r.json()
    assert r.json()["field"] == "parameters.aoa"
    assert "nothing new to add" in r.json()["message"] and "aoa 4" in r.json()["message"]
    assert Run.objects.filter(study_id=study["id"]).count() == 2
    assert Study.objects.get(pk=study["id"]).state == study["state"]


def test_a_one_run_study_extends_and_its_spec_keeps_every_run_for_a_clone(api):
    """Only the new values are given; the spec then holds old and new, so a clone has them all."""
    one = {**AIRFOIL, "parameters": {"aoa": {"values": [0]}, "speed": {"values": [20]}}}
    study = post(api, "/api/v1/studies/", one).json()
    r = post(api, f"/api/v1/studies/{study['id']}/extend/", {"parameters": {"aoa": [4]}})
    assert r.status_code == 200, r.json()
    assert r.json()["run_count"] == 2
    assert sorted(Run.objects.filter(study_id=study["id"]).values_list("index", flat=True)) == [
        0,
        1,
    ]
    r = post(
        api,
        f"/api/v1/studies/{study['id']}/extend/",
        {"parameters": {"speed": {"range": [26, 32, 6]}}},
    )
    assert r.status_code == 200 and r.json()["run_count"] == 6, r.json()  # {0, 4} x {20, 26, 32}
    spec = Study.objects.get(pk=study["id"]).spec
    assert spec["parameters"] == {"aoa": {"values": [0, 4]}, "speed": {"values": [20, 26, 32]}}
    clone = post(api, f"/api/v1/studies/{study['id']}/clone/", {}).json()
    assert clone["run_count"] == 6


def test_a_zipped_study_extends_by_tuples_and_a_sampled_one_says_how_to_grow(api):
    zipped = {
        **AIRFOIL,
        "combine": "zip",
        "parameters": {"aoa": [0, 4], "speed": [20, 26]},
    }
    study = post(api, "/api/v1/studies/", zipped).json()
    r = post(
        api,
        f"/api/v1/studies/{study['id']}/extend/",
        {"parameters": {"aoa": [4, 8], "speed": [26, 32]}},
    )
    assert r.status_code == 200 and r.json()["run_count"] == 3, r.json()
    spec = Study.objects.get(pk=study["id"]).spec
    assert spec["parameters"] == {"aoa": {"values": [0, 4, 8]}, "speed": {"values": [20, 26, 32]}}
    sampled = {
        **AIRFOIL,
        "combine": "lhs",
        "samples": 3,
        "parameters": {"aoa": {"min": 0, "max": 8}, "speed": 26},
    }
    study = post(api, "/api/v1/studies/", sampled).json()
    r = post(api, f"/api/v1/studies/{study['id']}/extend/", {"parameters": {"speed": 30}})
    assert r.status_code == 400 and "clone it with more samples" in r.json()["message"]


def test_a_draft_is_checked_when_saved_and_edited(api):
    """Values a run could not take are refused when the draft is saved, not at submission."""
    r = post(api, "/api/v1/studies/", {**AIRFOIL, "draft": True, "parameters": {"aoa": [45]}})
    assert r.status_code == 400 and r.json()["field"] == "parameters.aoa", r.json()
    study = post(api, "/api/v1/studies/", {**AIRFOIL, "draft": True}).json()
    r = api.put(
        f"/api/v1/studies/{study['id']}/",
        {**AIRFOIL, "parameters": {"aoa": [0, 4]}, "derived": {"inv": "1 / (aoa - aoa)"}},
        format="json",
    )
    assert r.status_code == 400 and r.json()["field"] == "derived.inv", r.json()
    assert Study.objects.get(pk=study["id"]).spec["parameters"] == AIRFOIL["parameters"]


def test_a_finished_study_cannot_be_cancelled(api):
    study = post(api, "/api/v1/studies/", AIRFOIL).json()
    Run.objects.filter(study_id=study["id"]).update(state="completed")
    Study.objects.filter(pk=study["id"]).update(state="completed")
    r = post(api, f"/api/v1/studies/{study['id']}/cancel/", {})
    assert r.status_code == 409 and "nothing to cancel" in r.json()["message"], r.json()
    assert Study.objects.get(pk=study["id"]).state == "completed"


def test_cancel_of_a_queued_study_ends_every_run(api, published):
    study = post(api, "/api/v1/studies/", AIRFOIL).json()
    r = post(api, f"/api/v1/studies/{study['id']}/cancel/", {})
    assert r.status_code == 200 and r.json()["state"] == "cancelled"
    # the queued runs are ended by the worker's job (studies/tests/test_cancel.py)
    flips = [a for job, a, _ in published.jobs if job == Job.CANCEL_QUEUED_RUNS]
    cancel_queued_runs(*flips[0])
    assert set(Run.objects.filter(study_id=study["id"]).values_list("state", flat=True)) == {
        "cancelled"
    }


def test_list_endpoints_use_a_constant_number_of_queries(api, django_assert_max_num_queries):
    for i in range(3):
        post(api, "/api/v1/studies/", {**AIRFOIL, "name": f"s{i}"})
    with django_assert_max_num_queries(8):
        r = api.get("/api/v1/studies/")
    assert r.json()["count"] == 3
    with django_assert_max_num_queries(8):
        r = api.get("/api/v1/runs/?state=pending")
    assert r.json()["count"] == 54
    assert r.json()["results"][0]["queue_position"] is not None


def test_quota_endpoint_reports_limits_usage_and_queued_demand(api):
    post(api, "/api/v1/studies/", {**AIRFOIL, "draft": False})
    body = api.get("/api/v1/quota/").json()
    assert body["limits"]["cores"] == 4
    assert body["queued"]["runs"] == 18 and body["usage"]["runs"] == 0


def test_schema_and_health(api):
    assert api.get("/api/schema/").status_code == 200
    assert api.get("/healthz").json()["status"] == "ok"


def test_a_run_whose_files_the_portal_reads_is_archived_on_its_first_download(
    api, make_tenant, tmp_path
):
    """No upload from the agent (results_dir): the archive is built from the run's case on the
    first download, kept for the next, leaves symbolic links out; another tenant gets 404."""
    import io
    import tarfile

    from django.utils import timezone

    from studies.models import Run
    from studies.services import study_create

    study = study_create(
        tenant=api.tenant,
        owner=api.tenant.user,
        spec={"name": "lazy archive", "template": "cavity"},
        submit=True,
    )
    run = Run.objects.get(study=study)
    case = tmp_path / "attempt-1" / "case"
    (case / "system").mkdir(parents=True)
    (case / "system/controlDict").write_text("endTime 1;\n")
    (case / "0.5").mkdir()
    (case / "0.5/U").write_text("internalField uniform (1 0 0);\n")
    (case / "log.icoFoam").write_text("Time = 0.5\nEnd\n")
    (case / "log.secret").symlink_to("/etc/passwd")
    (case / "0.5/p").symlink_to("/etc/hostname")
    Run.objects.filter(pk=run.pk).update(state="running", attempt=1, results_dir=case)
    assert api.get(f"/api/v1/runs/{run.pk}/").json()["archive_available"] is False
    assert api.get(f"/api/v1/runs/{run.pk}/archive/").status_code == 404  # still running
    Run.objects.filter(pk=run.pk).update(state="completed")  # the agent may still write
    assert api.get(f"/api/v1/runs/{run.pk}/").json()["archive_available"] is False
    assert api.get(f"/api/v1/runs/{run.pk}/archive/").status_code == 404
    Run.objects.filter(pk=run.pk).update(results_at=timezone.now())  # its final report
    body = api.get(f"/api/v1/runs/{run.pk}/").json()
    assert body["archive_available"] is True and body["archive_bytes"] is None
    r = api.get(f"/api/v1/runs/{run.pk}/archive/")
    assert r.status_code == 200
    data = b"".join(r)  # streamed (asynchronously under ASGI)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        names = sorted(tar.getnames())
        velocity = tar.extractfile("0.5/U")
        assert velocity is not None
        assert velocity.read() == b"internalField uniform (1 0 0);\n"
    assert names == ["0.5/U", "log.icoFoam", "system/controlDict"]
    assert api.get(f"/api/v1/runs/{run.pk}/").json()["archive_bytes"] == len(data)
    (case / "0.5/U").write_text("changed afterwards\n")  # the kept archive is served again
    again = b"".join(api.get(f"/api/v1/runs/{run.pk}/archive/"))
    assert again == data
    stranger = make_tenant()
    from rest_framework.test import APIClient

    other = APIClient()
    other.force_authenticate(stranger.user)
    assert other.get(f"/api/v1/runs/{run.pk}/archive/").status_code == 404


def test_a_run_larger_than_its_cloud_projects_limits_is_refused_at_submission(api, builds):
    """The OpenStack project allows 4 cores (as last read): a 6-core run could never start
    there, so it is a 400 naming the limit, not a run waiting as cloud_limit for ever."""
    from catalog.models import Backend

    Backend.objects.create(
        name="os-small",
        kind="openstack",
        cores=64,
        memory_gb=256,
        max_nodes=4,
        cloud_limits={"cores": 4, "ram_gb": 64.0, "instances": 10},
    )
    api.tenant.quota.cores = 16
    api.tenant.quota.save()
    spec = {
        "name": "too wide",
        "template": "cavity",
        "backend": "os-small",
        "resources": {"processes": 6, "memory_gb": 2},
    }
    preview = api.post("/api/v1/studies/preview/", spec, format="json").json()
    assert preview["quota"]["fits"] is False and preview["quota"]["concurrent_runs"] == 0
    r = api.post("/api/v1/studies/", spec, format="json")
    assert r.status_code == 400, r.content
    body = r.json()
    assert body["code"] == "quota_exceeded" and body["field"] == "resources"
    assert "the OpenStack project of backend os-small allows 4 cores" in body["message"]
    ok = api.post("/api/v1/studies/", {**spec, "resources": {"processes": 4}}, format="json")
    assert ok.status_code == 201, ok.content
