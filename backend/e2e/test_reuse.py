"""Reuse and provenance on the real stack (docs/reuse.md, docs/provenance.md): a cavity
study computed by the local backend's agent and real OpenFOAM records its provenance (API
and archive); the same study submitted again is reused whole, at once, without quota."""

from __future__ import annotations

import io
import json
import tarfile

import pytest

from e2e.test_local import finished
from studies.models import Run
from studies.usage import usage_for_tenant

pytestmark = [pytest.mark.solver, pytest.mark.slow]

SPEC = {
    "name": "reused cavity",
    "template": "cavity",
    "parameters": {"lid_velocity": {"values": [1, 2]}, "cells": 10, "end_time": 0.2},
}


def test_a_real_run_records_its_provenance_and_a_repeat_is_reused(live):
    r = live.post("/api/v1/studies/", json=SPEC)
    assert r.status_code == 201, r.text
    first = finished(live, r.json()["id"])
    assert first["state"] == "completed", first
    runs = live.get(f"/api/v1/studies/{first['id']}/runs/").json()["results"]
    run = live.get(f"/api/v1/runs/{runs[0]['id']}/").json()

    p = run["provenance"]
    assert p["identity"]["hash"] == run["identity"] and len(run["identity"]) == 64
    assert p["identity"]["inputs"]["case_digest"].startswith("sha256:")
    assert p["identity"]["inputs"]["solver"] == "icoFoam"
    assert p["identity"]["context"]["lid_velocity"] == run["parameters"]["lid_velocity"]
    assert "OPENFOAM" in p["openfoam_version"] or p["openfoam"].get("version")
    assert p["hosts"] and p["agent_host"]
    assert p["job_id"] == run["backend_handle"] and p["job_id"]
    assert p["backend"]["kind"] == "local"
    assert p["processes"] == 1 and p["decompose"] is None
    assert [c["name"] for c in p["commands"]][:2] == ["blockMesh", "icoFoam"]
    assert all(c["exit_code"] == 0 and c["started_at"] and c["ended_at"] for c in p["commands"])
    assert p["commands"][1]["argv"] == ["icoFoam"]
    assert "PATH" in p["environment"]["allowlist"]["names"]
    assert "WM_PROJECT_DIR" in p["environment"]["names"]
    assert p["started_at"] and p["finished_at"] and p["exit_code"] == 0
    assert p["agent_version"] and p["portal_version"]
    assert p["packages"]  # the local backend: the versions installed on its machine

    # the archive carries the same record, with the portal's half
    archive = live.get(f"/api/v1/runs/{run['id']}/archive/")
    assert archive.status_code == 200
    with tarfile.open(fileobj=io.BytesIO(archive.content), mode="r:gz") as tar:
        member = tar.extractfile("windtunnel-provenance.json")
        assert member is not None
        record = json.load(member)
    assert record["portal"]["identity"] == run["identity"]
    assert (
        record["portal"]["identity_inputs"]["case_digest"]
        == (p["identity"]["inputs"]["case_digest"])
    )
    assert [c["command"] for c in record["commands"]][:2] == ["blockMesh", "icoFoam"]
    assert record["context"]["lid_velocity"] == run["parameters"]["lid_velocity"]
    assert record["agent_version"] == p["agent_version"]

    # the same study again: reused whole at submission, nothing queued, nothing held
    r = live.post("/api/v1/studies/", json={**SPEC, "name": "reused cavity again"})
    assert r.status_code == 201, r.text
    again = finished(live, r.json()["id"], timeout=60)
    assert again["state"] == "completed"
    assert usage_for_tenant(tenant_id=live.tenant.id).cores == 0
    repeated = live.get(f"/api/v1/studies/{again['id']}/runs/").json()["results"]
    assert all(row["reused"] for row in repeated)
    by_index = {row["index"]: row for row in runs}
    for row in repeated:
        assert row["reused_from"] == by_index[row["index"]]["id"]
        assert row["objectives"] == by_index[row["index"]]["objectives"]
        assert row["started_at"] is None  # never started: no core-hours
        tel = live.get(f"/api/v1/runs/{row['id']}/telemetry/?series=residual.p").json()
        assert len(tel["series"]["residual.p"]["y"]) > 3
    assert not Run.objects.filter(study_id=again["id"], admitted_at__isnull=False).exists()
    copy = live.get(f"/api/v1/runs/{repeated[0]['id']}/archive/")
    assert copy.status_code == 200
    source = {row["index"]: row["id"] for row in runs}[repeated[0]["index"]]
    assert copy.content == live.get(f"/api/v1/runs/{source}/archive/").content
    detail = live.get(f"/api/v1/runs/{repeated[0]['id']}/").json()
    assert detail["provenance"]["run"] == source  # the computation that made its results
