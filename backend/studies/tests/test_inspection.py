"""Case inspection as a user meets it: an uploaded case's solver, series and placeholders
come back with the upload; a study on it names only series the case writes."""

from __future__ import annotations

import io
import tarfile

from core.testing import pitzdaily_archive


def upload_pitzdaily(api) -> dict:
    f = io.BytesIO(pitzdaily_archive())
    f.name = "pitzDaily.tar.gz"
    r = api.post("/api/v1/uploads/", {"file": f}, format="multipart")
    assert r.status_code == 201, r.json()
    return r.json()


def test_an_upload_says_its_solver_series_placeholders_and_mesh_steps(api):
    inspection = upload_pitzdaily(api)["inspection"]
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
    up = upload_pitzdaily(api)
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
    up = upload_pitzdaily(api)
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
