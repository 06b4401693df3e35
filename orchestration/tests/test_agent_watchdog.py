"""The agent's watchdog: a solver that makes no progress, or a run past its wall time, is
stopped by the agent and reported failed with why."""

from __future__ import annotations

import signal
from pathlib import Path

import psutil
import pytest

from orchestration.agent.spec import SpecError, parse_spec
from orchestration.agent.watchdog import Watchdog
from orchestration.drivers.base import RunPhase
from orchestration.drivers.local import LocalDriver, parse_handle
from orchestration.tests.conftest import (
    Clock,
    FakePortal,
    make_cavity,
    make_spec,
    needs_openfoam,
    serial_steps,
    wait_until,
)


def _solving_dog(clock: Clock, **config: float) -> Watchdog:
    dog = Watchdog(config, clock)
    dog.step_started("icoFoam", solve=True)
    return dog


def test_a_solver_that_stops_counting_time_steps_is_stalled_after_the_floor() -> None:
    clock = Clock()
    dog = _solving_dog(clock, stall_seconds=120, stall_factor=10)
    for step in range(1, 6):
        clock.now += 1.0
        dog.observe(iterations=step, log_bytes=step * 100)
    clock.now += 119
    assert dog.check() == ""
    clock.now += 2
    assert dog.check() == "stalled"
    assert "icoFoam made no progress for 121 s" in dog.message
    assert "after time step 5" in dog.message


def test_log_output_without_new_time_steps_is_not_progress_once_the_solver_counts_them() -> None:
    clock = Clock()
    dog = _solving_dog(clock, stall_seconds=60)
    clock.now += 1
    dog.observe(iterations=1, log_bytes=100)
    for size in range(200, 2000, 100):  # warnings, no new time step
        clock.now += 5
        dog.observe(iterations=1, log_bytes=size)
    assert dog.check() == "stalled"


def test_a_slow_solver_gets_a_limit_from_its_own_pace() -> None:
    """Time steps 30 s apart: with a factor of 10, 5 minutes without one is still fine."""
    clock = Clock()
    dog = _solving_dog(clock, stall_seconds=120, stall_factor=10)
    for step in range(1, 4):
        clock.now += 30
        dog.observe(iterations=step, log_bytes=step)
    assert dog.stall_limit() == pytest.approx(300)
    clock.now += 290
    assert dog.check() == ""
    clock.now += 20
    assert dog.check() == "stalled"
    assert "10 × its longest gap between time steps (30 s)" in dog.message


def test_start_up_before_the_first_time_step_has_its_own_allowance() -> None:
    """Meshing and the solver's start-up: the pace is unknown, output counts as progress."""
    clock = Clock()
    dog = Watchdog({"stall_seconds": 10, "startup_seconds": 300}, clock)
    dog.step_started("snappyHexMesh", solve=False)
    clock.now += 200
    assert dog.check() == ""
    dog.observe(iterations=0, log_bytes=50)  # it wrote something: progress
    clock.now += 299
    assert dog.check() == ""
    clock.now += 2
    assert dog.check() == "stalled"
    assert "snappyHexMesh made no progress for 301 s (no new output" in dog.message
    dog.step_started("icoFoam", solve=True)  # a new step starts its clock again
    clock.now += 299
    assert dog.check() == ""


def test_the_wall_time_limit_counts_from_the_agents_start() -> None:
    clock = Clock()
    dog = Watchdog({"wall_seconds": 60}, clock)
    dog.step_started("icoFoam", solve=True)
    for step in range(1, 60):
        clock.now += 1
        dog.observe(iterations=step, log_bytes=step)
        assert dog.check() == ""
    clock.now += 2
    dog.observe(iterations=61, log_bytes=61)
    assert dog.check() == "wall"
    assert "over the 60 s wall-time limit" in dog.message


def test_run_json_watchdog_must_hold_positive_numbers(tmp_path: Path) -> None:
    base = {
        "run_id": "r",
        "attempt": 1,
        "portal_url": "http://x",
        "token": "t",
        "case_dir": "/c",
        "work_dir": "/w",
        "steps": [{"name": "icoFoam", "argv": ["icoFoam"]}],
    }
    spec = parse_spec({**base, "watchdog": {"stall_seconds": 5, "wall_seconds": None}})
    assert spec.watchdog == {"stall_seconds": 5, "wall_seconds": None}
    with pytest.raises(SpecError, match=r"watchdog.stall_seconds must be a positive number"):
        parse_spec({**base, "watchdog": {"stall_seconds": -1}})


# --- the real agent and solver ---------------------------------------------------------


def _solver(handle: str) -> psutil.Process | None:
    parsed = parse_handle(handle)
    assert parsed is not None
    try:
        children = psutil.Process(parsed[0]).children(recursive=True)
    except psutil.NoSuchProcess:
        return None
    return next((p for p in children if p.name() == "icoFoam"), None)


@pytest.mark.solver
@pytest.mark.slow
@needs_openfoam
def test_a_solver_stopped_with_sigstop_ends_stalled_with_how_long_it_made_no_progress(
    portal: FakePortal, tmp_path: Path
) -> None:
    case = make_cavity(tmp_path / "long", end_time=1000, write_interval=100, cells=20)
    spec = make_spec(
        portal=portal,
        case_dir=case,
        work_dir=tmp_path / "run",
        steps=serial_steps(),
        watchdog={"stall_seconds": 2, "stall_factor": 10},
    )
    driver = LocalDriver()
    driver.prepare(spec)
    handle = driver.start(spec)
    assert wait_until(lambda: "residual.p" in portal.series())
    solver = _solver(handle)
    assert solver is not None
    solver.send_signal(signal.SIGSTOP)
    assert wait_until(lambda: driver.poll(handle).phase == RunPhase.EXITED)
    assert driver.poll(handle).exit_code == 0
    final = portal.of("state/")[-1].body
    assert (final["state"], final["reason"]) == ("failed", "stalled")
    assert "icoFoam made no progress for " in final["message"]
    assert "after time step" in final["message"]
    assert any("watchdog: icoFoam made no progress" in line for line in portal.log_lines())
    assert wait_until(lambda: not solver.is_running() or solver.status() == "zombie", 30)
    driver.collect(handle)


@pytest.mark.solver
@pytest.mark.slow
@needs_openfoam
def test_a_run_past_its_wall_time_is_stopped_by_the_agent(
    portal: FakePortal, tmp_path: Path
) -> None:
    case = make_cavity(tmp_path / "long", end_time=1000, write_interval=100, cells=20)
    spec = make_spec(
        portal=portal,
        case_dir=case,
        work_dir=tmp_path / "run",
        steps=serial_steps(),
        watchdog={"wall_seconds": 3},
    )
    driver = LocalDriver()
    driver.prepare(spec)
    handle = driver.start(spec)
    assert wait_until(lambda: driver.poll(handle).phase == RunPhase.EXITED)
    final = portal.of("state/")[-1].body
    assert (final["state"], final["reason"]) == ("failed", "max_wall_time")
    assert "over the 3 s wall-time limit" in final["message"]
    driver.collect(handle)
