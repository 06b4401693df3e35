"""A finished run's resource figures against what the machine showed while it ran, on the
real stack (uvicorn, Celery, PostgreSQL, Redis, the agent, the local driver, OpenFOAM)."""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
import tarfile
import threading
import time

import psutil
import pytest

from core.testing import wait_for
from orchestration.agent.archive import latest_time_dir
from orchestration.drivers.local import parse_handle

pytestmark = [pytest.mark.solver, pytest.mark.slow]


def _finished(client, study_id, timeout=300):
    def done():
        body = client.get(f"/api/v1/studies/{study_id}/").json()
        return body if body["state"] in ("completed", "completed_with_failures") else None

    return wait_for(done, timeout=timeout, what=f"study {study_id} to finish")


def _rss(pid: int) -> int | None:
    """VmRSS of /proc/<pid>/status, in bytes (what `ps` and `top` show)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


class SolverWatch(threading.Thread):
    """Reads the resident memory of every `solver` process under the agent `agent_pid` from
    /proc, from outside the run, every few milliseconds until the agent exits; `peak` is the
    largest sum seen at one read."""

    def __init__(self, agent_pid: int, solver: str) -> None:
        super().__init__(daemon=True)
        self.agent_pid, self.solver = agent_pid, solver
        self.peak, self.reads = 0, 0
        self.pids: set[int] = set()

    def run(self) -> None:
        try:
            agent = psutil.Process(self.agent_pid)
        except psutil.Error:
            return
        while agent.is_running() and agent.status() != psutil.STATUS_ZOMBIE:
            try:
                found = [p.pid for p in agent.children(recursive=True) if p.name() == self.solver]
            except psutil.Error:
                found = []
            total = sum(_rss(pid) or 0 for pid in found)
            if found:
                self.pids.update(found)
                self.reads += 1
                self.peak = max(self.peak, total)
            time.sleep(0.01)


def test_airfoil_run_reports_the_peak_memory_proc_showed_while_it_ran(live):
    spec = {
        "name": "peak memory",
        "template": "airfoil2d",
        "parameters": {"aoa": 4, "iterations": 120},
    }
    study = live.post("/api/v1/studies/", json=spec).json()
    run_id = live.get(f"/api/v1/studies/{study['id']}/runs/").json()["results"][0]["id"]
    handle = wait_for(
        lambda: live.get(f"/api/v1/runs/{run_id}/").json()["backend_handle"],
        timeout=120,
        interval=0.02,
        what="the run's agent to start",
    )
    parsed = parse_handle(handle)
    assert parsed is not None, handle
    watch = SolverWatch(parsed[0], "simpleFoam")
    watch.start()
    study = _finished(live, study["id"])
    watch.join(timeout=60)
    assert study["state"] == "completed", study
    assert watch.reads >= 3 and watch.peak > 20 * 1024**2, (watch.reads, watch.peak)

    run = live.get(f"/api/v1/runs/{run_id}/").json()
    peak, seen = run["peak_memory_bytes"], watch.peak
    cgroup_peak = run["provenance"]["limits"].get("memory_peak_bytes")
    print(
        f"\nsolver RSS from /proc: {seen / 2**20:.1f} MiB over {watch.reads} reads; run's peak "
        f"{peak / 2**20:.1f} MiB; its cgroup's peak "
        f"{(cgroup_peak or 0) / 2**20:.1f} MiB; CPU {run['cpu_seconds']} s; wall "
        f"{run['wall_seconds']} s; core-hours {run['core_hours']}"
    )
    assert abs(peak - seen) <= 0.2 * seen, (peak, seen)
    # the header's figures are the run's, not the last sample's
    assert run["cpu_seconds"] > 0.5
    # one core held: CPU time fits in its wall time (and the agent's share is not in it)
    assert run["cpu_seconds"] <= run["wall_seconds"] * 1.05
    held = run["processes"] * run["wall_seconds"] / 3600
    assert 0 < run["core_hours"] <= held * 1.001
    assert run["core_hours"] >= run["cpu_seconds"] / 3600 * 0.95

    csv_text = live.get(f"/api/v1/studies/{study['id']}/results.csv").text
    (line,) = list(csv.DictReader(io.StringIO(csv_text)))
    assert int(line["peak_memory_bytes"]) == peak
    assert float(line["cpu_seconds"]) == pytest.approx(run["cpu_seconds"], abs=1e-3)
    assert float(line["core_hours"]) == pytest.approx(run["core_hours"], rel=1e-3)
    assert study["core_hours"] == pytest.approx(run["core_hours"], rel=1e-3)
    quota = live.get("/api/v1/quota/").json()
    assert quota["core_hours"]["used"] == pytest.approx(run["core_hours"], abs=0.01)


def test_a_cavity_runs_archive_reruns_by_hand_to_the_same_result(live, tmp_path):
    spec = {
        "name": "rerun by hand",
        "template": "cavity",
        "parameters": {"cells": 10, "end_time": 0.1, "lid_velocity": 2},
    }
    study = _finished(live, live.post("/api/v1/studies/", json=spec).json()["id"])
    assert study["state"] == "completed", study
    run = live.get(f"/api/v1/studies/{study['id']}/runs/").json()["results"][0]
    detail = live.get(f"/api/v1/runs/{run['id']}/").json()
    rerun = detail["provenance"]["rerun"]
    assert rerun[-2:] == ["blockMesh > log.blockMesh 2>&1", "icoFoam > log.icoFoam 2>&1"], rerun
    assert "export WM_PROJECT_DIR=/usr/share/openfoam" in rerun

    archive = live.get(f"/api/v1/runs/{run['id']}/archive/")
    assert archive.status_code == 200
    case = tmp_path / "case"
    with tarfile.open(fileobj=io.BytesIO(archive.content), mode="r:gz") as tar:
        names = set(tar.getnames())
        tar.extractall(case, filter="data")
    # the case as it ran: its dictionaries, the initial conditions as rendered, the logs
    assert {"system/controlDict", "constant/transportProperties", "0/U", "0/p"} <= names
    assert {"log.blockMesh", "log.icoFoam", "windtunnel-README.txt"} <= names
    assert "{{" not in (case / "0/U").read_text() and "2" in (case / "0/U").read_text()
    readme = (case / "windtunnel-README.txt").read_text()
    assert "    icoFoam > log.icoFoam 2>&1" in readme and "blockMesh" in readme
    latest = latest_time_dir(case)
    assert latest is not None
    assert float(latest.name) == pytest.approx(0.1)
    ran = {name: (latest / name).read_bytes() for name in ("U", "p")}
    shutil.rmtree(latest)

    # by hand: the stated lines, in order, from the unpacked folder
    subprocess.run(["bash", "-euc", "\n".join(rerun)], cwd=case, check=True, timeout=600)
    assert "End" in (case / "log.icoFoam").read_text()
    for name, text in ran.items():
        assert (latest / name).read_bytes() == text, f"{latest.name}/{name} differs"
