"""The flow-field endpoints: a completed run's final fields and Cp, made by the portal when
first asked for (runs whose folder it reads) or as its agent wrote them into its uploaded
archive; checked parameters; tenants apart."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from orchestration.agent.archive import build_archive
from orchestration.results.fields import ARTIFACT
from orchestration.results.fields.artifact import build
from runs.flow_fields import run_make_fields
from studies.models import Run
from studies.services import study_create

CAVITY = Path("/usr/share/doc/openfoam-examples/examples/incompressible/icoFoam/cavity/cavity")

pytestmark = pytest.mark.skipif(
    not (CAVITY.is_dir() and shutil.which("icoFoam")), reason="OpenFOAM is not installed"
)


@pytest.fixture(scope="module")
def solved_cavity(tmp_path_factory) -> Path:
    """The cavity tutorial solved for real (blockMesh, icoFoam), with its artifact."""
    case = tmp_path_factory.mktemp("cavity") / "case"
    shutil.copytree(CAVITY, case)
    for gz in case.rglob("*.gz"):
        subprocess.run(["gunzip", str(gz)], check=True)
    env = {**os.environ, "WM_PROJECT_DIR": "/usr/share/openfoam"}
    for tool in ("blockMesh", "icoFoam"):
        subprocess.run([tool], cwd=case, env=env, check=True, capture_output=True)
    (case / "windtunnel").mkdir()
    (case / ARTIFACT).write_text(json.dumps(build(str(case), [])))
    return case


def _run(api, case: Path | None, *, state: str = "completed") -> Run:
    study = study_create(
        tenant=api.tenant,
        owner=api.tenant.user,
        spec={"name": "fields", "template": "cavity"},
        submit=True,
    )
    run = Run.objects.get(study=study)
    Run.objects.filter(pk=run.pk).update(
        state=state, attempt=1, results_dir=str(case or ""), results_at=timezone.now()
    )
    run.refresh_from_db()
    return run


def _made(api, run: Run) -> dict:
    """The first look asks for the fields; the job it enqueues, run here; the index then."""
    first = api.get(f"/api/v1/runs/{run.pk}/fields/").json()
    assert first["available"] is False and first["preparing"] is True
    run_make_fields(run_id=str(run.pk), attempt=run.attempt)
    return api.get(f"/api/v1/runs/{run.pk}/fields/").json()


def test_a_completed_runs_fields_are_made_when_first_asked_for_and_served_on_their_grid(
    api, solved_cavity
):
    run = _run(api, solved_cavity)
    assert api.get(f"/api/v1/runs/{run.pk}/fields/data/", {"field": "p"}).status_code == 404
    index = _made(api, run)
    assert index["available"] is True and index["preparing"] is False
    assert index["kind"] == "2d" and index["time"] == "0.5"
    assert [f["name"] for f in index["fields"]] == ["p", "mag(U)"]
    (domain,) = index["regions"]
    assert domain["name"] == "domain" and domain["nx"] * domain["ny"] <= 20_000
    assert index["cp"] is None and any("no Cp" in n for n in index["notes"])
    r = api.get(f"/api/v1/runs/{run.pk}/fields/data/", {"field": "mag(U)"})
    assert r.status_code == 200
    body = r.json()
    assert body["region"] == domain and len(body["values"]) == domain["nx"] * domain["ny"]
    assert 0 <= body["min"] < body["max"] <= 1  # the lid moves at 1 m/s
    top = body["values"][-domain["nx"] // 2]  # the middle of the top row, under the lid
    bottom = body["values"][domain["nx"] // 2]
    assert top > bottom
    assert body["outline"]["x"], "the cavity's walls are drawn over the field"


def test_field_parameters_are_checked(api, solved_cavity):
    run = _run(api, solved_cavity)
    _made(api, run)
    url = f"/api/v1/runs/{run.pk}/fields/data/"
    for params, field, words in [
        ({}, "field", "required"),
        ({"field": "T"}, "field", "one of p, mag(U)"),
        ({"field": "p", "region": "body"}, "region", "one of domain"),
    ]:
        r = api.get(url, params)
        assert r.status_code == 400, params
        error = r.json()
        assert error["code"] == "invalid" and error["field"] == field
        assert words in error["message"]


def test_another_tenant_gets_404_for_a_runs_fields(api, make_tenant, solved_cavity):
    run = _run(api, solved_cavity)
    stranger = make_tenant()
    client = APIClient()
    client.force_authenticate(stranger.user)
    assert client.get(f"/api/v1/runs/{run.pk}/fields/").status_code == 404
    assert client.get(f"/api/v1/runs/{run.pk}/fields/data/", {"field": "p"}).status_code == 404


def test_fields_come_from_the_start_of_an_uploaded_archive(api, solved_cavity, tmp_path):
    archive = tmp_path / "attempt-1.tar.gz"
    build_archive(solved_cavity, archive, max_bytes=64 * 1024 * 1024)
    run = _run(api, None)
    Run.objects.filter(pk=run.pk).update(archive_path=str(archive), results_dir="")
    index = api.get(f"/api/v1/runs/{run.pk}/fields/").json()
    assert index["available"] is True and [f["name"] for f in index["fields"]] == ["p", "mag(U)"]
    r = api.get(f"/api/v1/runs/{run.pk}/fields/data/", {"field": "p", "region": "domain"})
    assert r.status_code == 200 and len(r.json()["values"]) > 100


def test_a_running_run_has_no_fields_and_asks_for_none(api, solved_cavity):
    running = _run(api, solved_cavity, state="running")
    index = api.get(f"/api/v1/runs/{running.pk}/fields/").json()
    assert index["available"] is False and index["preparing"] is False
    assert api.get(f"/api/v1/runs/{running.pk}/fields/data/", {"field": "p"}).status_code == 404


def test_an_artifact_the_case_left_is_not_what_is_served(api, solved_cavity, tmp_path):
    """A case's own windtunnel/fields.json (a tenant could write anything there) is ignored:
    the portal makes the run's artifact itself, from the case's mesh and fields."""
    forged = tmp_path / "case"
    shutil.copytree(solved_cavity, forged)
    artifact = json.loads((forged / ARTIFACT).read_text())
    artifact["fields"]["p"]["values"]["domain"] = ["rm -rf /", 1e308]  # wrong length and type
    artifact["fields"]["forged"] = artifact["fields"].pop("mag(U)")
    (forged / ARTIFACT).write_text(json.dumps(artifact))
    run = _run(api, forged)
    index = _made(api, run)
    assert [f["name"] for f in index["fields"]] == ["p", "mag(U)"]
    r = api.get(f"/api/v1/runs/{run.pk}/fields/data/", {"field": "p"})
    assert r.status_code == 200 and all(
        v is None or isinstance(v, float) for v in r.json()["values"]
    )


def test_a_case_the_converter_cannot_read_says_why_it_has_no_fields(api, tmp_path):
    case = tmp_path / "case"
    (case / "system").mkdir(parents=True)
    (case / "system" / "controlDict").write_text("application icoFoam;\n")
    run = _run(api, case)
    index = _made(api, run)
    assert index["available"] is False and index["preparing"] is False
    assert any("not made" in n for n in index["notes"]), index["notes"]
    # the reason is kept: a second look does not make the run's fields again
    assert api.get(f"/api/v1/runs/{run.pk}/fields/").json()["notes"] == index["notes"]
