"""Runs that go on from their writes, through the HTTP API on the real stack (uvicorn,
Celery, PostgreSQL, Redis, the agent, the local driver, simpleFoam on the tiny airfoil):
a run that hit its iteration limit continued for more, its series going on from the old
ones; restarted from an earlier write with a changed relaxation factor; a selection of a
study's runs continued at once; and what cannot go on refused with the field and the fix."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from windtunnel import Client, ExitCode

from core.testing import wait_for
from e2e.test_client import CAVITY, write_yaml
from orchestration.drivers.local import parse_handle
from studies.models import Run
from tenancy.services import api_token_create
from tenancy.testing import LiveClient

pytestmark = [pytest.mark.solver, pytest.mark.slow]


def _study(live, aoa: list[float], iterations: int) -> dict:
    spec = {
        "name": f"polar {iterations}",
        "template": "airfoil2d",
        "parameters": {"aoa": {"values": aoa}, "iterations": iterations},
    }
    r = live.post("/api/v1/studies/", json=spec)
    assert r.status_code == 201, r.text
    return _ended(live, r.json()["id"])


def _ended(live, study_id: str) -> dict:
    def done():
        body = live.get(f"/api/v1/studies/{study_id}/").json()
        return body if body["state"] in ("completed", "completed_with_failures") else None

    return wait_for(done, timeout=300, what=f"study {study_id} to end")


def _runs(live, study_id: str) -> list[dict]:
    rows = live.get(f"/api/v1/studies/{study_id}/runs/", params={"ordering": "index"}).json()
    return rows["results"]


def _run_ended(live, run_id: str, attempt: int) -> dict:
    """The run once its attempt's agent has reported its end (a cancelled run ends at once;
    its agent's final report, with what its case wrote, follows)."""

    def done():
        body = live.get(f"/api/v1/runs/{run_id}/").json()
        ended = body["state"] in ("completed", "failed", "cancelled") and body["archive_available"]
        return body if ended and body["attempt"] == attempt else None

    return wait_for(done, timeout=300, what=f"run {run_id} attempt {attempt} to end")


def _series(live, run_id: str, name: str) -> tuple[list[float], list[float]]:
    body = live.get(
        f"/api/v1/runs/{run_id}/telemetry/", params={"series": name, "max_points": 100000}
    ).json()
    series = body["series"][name]
    return series["x"], series["y"]


def test_a_run_at_its_limit_goes_on_and_a_restart_changes_a_setting(live) -> None:
    study = _study(live, [4], 30)
    (run,) = _runs(live, study["id"])
    detail = live.get(f"/api/v1/runs/{run['id']}/").json()
    assert detail["continuation"]["writes"] == ["30"], detail["continuation"]
    assert detail["continuation"]["problem"] == ""
    before_x, before_y = _series(live, run["id"], "forceCoeffs.Cl")
    assert before_x[-1] == 30

    r = live.post(f"/api/v1/runs/{run['id']}/continue/", json={"iterations": 20})
    assert r.status_code == 202, r.text
    assert r.json()["state"] == "pending"
    done = _run_ended(live, run["id"], attempt=2)
    assert done["state"] == "completed", done["message"]
    assert done["iterations"] == 50  # the 30 before the write and the 20 added
    assert done["continuation"]["writes"] == ["30", "50"]
    resumed = done["continuation"]["resumed_from"]
    assert (resumed["attempt"], resumed["time"], resumed["iterations"]) == (1, "30", 20)
    assert done["provenance"]["resumed_from"]["time"] == "30"
    xs, ys = _series(live, run["id"], "forceCoeffs.Cl")
    # one series that goes on: the first attempt's points up to the write, then the new ones
    assert xs == [float(i) for i in range(1, 51)], xs
    assert ys[:30] == before_y
    assert done["objectives"]["Cl"] == pytest.approx(sum(ys[-20:]) / 20, rel=1e-9)
    study_now = live.get(f"/api/v1/studies/{study['id']}/").json()
    assert study_now["state"] == "completed"

    # a restart from the earlier write with a lower relaxation factor for U, 10 steps on
    r = live.post(
        f"/api/v1/runs/{run['id']}/continue/",
        json={
            "time": "30",
            "iterations": 10,
            "settings": {"fvSolution": {"relaxationFactors.equations.U": 0.5}},
        },
    )
    assert r.status_code == 202, r.text
    done = _run_ended(live, run["id"], attempt=3)
    assert done["state"] == "completed", done["message"]
    assert done["iterations"] == 40
    resumed = done["continuation"]["resumed_from"]
    assert resumed["settings"] == {"fvSolution": {"relaxationFactors.equations.U": "0.5"}}
    xs2, ys2 = _series(live, run["id"], "forceCoeffs.Cl")
    assert xs2 == [float(i) for i in range(1, 41)] and ys2[:30] == before_y
    assert ys2[30:] != ys[30:40]  # the changed relaxation changed the iterations after it
    assert done["provenance"]["resumed_from"]["settings"] == resumed["settings"]


def test_what_cannot_go_on_is_refused_with_the_field_and_the_fix(live, make_tenant) -> None:
    study = _study(live, [0, 2], 20)
    first, second = _runs(live, study["id"])
    url = f"/api/v1/runs/{first['id']}/continue/"

    never = live.post(url, json={"time": "15", "iterations": 5})
    assert never.status_code == 400 and never.json()["field"] == "time"
    assert "never wrote time 15" in never.json()["message"] and "20" in never.json()["message"]
    no_more = live.post(url, json={})
    assert no_more.status_code == 400 and no_more.json()["field"] == "iterations"
    unsafe = live.post(
        url, json={"iterations": 5, "settings": {"controlDict": {"deltaT": '1; #include "x"'}}}
    )
    assert unsafe.status_code == 400, unsafe.text
    assert unsafe.json()["field"] == "settings.controlDict.deltaT"
    own = live.post(url, json={"iterations": 5, "settings": {"controlDict": {"startTime": 0}}})
    assert own.status_code == 400 and "set by the restart itself" in own.json()["message"]
    other_file = live.post(url, json={"iterations": 5, "settings": {"U": {"x": 1}}})
    assert other_file.status_code == 400 and other_file.json()["field"] == "settings.U"
    negative = live.post(url, json={"iterations": 0})
    assert negative.status_code == 400 and "iterations" in negative.text

    # another tenant sees no such run
    stranger = make_tenant(cores=1, memory_gb=1, max_runs=1)
    token = api_token_create(user=stranger.user)
    with LiveClient(
        base_url=live.stack.url, headers={"Authorization": f"Token {token}"}, timeout=30
    ) as other:
        assert other.post(url, json={"iterations": 5}).status_code == 404
        bulk = other.post(
            f"/api/v1/studies/{study['id']}/runs/continue/",
            json={"runs": [first["id"]], "iterations": 5},
        )
        assert bulk.status_code == 404

    # a selection: both runs go on; then, while they are queued or running, none can
    r = live.post(
        f"/api/v1/studies/{study['id']}/runs/continue/",
        json={"runs": [first["id"], second["id"]], "iterations": 10},
    )
    assert r.status_code == 202, r.text
    assert sorted(r.json()["continued"]) == sorted([first["id"], second["id"]])
    busy = live.post(url, json={"iterations": 5})
    assert busy.status_code in (400, 409), busy.text  # 409 while it has not ended
    for run in (first, second):
        done = _run_ended(live, run["id"], attempt=2)
        assert done["state"] == "completed" and done["iterations"] == 30, done["message"]
    assert _ended(live, study["id"])["state"] == "completed"


def _running_with_points(live, run_id: str) -> None:
    def solving():
        if live.get(f"/api/v1/runs/{run_id}/").json()["state"] != "running":
            return False
        tele = live.get(f"/api/v1/runs/{run_id}/telemetry/", params={"series": ""}).json()
        return "residual.Ux" in tele["available"]

    wait_for(solving, timeout=120, what=f"run {run_id} to be solving")


def test_a_cancelled_run_writes_where_it_stopped_and_goes_on_from_there(live) -> None:
    """Cancelled between two of its case's writes, the solver is asked to write the time
    step it is on before it ends: the run goes on from there, not from the start."""
    spec = {"name": "stopped", "template": "cavity", "parameters": {"cells": 20, "end_time": 50}}
    study = live.post("/api/v1/studies/", json=spec).json()
    (run,) = _runs(live, study["id"])
    _running_with_points(live, run["id"])
    assert live.post(f"/api/v1/runs/{run['id']}/cancel/").status_code == 200
    stopped = _run_ended(live, run["id"], attempt=1)
    assert stopped["state"] == "cancelled"
    writes = stopped["continuation"]["writes"]
    assert len(writes) == 1 and 0 < float(writes[0]) < 10, writes  # 10 s: its first write
    assert stopped["continuation"]["problem"] == ""

    r = live.post(f"/api/v1/runs/{run['id']}/continue/", json={"iterations": 10})
    assert r.status_code == 202, r.text
    done = _run_ended(live, run["id"], attempt=2)
    assert done["state"] == "completed", done["message"]
    step = done["context"]["delta_t"]
    assert done["last_time"] == pytest.approx(float(writes[0]) + 10 * step, rel=1e-6)
    xs, _ys = _series(live, run["id"], "residual.Ux")
    assert xs == sorted(set(xs)) and xs[-1] == pytest.approx(done["last_time"])


def test_a_run_whose_agent_was_lost_goes_on_from_its_last_write(live) -> None:
    """The agent (and its solver) killed after the case's first write: the run is requeued
    and its next attempt starts from that write, ending where it would have."""
    # 2,400 steps of 1,600 cells, a few seconds; its case writes every 0.6 s of flow time
    spec = {"name": "lost", "template": "cavity", "parameters": {"cells": 40, "end_time": 3}}
    study = live.post("/api/v1/studies/", json=spec).json()
    (row,) = _runs(live, study["id"])
    _running_with_points(live, row["id"])
    run = Run.objects.get(pk=row["id"])
    first_write = Path(run.results_dir) / "0.6"
    wait_for(lambda: (first_write / "U").is_file(), timeout=120, what="the case's first write")
    parsed = parse_handle(run.handle)
    assert parsed is not None, run.handle
    os.killpg(parsed[0], signal.SIGKILL)
    done = _run_ended(live, row["id"], attempt=2)
    assert done["state"] == "completed", done["message"]
    resumed = done["provenance"]["resumed_from"]
    assert resumed["attempt"] == 1 and float(resumed["time"]) >= 0.6, resumed
    assert done["last_time"] == pytest.approx(3)
    step = done["context"]["delta_t"]
    assert done["iterations"] == round(3 / step)  # as many as one uninterrupted attempt
    xs, _ys = _series(live, row["id"], "residual.Ux")
    assert xs == sorted(set(xs)) and xs[0] == pytest.approx(step) and xs[-1] == pytest.approx(3)


def test_a_warm_study_starts_its_later_runs_from_their_nearest_neighbours(live) -> None:
    """The first runs start cold; each later one from the nearest completed run's fields
    (named in its provenance), so its solver starts far closer to its solution; a transient
    solver's study is refused warm starts."""
    spec = {
        "name": "warm polar",
        "template": "airfoil2d",
        "warm_start": True,
        "parameters": {"aoa": {"values": [0, 2, 4, 6, 8, 10]}, "iterations": 40},
    }
    r = live.post("/api/v1/studies/", json=spec)
    assert r.status_code == 201, r.text
    _ended(live, r.json()["id"])
    runs = {row["parameters"]["aoa"]: row for row in _runs(live, r.json()["id"])}
    detail = {aoa: live.get(f"/api/v1/runs/{row['id']}/").json() for aoa, row in runs.items()}
    cold = [aoa for aoa, d in detail.items() if d["provenance"]["resumed_from"] is None]
    warm = {aoa: d for aoa, d in detail.items() if d["provenance"]["resumed_from"] is not None}
    # two at a time: the first two start cold, and each next one as soon as cores free up,
    # from the nearest run completed by then (a run handing its cores over is not yet)
    assert len(cold) >= 2 and len(warm) >= 2, (cold, list(warm))
    for aoa, d in warm.items():
        source = d["continuation"]["resumed_from"]["source"]
        assert source in {runs[a]["id"] for a in cold + list(warm) if a != aoa}
        assert d["provenance"]["resumed_from"]["source"] == source
        source_aoa = next(a for a, row in runs.items() if row["id"] == source)
        assert source_aoa < aoa  # a run completed before it started

    def first_residual(run_id: str) -> float:
        _xs, ys = _series(live, run_id, "residual.Ux")
        return ys[0]

    # a run with two completed neighbours on its line starts from their linear blend
    blended = [d for d in warm.values() if d["provenance"]["resumed_from"]["blend"]]
    assert blended, [d["provenance"]["resumed_from"] for d in warm.values()]
    for d in blended:
        assert -2 <= d["provenance"]["resumed_from"]["blend"]["weight"] < 0  # beyond, upward
    coldest = max(first_residual(runs[a]["id"]) for a in cold)
    assert all(first_residual(d["id"]) < 0.1 * coldest for d in warm.values())
    identities = {d["identity"] for d in detail.values()}
    assert len(identities) == 6

    transient = live.post(
        "/api/v1/studies/",
        json={"name": "warm cavity", "template": "cavity", "warm_start": True},
    )
    assert transient.status_code == 400 and transient.json()["field"] == "warm_start"


def test_a_mesh_study_starts_its_finer_levels_mapped_from_the_coarser_ones(live, cli) -> None:
    """Levels of pitzDaily's mesh, two at a time: the first two start cold, the third from
    the nearest completed level, its write mapped onto the new mesh by mapFields (named in
    the provenance), so its solver starts near its solution; the mesh-independence answer
    reads all three."""
    spec = {
        "name": "pitzDaily mesh levels",
        "template": "pitzdaily",
        "warm_start": True,
        "parameters": {"mesh": {"values": [0.3, 0.45, 0.675]}, "iterations": 60},
    }
    r = live.post("/api/v1/studies/", json=spec)
    assert r.status_code == 201, r.text
    assert _ended(live, r.json()["id"])["state"] == "completed"
    runs = {row["parameters"]["mesh"]: row for row in _runs(live, r.json()["id"])}
    detail = {mesh: live.get(f"/api/v1/runs/{row['id']}/").json() for mesh, row in runs.items()}
    mapped = {m: d for m, d in detail.items() if d["provenance"]["resumed_from"] is not None}
    assert list(mapped) == [0.675], {m: d["provenance"]["resumed_from"] for m, d in detail.items()}
    resumed = mapped[0.675]["provenance"]["resumed_from"]
    assert resumed["mapped"] is True and resumed["blend"] is None
    assert resumed["source"] in {runs[0.3]["id"], runs[0.45]["id"]}
    commands = [c["name"] for c in mapped[0.675]["provenance"]["commands"]]
    assert commands[:3] == ["blockMesh", "mapFields", "simpleFoam"], commands

    def first_residual(run_id: str) -> float:
        return _series(live, run_id, "residual.Ux")[1][0]

    # mapped from a solved level, the finer mesh's solver starts far nearer its solution
    coldest = min(first_residual(runs[m]["id"]) for m in (0.3, 0.45))
    assert first_residual(runs[0.675]["id"]) < 0.2 * coldest
    answer = live.get(
        f"/api/v1/studies/{r.json()['id']}/mesh-independence/",
        params={"parameter": "mesh", "dims": 2},
    )
    assert answer.status_code == 200, answer.text
    assert [level["value"] for level in answer.json()["levels"]] == [0.675, 0.45, 0.3]
    body = answer.json()
    assert set(body["objectives"]) | set(body["refused"]) == {"dp_static", "dp_total"}
    # the same answer from the command line: a table (or why an objective has none), and CSV
    study_id = r.json()["id"]
    shown = cli("mesh-independence", study_id, "--parameter", "mesh", "--dims", "2")
    assert shown.returncode == 0, shown.stderr
    assert "Mesh independence over mesh (0.675, 0.45, 0.3)" in shown.stdout
    for name in ("dp_static", "dp_total"):
        assert name in shown.stdout + shown.stderr
    assert cli.json("mesh-independence", study_id, "--parameter", "mesh", "--dims", "2") == body
    csv = cli("mesh-independence", study_id, "--parameter", "mesh", "--csv")
    assert csv.returncode == 0 and csv.stdout.splitlines()[0].startswith("objective,")


def test_ended_runs_continue_from_the_command_line(cli, live, tmp_path):
    """`windtunnel continue RUN... -n N` queues a study's runs again to go on from their
    latest write (a transient case: the end moves by N time steps); a bad --set is a usage
    error, a write the run never made the API's 400 with its message."""
    sub = cli("submit", str(write_yaml(tmp_path / "cavity.yaml", CAVITY)), "--watch", "--json")
    assert sub.returncode == 0, sub.stderr
    study = json.loads(sub.stdout)
    client = Client(cli.env["WINDTUNNEL_URL"], cli.env["WINDTUNNEL_TOKEN"])
    runs = client.study(study["id"]).runs()
    ends = {run.id: run.record.last_time for run in runs}
    assert all(end == pytest.approx(0.05) for end in ends.values()), ends

    done = cli.json("continue", *ends, "--iterations", "4")
    assert sorted(done["continued"]) == sorted(ends) and done["skipped"] == []
    for run in runs:
        wait_for(
            lambda run=run: run.refresh().state == "completed" and run.record.attempt == 2,
            timeout=300,
            what=f"run {run.id} to go on and end",
        )
        # 4 time steps of the run's own deltaT past its write at 0.05
        step = run.record.raw["context"]["delta_t"]  # the run's detail: its rendered values
        assert run.record.last_time == pytest.approx(0.05 + 4 * step)

    bad = cli("continue", runs[0].id, "--set", "deltaT")
    assert bad.returncode == ExitCode.USAGE and "FILE:KEY=VALUE" in bad.stderr
    never = cli("continue", runs[0].id, "--time", "0.033", "-n", "2")
    assert never.returncode == ExitCode.API
    assert "never wrote time 0.033" in never.stderr
