"""A new user's own case end to end on the real stack: pitzDaily with a placeholder for the
inlet velocity and an areaAverage of p named inletP. The upload's inspection names the
solver and the series; a study naming neither solver nor anything but that series runs
with simpleFoam and its objective fills the plot; objectives edited afterwards are
recomputed from the stored series."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

import pytest

from core.testing import wait_for

pytestmark = [pytest.mark.solver, pytest.mark.slow]
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


def _archive() -> bytes:
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
                data = (
                    data.replace(b"#includeFunc streamlines", INLET_P.encode(), 1)
                    .replace(b"endTime         2000;", b"endTime         25;")
                    .replace(b"writeInterval   100;", b"writeInterval   25;")
                )
            info = tarfile.TarInfo(f"pitzDaily/{rel}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_pitzdaily_with_an_inlet_pressure_function_object_fills_the_plot(live):
    up = live.post(
        "/api/v1/uploads/", files={"file": ("pitzDaily.tar.gz", _archive(), "application/gzip")}
    )
    assert up.status_code == 201, up.text
    inspection = up.json()["inspection"]
    assert inspection["solver"] == "simpleFoam"
    assert "inletP.areaAverage(p)" in inspection["series"]

    spec = {
        "name": "inlet pressure",
        "case": up.json()["id"],
        "parameters": {"Uin": {"values": [5, 10]}},
        "objectives": {"p_in": {"series": "inletP.areaAverage(p)", "reduce": "last"}},
    }
    r = live.post("/api/v1/studies/", json=spec)
    assert r.status_code == 201, r.text
    study_id = r.json()["id"]
    assert r.json()["solver"] == "simpleFoam"

    def done():
        body = live.get(f"/api/v1/studies/{study_id}/").json()
        return body if body["state"] in ("completed", "completed_with_failures") else None

    study = wait_for(done, timeout=600, what="the pitzDaily study to finish")
    assert study["state"] == "completed", study
    plot = live.get(
        f"/api/v1/studies/{study_id}/plot/", params={"x": "param.Uin", "y": "objective.p_in"}
    ).json()
    assert plot["total"] == 2
    by_u = dict(zip(plot["points"]["x"], plot["points"]["y"], strict=True))
    assert by_u[10] > by_u[5] > 0  # a faster inlet needs more pressure to push it through

    # objectives after the fact: the peak inlet pressure, from the series already stored
    r = live.put(
        f"/api/v1/studies/{study_id}/objectives/",
        json={
            "objectives": {
                "p_in": {"series": "inletP.areaAverage(p)", "reduce": "last"},
                "p_peak": {"series": "inletP.areaAverage(p)", "reduce": "max"},
            }
        },
    )
    assert r.status_code == 200, r.text
    rows = live.get(f"/api/v1/studies/{study_id}/results/").json()["rows"]
    for row in rows:
        assert row["objectives"]["p_peak"] >= row["objectives"]["p_in"] > 0
