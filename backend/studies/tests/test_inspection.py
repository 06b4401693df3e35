"""Case inspection as a user meets it: an uploaded case's solver, series and placeholders
come back with the upload; a study on it names only series the case writes; objectives
edited after the runs are recomputed from the stored series."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from studies.models import Run
from telemetry.ingest import telemetry_ingest

PITZDAILY = Path("/usr/share/doc/openfoam-examples/examples/incompressible/simpleFoam/pitzDaily")
INLET_P = """
    inletP
    {
        type            surfaceFieldValue;
        libs            ("libfieldFunctionObjects.so");
        regionType      patch;
        name            inlet;
        operation       areaAverage;
        fields          (p);
        writeFields     false;
    }
"""


def _pitzdaily_archive() -> bytes:
    """pitzDaily as a new user would change it: the inlet velocity a placeholder and an
    areaAverage of p on the inlet, named inletP, among the controlDict's functions."""
    if not PITZDAILY.is_dir():
        pytest.skip("the OpenFOAM tutorials are not installed")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path in sorted(PITZDAILY.rglob("*")):
            if not path.is_file():
                continue
            data = path.read_bytes()
            rel = path.relative_to(PITZDAILY).as_posix()
            if rel.endswith(".gz"):
                data, rel = gzip.decompress(data), rel[:-3]
            if rel == "0/U":
                data = data.replace(b"uniform (10 0 0)", b"uniform ({{ Uin }} 0 0)", 1)
            if rel == "system/controlDict":
                data = data.replace(b"#includeFunc streamlines", INLET_P.encode(), 1)
            info = tarfile.TarInfo(f"pitzDaily/{rel}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _upload(api) -> dict:
    f = io.BytesIO(_pitzdaily_archive())
    f.name = "pitzDaily.tar.gz"
    r = api.post("/api/v1/uploads/", {"file": f}, format="multipart")
    assert r.status_code == 201, r.json()
    return r.json()


def test_an_upload_says_its_solver_series_placeholders_and_mesh_steps(api):
    inspection = _upload(api)["inspection"]
    assert inspection["solver"] == "simpleFoam"
    assert "inletP.areaAverage(p)" in inspection["series"]
    assert {"residual.p", "residual.Ux", "residual.Uy", "residual.k", "residual.epsilon"} <= set(
        inspection["series"]
    )
    assert "residual.Uz" not in inspection["series"]  # a 2-D case: OpenFOAM solves no Uz
    assert inspection["placeholders"]["0/U"] == [{"name": "Uin", "type": "number", "line": 26}]
    assert inspection["mesh_steps"] == ["blockMesh"]
    assert inspection["errors"] == []


def test_a_study_on_an_upload_without_a_solver_uses_its_controldicts(api):
    up = _upload(api)
    spec = {
        "name": "inlet sweep",
        "case": up["id"],
        "parameters": {"Uin": {"values": [5, 10]}},
        "objectives": {"p_in": {"series": "inletP.areaAverage(p)"}},
        "draft": True,
    }
    r = api.post("/api/v1/studies/", spec, format="json")
    assert r.status_code == 201, r.json()
    assert r.json()["solver"] == "simpleFoam"


def test_a_series_the_case_does_not_write_is_a_400_naming_the_close_match(api):
    up = _upload(api)
    spec = {
        "name": "inlet sweep",
        "case": up["id"],
        "parameters": {"Uin": 10},
        "objectives": {"p_in": {"series": "inletP.p"}},
    }
    r = api.post("/api/v1/studies/", spec, format="json")
    assert r.status_code == 400
    body = r.json()
    assert body["code"] == "unknown_series"
    assert body["field"] == "objectives.p_in.series"
    assert "did you mean inletP.areaAverage(p)" in body["message"]
    assert body["details"]["close_matches"][0] == "inletP.areaAverage(p)"
    # the convergence objective is checked the same way
    spec["objectives"] = {}
    spec["convergence"] = {"converge": {"objective": {"series": "forceCoeffs.Cl"}}}
    r = api.post("/api/v1/studies/", spec, format="json")
    assert r.status_code == 400 and r.json()["field"] == "convergence.converge.objective.series"


def test_a_controldict_that_cannot_be_read_is_an_inspection_error_not_a_500(api):
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:gz") as tar:
        text = b"application simpleFoam;\nfunctions\n{\n    broken { type forces;\n"
        info = tarfile.TarInfo("system/controlDict")
        info.size = len(text)
        tar.addfile(info, io.BytesIO(text))
    data.seek(0)
    data.name = "broken.tar.gz"
    r = api.post("/api/v1/uploads/", {"file": data}, format="multipart")
    assert r.status_code == 201, r.json()
    errors = r.json()["inspection"]["errors"]
    assert errors and errors[0].startswith("system/controlDict line")


def test_a_template_is_inspected_too(api):
    r = api.get("/api/v1/templates/airfoil2d/")
    assert r.status_code == 200
    inspection = r.json()["inspection"]
    assert inspection["solver"] == "simpleFoam"
    assert "forceCoeffs.Cl" in inspection["series"]


def _finished_run_with_series(study_id: str, series: dict) -> Run:
    run = Run.objects.filter(study_id=study_id).order_by("index").first()
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


def test_objectives_edited_after_the_runs_are_recomputed_from_the_stored_series(api):
    up = _upload(api)
    spec = {
        "name": "inlet sweep",
        "case": up["id"],
        "parameters": {"Uin": 10},
        "objectives": {"res_p": {"series": "residual.p", "reduce": "last"}},
    }
    r = api.post("/api/v1/studies/", spec, format="json")
    assert r.status_code == 201, r.json()
    study_id = r.json()["id"]
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
    up = _upload(api)
    spec = {
        "name": "s",
        "case": up["id"],
        "parameters": {"Uin": 10},
        "objectives": {"p_in": {"series": "inletP.areaAverage(p)"}},
    }
    study_id = api.post("/api/v1/studies/", spec, format="json").json()["id"]
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
    up = _upload(api)
    spec = {"name": "s", "case": up["id"], "parameters": {"Uin": 10}}
    study_id = api.post("/api/v1/studies/", spec, format="json").json()["id"]
    other = APIClient()
    other.force_authenticate(make_tenant().user)
    r = other.put(f"/api/v1/studies/{study_id}/objectives/", {"objectives": {}}, format="json")
    assert r.status_code == 404
