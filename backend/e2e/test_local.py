"""Whole studies through the HTTP API on the real stack: uvicorn, Celery, PostgreSQL, Redis,
the run agent, the local driver and real OpenFOAM solvers on tiny cases."""

from __future__ import annotations

import csv
import io
import os
import signal
import tarfile
from pathlib import Path

import psutil
import pytest

from core.testing import wait_for
from orchestration.drivers.local import parse_handle
from studies.models import Run
from studies.usage import usage_for_tenant

pytestmark = [pytest.mark.solver, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def finished(client, study_id, timeout=300):
    def done():
        body = client.get(f"/api/v1/studies/{study_id}/").json()
        return (
            body if body["state"] in ("completed", "completed_with_failures", "cancelled") else None
        )

    return wait_for(done, timeout=timeout, what=f"study {study_id} to finish")


def test_airfoil_study_lift_grows_with_angle_of_attack_and_csv_matches(live):
    spec = {
        "name": "aoa sweep",
        "template": "airfoil2d",
        "parameters": {"aoa": {"values": [0, 4, 8]}, "iterations": 60},
    }
    r = live.post("/api/v1/studies/", json=spec)
    assert r.status_code == 201, r.text
    study = finished(live, r.json()["id"])
    assert study["state"] == "completed", study
    assert study["progress"]["by_state"]["completed"] == 3

    results = live.get(f"/api/v1/studies/{study['id']}/results/").json()
    rows = sorted(results["rows"], key=lambda row: row["parameters"]["aoa"])
    cl = [row["objectives"]["Cl"] for row in rows]
    assert cl[0] < cl[1] < cl[2], cl
    assert 0.05 < cl[1] - cl[0] < 0.6  # about 2π per radian on this coarse mesh
    assert all(
        row["objectives"]["LD"] == pytest.approx(row["objectives"]["Cl"] / row["objectives"]["Cd"])
        for row in rows
    )
    assert all(row["iterations"] and row["iterations"] <= 60 for row in rows)

    csv_text = live.get(f"/api/v1/studies/{study['id']}/results.csv").text
    table = list(csv.DictReader(io.StringIO(csv_text)))
    assert len(table) == 3
    by_run = {row["run"]: row for row in results["rows"]}
    for line in table:
        row = by_run[line["run"]]
        assert float(line["aoa"]) == row["parameters"]["aoa"]
        assert float(line["Cl"]) == pytest.approx(row["objectives"]["Cl"], rel=1e-12)
        assert line["state"] == "completed"
        assert (
            line["iterations"] == "60"
        )  # the parameter; the count of time steps has its own column
        assert 0 < int(line["solver_iterations"]) <= 60

    run_id = rows[2]["run"]
    tele = live.get(
        f"/api/v1/runs/{run_id}/telemetry/",
        params={"series": "residual.Ux,forceCoeffs.Cl", "max_points": 20},
    ).json()
    assert "residual.p" in tele["available"] and "cpu.percent" in tele["available"]
    assert (
        tele["series"]["residual.Ux"]["points"] >= 50
        and tele["series"]["residual.Ux"]["returned"] <= 20
    )
    xs = tele["series"]["forceCoeffs.Cl"]["x"]
    assert xs == sorted(xs)
    # the solver's lines; no post-processing in the run's slot: its flow fields are made
    # when first asked for, its VTK files with its archive
    log = live.get(f"/api/v1/runs/{run_id}/log/", params={"lines": 400}).json()["lines"]
    assert any("Time = " in line for line in log)
    assert not any(line.startswith(("== foamToVTK", "== windtunnelFields")) for line in log)
    fields = wait_for(
        lambda: (f := live.get(f"/api/v1/runs/{run_id}/fields/").json())["available"] and f,
        timeout=60,
        what="the run's flow fields, made on first view",
    )
    assert {"p", "mag(U)"} <= {f["name"] for f in fields["fields"]}
    detail = live.get(f"/api/v1/runs/{run_id}/").json()
    # the portal reads a local run's files itself: the agent uploaded nothing, the archive
    # is made on this first download
    assert detail["archive_available"] and detail["archive_bytes"] is None
    archive = live.get(f"/api/v1/runs/{run_id}/archive/")
    assert archive.status_code == 200
    assert live.get(f"/api/v1/runs/{run_id}/").json()["archive_bytes"] == len(archive.content)
    with tarfile.open(fileobj=io.BytesIO(archive.content), mode="r:gz") as tar:
        names = tar.getnames()
    assert any("postProcessing/forceCoeffs" in n for n in names) and any(
        n.endswith("log.simpleFoam") for n in names
    )
    assert any(n.startswith("VTK/") or "/VTK/" in n for n in names), "ParaView's files"

    # deleting the study deletes its runs' directories and kept archives too
    from django.conf import settings

    kept = [Path(settings.RUNS_DIR) / row["run"] for row in rows]
    kept.append(Path(settings.ARCHIVE_DIR) / run_id)
    assert all(path.is_dir() for path in kept), kept
    assert live.delete(f"/api/v1/studies/{study['id']}/").status_code == 204
    wait_for(lambda: not any(p.exists() for p in kept), timeout=30, what="run files to go")


def _cavity_archive() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        src = ROOT / "templates" / "cavity"
        for sub in ("0", "constant", "system"):
            tar.add(src / sub, arcname=f"mycavity/{sub}")
    return buf.getvalue()


def _max_overlap(runs) -> int:
    """The most runs holding cores at once: from admission until the run ended or gave its
    cores back (released: its solver had exited and it was archiving)."""
    events = []
    for run in runs:
        events += [(run.admitted_at, 1), (run.released_at or run.finished_at, -1)]
    level = peak = 0
    for _, step in sorted(events, key=lambda e: (e[0], e[1])):
        level += step
        peak = max(peak, level)
    return peak


def test_uploaded_case_study_queues_through_a_two_core_quota(live):
    up = live.post(
        "/api/v1/uploads/",
        files={"file": ("mycavity.tar.gz", _cavity_archive(), "application/gzip")},
    )
    assert up.status_code == 201, up.text
    assert "lid_velocity" in up.json()["placeholders"]["0/U"]
    spec = {
        "name": "lid sweep",
        "case": up.json()["id"],
        "solver": "icoFoam",
        "parameters": {
            "lid_velocity": {"linspace": [0.5, 2.0, 8]},
            "cells": 10,
            "end_time": 0.05,
            "nu": 0.01,
            "courant": 0.5,
        },
        "derived": {
            "delta_t": "courant * (0.1 / cells) / lid_velocity",
            "write_interval": "end_time",
        },
        "objectives": {"u_min": {"series": "returnFlow.min(Ux)", "reduce": "last"}},
    }
    preview = live.post("/api/v1/studies/preview/", json=spec).json()
    assert preview["run_count"] == 8 and preview["steps"][0]["argv"] == ["blockMesh"]
    assert preview["quota"]["concurrent_runs"] == 2 and preview["quota"]["waves"] == 4
    study = live.post("/api/v1/studies/", json=spec).json()
    queued = live.get(f"/api/v1/studies/{study['id']}/runs/", params={"state": "pending"}).json()[
        "results"
    ]
    # (a run admitted between the page's read and its positions' has none: the rest wait)
    positions = [r["queue_position"] for r in queued if r["queue_position"] is not None]
    assert positions and min(positions) >= 1
    study = finished(live, study["id"])
    assert study["state"] == "completed", study
    runs = list(Run.objects.filter(study_id=study["id"]))
    assert _max_overlap(runs) == 2
    # each run gave its cores back once its solver had exited, before its final report
    for r in runs:
        assert r.started_at and r.released_at and r.finished_at, r
        assert r.started_at < r.released_at <= r.finished_at
    u_min = [
        r.objectives["u_min"] for r in sorted(runs, key=lambda r: r.parameters["lid_velocity"])
    ]
    assert all(u < 0 for u in u_min) and u_min == sorted(
        u_min, reverse=True
    )  # stronger lid, stronger return flow
    assert usage_for_tenant(tenant_id=live.tenant.id).cores == 0


def test_mpi_run_matches_the_serial_run(live):
    base = {"template": "cavity", "parameters": {"cells": 12, "end_time": 0.1}}
    serial = live.post("/api/v1/studies/", json={**base, "name": "serial"}).json()
    parallel = live.post(
        "/api/v1/studies/", json={**base, "name": "mpi", "resources": {"processes": 2}}
    ).json()
    s, p = finished(live, serial["id"]), finished(live, parallel["id"])
    assert s["state"] == p["state"] == "completed", (s, p)
    rs = live.get(f"/api/v1/studies/{s['id']}/results/").json()["rows"][0]["objectives"]
    rp = live.get(f"/api/v1/studies/{p['id']}/results/").json()["rows"][0]["objectives"]
    assert rp["u_min"] == pytest.approx(rs["u_min"], rel=1e-3)
    run = Run.objects.get(study_id=p["id"])
    archive = live.get(f"/api/v1/runs/{run.id}/archive/").content
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        assert any(n.endswith("log.decomposePar") for n in tar.getnames())


def _long_cavity(live, name):
    spec = {"name": name, "template": "cavity", "parameters": {"cells": 20, "end_time": 50}}
    study = live.post("/api/v1/studies/", json=spec).json()
    run_id = live.get(f"/api/v1/studies/{study['id']}/runs/").json()["results"][0]["id"]
    wait_for(
        lambda: live.get(f"/api/v1/runs/{run_id}/").json()["state"] == "running",
        timeout=60,
        what="run to start",
    )
    wait_for(
        lambda: live.get(f"/api/v1/runs/{run_id}/telemetry/").json()["available"],
        timeout=60,
        what="telemetry",
    )
    return study, Run.objects.get(pk=run_id)


def _processes_of(handle: str) -> list[psutil.Process]:
    parsed = parse_handle(handle)
    assert parsed is not None, handle  # the local driver's own handle
    pid, _ = parsed
    out = []
    for proc in psutil.process_iter(["pid"]):
        try:
            # a zombie is dead already (an orphan the machine's init has not reaped yet)
            if os.getsid(proc.pid) == pid and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc)
        except (ProcessLookupError, PermissionError, psutil.Error):
            pass
    return out


def test_cancel_of_a_running_run_kills_its_processes_and_frees_the_quota(live):
    study, run = _long_cavity(live, "to cancel")
    assert any(
        "icoFoam" in " ".join(p.cmdline()) for p in _processes_of(run.handle) if p.is_running()
    )
    r = live.post(f"/api/v1/runs/{run.id}/cancel/")
    assert r.status_code == 200 and r.json()["state"] == "cancelled"
    wait_for(lambda: not _processes_of(run.handle), timeout=30, what="processes to exit")
    assert usage_for_tenant(tenant_id=live.tenant.id).runs == 0
    wait_for(
        lambda: (
            live.get(f"/api/v1/studies/{study['id']}/").json()["state"] == "completed_with_failures"
        ),
        timeout=30,
        what="the study to end",
    )
    assert live.post(f"/api/v1/runs/{run.id}/cancel/").status_code == 409


def test_an_agent_killed_mid_run_is_requeued_and_finishes_once(live):
    # long enough (2,400 steps of 1,600 cells, a few seconds) to be solving when it is killed
    spec = {"name": "killed", "template": "cavity", "parameters": {"cells": 40, "end_time": 3}}
    study = live.post("/api/v1/studies/", json=spec).json()
    run_id = live.get(f"/api/v1/studies/{study['id']}/runs/").json()["results"][0]["id"]
    wait_for(
        lambda: live.get(f"/api/v1/runs/{run_id}/").json()["state"] == "running",
        timeout=60,
        what="run to start",
    )
    run = Run.objects.get(pk=run_id)
    first = run.handle
    parsed = parse_handle(first)
    assert parsed is not None, first
    pid, _ = parsed
    os.kill(pid, signal.SIGKILL)
    study = finished(live, study["id"], timeout=300)
    run.refresh_from_db()
    assert run.state == "completed" and run.attempt == 2, (run.state, run.attempt, run.message)
    assert not _processes_of(first)  # the first attempt's solver did not live on
    assert usage_for_tenant(tenant_id=live.tenant.id).runs == 0


def test_worker_restart_mid_study_loses_nothing_and_runs_nothing_twice(live):
    spec = {
        "name": "restart",
        "template": "cavity",
        "parameters": {"cells": 10, "end_time": {"values": [0.2, 0.3, 0.4, 0.5, 0.6, 0.7]}},
    }
    study = live.post("/api/v1/studies/", json=spec).json()
    wait_for(
        lambda: Run.objects.filter(study_id=study["id"], state="completed").exists(),
        timeout=120,
        what="a first run to finish",
    )
    live.stack.stop_worker(signal.SIGKILL)
    live.stack.start_worker()
    study = finished(live, study["id"], timeout=300)
    runs = list(Run.objects.filter(study_id=study["id"]))
    assert study["state"] == "completed", [(r.state, r.message) for r in runs]
    assert all(r.state == "completed" for r in runs)
    assert _max_overlap(runs) <= 2
    assert usage_for_tenant(tenant_id=live.tenant.id).runs == 0


def test_a_run_over_its_declared_memory_fails_saying_so_and_the_next_run_goes_on(live):
    """`memory_gb: 0.1` is what the kernel holds the run to: a 700 × 700 cavity mesh takes
    more, and the run ends failed, saying which limit; its neighbour in the study, small
    enough, completes; the run's provenance says the limits held."""
    up = live.post(
        "/api/v1/uploads/",
        files={"file": ("mycavity.tar.gz", _cavity_archive(), "application/gzip")},
    )
    assert up.status_code == 201, up.text
    spec = {
        "name": "over its memory",
        "case": up.json()["id"],
        "solver": "icoFoam",
        "resources": {"memory_gb": 0.1},
        "parameters": {
            "cells": {"values": [700, 10]},
            "lid_velocity": 1,
            "end_time": 0.005,
            "nu": 0.01,
            "delta_t": 0.005,
            "write_interval": 0.005,
        },
    }
    r = live.post("/api/v1/studies/", json=spec)
    assert r.status_code == 201, r.text
    study = finished(live, r.json()["id"])
    runs = {
        row["parameters"]["cells"]: row
        for row in live.get(f"/api/v1/studies/{study['id']}/runs/").json()["results"]
    }
    big = live.get(f"/api/v1/runs/{runs[700]['id']}/").json()
    assert big["state"] == "failed" and big["end_reason"] == "memory_limit", big
    assert "memory limit of 0.1 GB exceeded" in big["message"], big
    assert runs[10]["state"] == "completed", runs[10]
    limits = live.get(f"/api/v1/runs/{runs[10]['id']}/").json()["provenance"]["limits"]
    assert limits["cgroup"] is True and limits["memory_gb"] == pytest.approx(0.1)
    assert 0 < limits["memory_peak_bytes"] <= 0.1 * 1024**3
