"""A new user's own case end to end on the real stack: pitzDaily with a placeholder for the
inlet velocity and an areaAverage of p named inletP. The upload's inspection names the
solver and the series; a study naming neither solver nor anything but that series runs
with simpleFoam and its objective fills the plot; objectives edited afterwards are
recomputed from the stored series."""

from __future__ import annotations

import pytest

from core.testing import pitzdaily_archive, wait_for

pytestmark = [pytest.mark.solver, pytest.mark.slow]


def test_pitzdaily_with_an_inlet_pressure_function_object_fills_the_plot(live):
    up = live.post(
        "/api/v1/uploads/",
        files={"file": ("pitzDaily.tar.gz", pitzdaily_archive(end_time=25), "application/gzip")},
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
