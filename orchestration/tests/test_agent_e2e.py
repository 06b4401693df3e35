"""End to end: the LocalDriver starts the real agent on a real OpenFOAM case against a fake portal."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import psutil
import pytest

from orchestration.agent.main import main
from orchestration.agent.sandbox import HOME_MOUNT
from orchestration.drivers.base import RunPhase, RunSpec, Step
from orchestration.drivers.local import REPO_ROOT, LocalDriver, parse_handle
from orchestration.tests.conftest import (
    OPENFOAM_ENV,
    FakePortal,
    make_cavity,
    make_spec,
    needs_openfoam,
    parallel_steps,
    serial_steps,
    wait_until,
)

pytestmark = [pytest.mark.solver, pytest.mark.slow, needs_openfoam]


def _finish(driver: LocalDriver, handle: str) -> int | None:
    assert wait_until(lambda: driver.poll(handle).phase == RunPhase.EXITED), "agent still running"
    return driver.poll(handle).exit_code


def _agent(handle: str) -> psutil.Process:
    parsed = parse_handle(handle)
    assert parsed is not None
    return psutil.Process(parsed[0])


def _descendants(handle: str) -> list[psutil.Process]:
    try:
        return _agent(handle).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _gone(procs: list[psutil.Process]) -> bool:
    for proc in procs:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                return False
        except psutil.NoSuchProcess:
            continue
    return True


def _archive_names(portal: FakePortal) -> list[str]:
    (upload,) = portal.of("archive/")
    assert upload.query == {"attempt": ["1"]}
    with tarfile.open(fileobj=io.BytesIO(upload.body), mode="r:gz") as tar:
        return tar.getnames()


def _increasing(points: list[list[float]]) -> bool:
    xs = [x for x, _ in points]
    return len(xs) >= 2 and all(a < b for a, b in zip(xs, xs[1:], strict=False))


def _solving(portal: FakePortal) -> bool:
    return "residual.p" in portal.series()


def _assert_completed_run(portal: FakePortal, work: Path) -> None:
    states = portal.states()
    assert states[0] == "running" and states[-1] == "completed"
    final = portal.of("state/")[-1].body
    assert final["exit_code"] == 0 and final["attempt"] == 1
    assert (final["iterations"], final["last_time"]) == (5, 0.025)  # the solver's own count
    series = portal.series()
    assert _increasing(series["residual.Ux"]) and _increasing(series["residual.p"])
    assert series["residual.Ux"][0] == [0.005, 1.0]
    assert "cpu.percent" in series and "memory.rss" in series
    assert portal.of("heartbeat/"), "no heartbeat arrived"
    names = _archive_names(portal)
    assert "log.icoFoam" in names and "0.025/U" in names and "system/controlDict" in names
    # the case as it ran: its initial conditions as rendered, and how to rerun it by hand
    assert "0/U" in names and "windtunnel-README.txt" in names
    # what its steps used: their CPU time and the process tree's peak memory
    assert final["cpu_seconds"] > 0 and final["peak_memory_bytes"] > 2 * 1024**2
    # the final order: last telemetry → archive → final state
    endpoints = [c.endpoint for c in portal.calls]
    assert endpoints.index("archive/") > max(
        i for i, e in enumerate(endpoints) if e == "telemetry/"
    )
    assert endpoints[-1] == "state/"
    rendered = (work / "case/constant/transportProperties").read_text()
    assert "nu              0.01;" in rendered or "0.01;" in rendered
    assert "uniform (1.0 0 0)" in (work / "case/0/U").read_text()
    assert any("Solving for Ux" in line for line in portal.log_lines())


def test_serial_cavity_run_reports_running_telemetry_archive_and_completed(
    portal: FakePortal, cavity: Path, tmp_path: Path
) -> None:
    work = tmp_path / "run"
    spec = make_spec(portal=portal, case_dir=cavity, work_dir=work, steps=serial_steps())
    driver = LocalDriver()
    driver.prepare(spec)
    assert (work / "run.json").stat().st_mode & 0o777 == 0o600
    handle = driver.start(spec)
    assert _finish(driver, handle) == 0
    _assert_completed_run(portal, work)
    driver.collect(handle)


def test_parallel_cavity_run_decomposes_solves_with_mpirun_and_reconstructs(
    portal: FakePortal, cavity: Path, tmp_path: Path
) -> None:
    """…with the case's templates rendered by the portal (run.json `rendered`)."""
    from orchestration.case.render import render_files

    work = tmp_path / "run"
    spec = make_spec(
        portal=portal,
        case_dir=cavity,
        work_dir=work,
        steps=parallel_steps(2),
        processes=2,
        decompose={"method": "hierarchical", "subdomains": 2},
        rendered=render_files(cavity, {"nu": 0.01, "lid": 1.0}),
    )
    driver = LocalDriver()
    driver.prepare(spec)
    handle = driver.start(spec)
    assert _finish(driver, handle) == 0
    _assert_completed_run(portal, work)
    assert "2 files rendered by the portal" in (work / "agent.log").read_text()
    assert "numberOfSubdomains 2;" in (work / "case/system/decomposeParDict").read_text()
    assert (work / "case/processor1").is_dir()
    assert "log.reconstructPar" in _archive_names(portal)


def test_failing_solver_reports_failed_with_exit_code_and_fatal_error(
    portal: FakePortal, cavity: Path, tmp_path: Path
) -> None:
    (cavity / "0/p").unlink()
    spec = make_spec(
        portal=portal, case_dir=cavity, work_dir=tmp_path / "run", steps=serial_steps()
    )
    driver = LocalDriver()
    driver.prepare(spec)
    assert _finish(driver, driver.start(spec)) == 0
    final = portal.of("state/")[-1].body
    assert final["state"] == "failed"
    assert final["exit_code"] == 1
    assert final["reason"] == "icoFoam exited with code 1"
    assert final["message"].startswith("FOAM FATAL ERROR: cannot find file")
    assert "log.icoFoam" in _archive_names(portal)


def test_unknown_placeholder_fails_the_preparation_with_the_file_named(
    portal: FakePortal, cavity: Path, tmp_path: Path
) -> None:
    spec = make_spec(
        portal=portal,
        case_dir=cavity,
        work_dir=tmp_path / "run",
        steps=serial_steps(),
        context={"nu": 0.01},
    )
    driver = LocalDriver()
    driver.prepare(spec)
    assert _finish(driver, driver.start(spec)) == 0
    final = portal.of("state/")[-1].body
    assert final["state"] == "failed" and final["reason"] == "case preparation failed"
    assert "0/U line" in final["message"] and "'lid'" in final["message"]


def _long_spec(portal: FakePortal, tmp_path: Path, **extra: Any) -> RunSpec:
    case = make_cavity(tmp_path / "long", end_time=1000, write_interval=100, cells=20)
    return make_spec(
        portal=portal, case_dir=case, work_dir=tmp_path / "run", steps=serial_steps(), **extra
    )


def test_stop_answer_cancels_the_run_and_kills_the_solver_group(
    portal: FakePortal, tmp_path: Path
) -> None:
    def stop_once_solving(call):
        if call.endpoint == "telemetry/" and "residual.p" in call.body["series"]:
            return 200, {"stop": True}
        return None

    spec = _long_spec(portal, tmp_path)
    driver = LocalDriver()
    driver.prepare(spec)
    handle = driver.start(spec)
    assert wait_until(lambda: _solving(portal))
    solver = _descendants(handle)
    assert any(p.name() == "icoFoam" for p in solver)
    portal.responder = stop_once_solving
    assert _finish(driver, handle) == 0
    assert portal.states()[-1] == "cancelled"
    assert portal.of("state/")[-1].body["reason"] == "stopped by the portal"
    assert wait_until(lambda: _gone(solver), timeout=30)
    assert "log.icoFoam" in _archive_names(portal)


def test_a_stop_answer_to_the_running_report_cancels_the_run_before_it_solves(
    portal: FakePortal, tmp_path: Path
) -> None:
    """`running` goes while the case is prepared: its `stop` ends the attempt as cancelled,
    at the latest in its first step (blockMesh here), and no solver is left behind."""
    portal.responder = lambda call: (
        (200, {"stop": True})
        if call.endpoint == "state/" and call.body["state"] == "running"
        else None
    )
    spec = _long_spec(portal, tmp_path)
    driver = LocalDriver()
    driver.prepare(spec)
    handle = driver.start(spec)
    assert _finish(driver, handle) == 0
    assert portal.states() == ["running", "cancelled"]
    assert portal.of("state/")[-1].body["reason"] == "stopped by the portal"
    assert not (tmp_path / "run" / "case" / "log.icoFoam").exists()


def test_stale_attempt_answer_kills_the_solver_and_exits_3_without_more_reports(
    portal: FakePortal, tmp_path: Path
) -> None:
    spec = _long_spec(portal, tmp_path)
    driver = LocalDriver()
    driver.prepare(spec)
    handle = driver.start(spec)
    assert wait_until(lambda: _solving(portal))
    solver = _descendants(handle)
    portal.responder = lambda call: (409, {"code": "stale_attempt"})
    assert _finish(driver, handle) == 3
    assert wait_until(lambda: _gone(solver), timeout=30)
    assert portal.states() == ["running"]
    assert not portal.of("archive/")


def test_local_driver_cancel_terminates_agent_and_solver_and_reports_cancelled(
    portal: FakePortal, tmp_path: Path
) -> None:
    spec = _long_spec(portal, tmp_path)
    driver = LocalDriver(grace=10.0)
    driver.prepare(spec)
    handle = driver.start(spec)
    assert wait_until(lambda: _solving(portal))
    tree = [_agent(handle), *_descendants(handle)]
    driver.cancel(handle)
    assert _gone(tree), [p.pid for p in tree if p.is_running()]
    assert driver.poll(handle).phase == RunPhase.EXITED
    final = portal.of("state/")[-1].body
    assert final["state"] == "cancelled" and final["reason"] == "terminated"


def test_bad_spec_exits_2_and_tells_the_portal(portal: FakePortal, tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text(
        json.dumps(
            {
                "run_id": "r1",
                "attempt": 1,
                "portal_url": portal.url,
                "token": "test-token",
                "steps": [],
            }
        )
    )
    assert main([str(path)]) == 2
    assert portal.of("state/")[-1].body["state"] == "failed"
    assert main([str(tmp_path / "missing.json")]) == 2


def test_unreachable_portal_for_the_final_report_exits_4(tmp_path: Path) -> None:
    case = tmp_path / "case"
    (case / "system").mkdir(parents=True)
    spec = {
        "run_id": "r1",
        "attempt": 1,
        "portal_url": "http://127.0.0.1:9",  # discard port: connection refused
        "token": "t",
        "case_dir": str(case),
        "work_dir": str(tmp_path / "run"),
        "steps": [{"name": "true", "argv": ["true"], "role": "solve"}],
        "final_timeout": 1.0,
    }
    path = tmp_path / "run.json"
    path.write_text(json.dumps(spec))
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    agent = [sys.executable, "-m", "orchestration.agent", str(path)]
    assert subprocess.run(agent, env=env, timeout=120, capture_output=True).returncode == 4


def test_missing_executable_fails_the_step_with_code_127(
    portal: FakePortal, tmp_path: Path
) -> None:
    case = tmp_path / "case"
    (case / "system").mkdir(parents=True)
    spec = make_spec(
        portal=portal,
        case_dir=case,
        work_dir=tmp_path / "run",
        steps=[Step(name="nope", argv=("no-such-solver-xyz",), role="solve")],
    )
    driver = LocalDriver()
    driver.prepare(spec)
    assert _finish(driver, driver.start(spec)) == 0
    final = portal.of("state/")[-1].body
    assert final["state"] == "failed" and final["exit_code"] == 127
    assert "no-such-solver-xyz" in final["message"]


def test_a_case_without_a_mesh_completes_without_post_processing(
    portal: FakePortal, tmp_path: Path
) -> None:
    """A solver that needs no mesh (a stand-in, a 0-D model) leaves nothing for the flow-field
    converter or foamToVTK: neither runs, and the run's message blames neither."""
    case = tmp_path / "case"
    (case / "system").mkdir(parents=True)
    solver = "print('Time = 1'); print('smoothSolver:  Solving for Ux, Initial residual = 0.5, Final residual = 0.01, No Iterations 1')"
    spec = make_spec(
        portal=portal,
        case_dir=case,
        work_dir=tmp_path / "run",
        steps=[Step(name="zeroD", argv=("python3", "-c", solver), role="solve")],
    )
    driver = LocalDriver()
    driver.prepare(spec)
    assert _finish(driver, driver.start(spec)) == 0
    final = portal.of("state/")[-1].body
    assert final["state"] == "completed", final
    assert "flow fields" not in final["message"] and "VTK" not in final["message"]
    work_case = tmp_path / "run" / "case"
    assert not (work_case / "log.windtunnelFields").exists()
    assert not (work_case / "log.foamToVTK").exists()
    assert "post-processing skipped" in (tmp_path / "run" / "agent.log").read_text()


def test_a_meshed_case_is_post_processed(portal: FakePortal, cavity: Path, tmp_path: Path) -> None:
    work = tmp_path / "run"
    spec = make_spec(portal=portal, case_dir=cavity, work_dir=work, steps=serial_steps())
    driver = LocalDriver()
    driver.prepare(spec)
    assert _finish(driver, driver.start(spec)) == 0
    assert portal.states()[-1] == "completed"
    assert (work / "case" / "log.windtunnelFields").exists()
    assert (work / "case" / "log.foamToVTK").exists()
    assert "post-processing skipped" not in (work / "agent.log").read_text()


@pytest.mark.parametrize("allowed", [False, True])
def test_a_solver_sees_no_portal_secrets_and_no_system_operations_unless_allowed(
    portal: FakePortal, cavity: Path, tmp_path: Path, monkeypatch, allowed: bool
) -> None:
    """The worker's environment holds the database URL and secret keys: neither the agent
    nor the tenant's solver gets them. OpenFOAM runs with allowSystemOperations off (no
    systemCall, no #codeStream) unless the deployment allows it."""
    monkeypatch.setenv("DATABASE_URL", "postgres://u:hunter2@db/windtunnel")
    monkeypatch.setenv("WINDTUNNEL_SECRETS_KEY", "fernet-key-hunter2")
    monkeypatch.setenv("SECRET_KEY", "django-hunter2")
    monkeypatch.setenv("FOAM_SIGFPE", "1")  # OpenFOAM's own variables pass
    work = tmp_path / "run"
    steps = [
        Step(name="env", argv=("sh", "-c", "env > env.txt"), role="prepare"),
        *serial_steps(),
    ]
    spec = make_spec(
        portal=portal,
        case_dir=cavity,
        work_dir=work,
        steps=steps,
        allow_system_operations=allowed,
    )
    driver = LocalDriver(fork_server=False)  # the agent starts from this test's environment
    driver.prepare(spec)
    assert _finish(driver, driver.start(spec)) == 0
    seen = (work / "case/env.txt").read_text()
    assert "hunter2" not in seen, seen
    assert "FOAM_SIGFPE=1" in seen and "WM_PROJECT_DIR=" in seen
    header = (work / "case/log.icoFoam").read_text()
    verdict = "Allowing" if allowed else "Disallowing"
    assert f"allowSystemOperations : {verdict} user-supplied system call operations" in header
    # the run's own HOME (the sandbox's mount of it) holds the switch; writable when allowed
    assert f"HOME={HOME_MOUNT}\n" in seen


def _mapped_start(portal: FakePortal, tmp_path: Path, *, rename_lid: bool) -> Path:
    """A 10-cell cavity solved (as another run's sandbox uid would leave it), then a 20-cell
    one started warm from it through the agent; the new run's folder."""
    runs = tmp_path / "runs"
    source = make_cavity(runs / "run-a" / "attempt-1" / "case", end_time=0.025, cells=10)
    for name in ("constant/transportProperties", "0/U"):
        text = (source / name).read_text()
        (source / name).write_text(text.replace("{{ nu }}", "0.01").replace("{{ lid }}", "2"))
    env = {**os.environ, **OPENFOAM_ENV}
    for argv in (["blockMesh"], ["icoFoam"]):
        subprocess.run(argv, cwd=source, env=env, capture_output=True, check=True, timeout=120)
    subprocess.run(["chown", "-R", "2345678:2345678", str(runs / "run-a")], check=True)
    template = make_cavity(tmp_path / "template", cells=20)
    if rename_lid:  # a mesh whose patches are not the source's: mapFields cannot map it
        for name in ("system/blockMeshDict", "0/U", "0/p"):
            text = (template / name).read_text()
            (template / name).write_text(text.replace("movingWall", "lid"))
    work = runs / "run-b" / "attempt-1"
    resume = {"source": "run-a", "attempt": 1, "time": "latest", "map": True, "required": False}
    spec = make_spec(
        portal=portal, case_dir=template, work_dir=work, steps=serial_steps(), resume=resume
    )
    driver = LocalDriver()
    driver.prepare(spec)
    handle = driver.start(spec)
    assert _finish(driver, handle) == 0
    driver.collect(handle)
    assert portal.states()[-1] == "completed"
    return work


def test_a_warm_start_from_another_mesh_maps_the_neighbours_fields_onto_its_own(
    portal: FakePortal, tmp_path: Path
) -> None:
    """The source run's write, on a coarser mesh and another uid's files, is mapped onto the
    new mesh by mapFields in the run's sandbox, after blockMesh and before the solver."""
    work = _mapped_start(portal, tmp_path, rename_lid=False)
    lines = portal.log_lines()
    steps = [line for line in lines if line.startswith("== ") and ": " in line]
    names = [line[3:].split(":")[0] for line in steps if "exit" not in line]
    assert names[:3] == ["blockMesh", "mapFields", "icoFoam"], steps
    assert any("mapFields /source -sourceTime 0.025 -consistent" in line for line in steps)
    start_u = (work / "case/0/U").read_text()
    assert "nonuniform List<vector>" in start_u and "\n400\n(" in start_u  # the 20 x 20 mesh
    # the lid keeps this case's own condition (1 m/s), which mapFields had overwritten with
    # the source's (its lid moved at 2 m/s)
    assert "uniform (1.0 0 0)" in start_u and "(2 0 0)" not in start_u
    assert "mapFields mapped 2 fields of time 0.025 onto this mesh" in "\n".join(lines)
    log = (work / "agent.log").read_text()
    assert "warm start from time 0.025 of run run-a, whose mesh differs" in log


def test_a_mesh_mapfields_cannot_map_starts_cold_and_says_why(
    portal: FakePortal, tmp_path: Path
) -> None:
    work = _mapped_start(portal, tmp_path, rename_lid=True)
    said = "\n".join(portal.log_lines())
    assert "warm start: mapFields failed" in said and "the run starts cold" in said
    start_u = (work / "case/0/U").read_text()
    assert "internalField   uniform (0 0 0);" in start_u  # as the case was rendered
    assert "uniform (1.0 0 0)" in start_u
