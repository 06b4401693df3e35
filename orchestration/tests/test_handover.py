"""A run's cores handed to the next run on the same host: no gap between them, never two at once."""

from __future__ import annotations

import os
import re
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest

from orchestration import nofollow
from orchestration.agent.handover import LOCK_NAME, Baton, Countdown, times_of, wait_for
from orchestration.drivers.base import RunPhase
from orchestration.drivers.local import LocalDriver
from orchestration.tests.conftest import (
    Clock,
    FakePortal,
    make_cavity,
    make_spec,
    needs_openfoam,
    serial_steps,
    wait_until,
)


def test_the_countdown_hands_over_once_the_foreseen_rest_is_within_the_lead() -> None:
    clock = Clock()
    countdown = Countdown(10.0, lead=0.5, clock=clock)
    assert not countdown.due(None)  # no time step printed yet
    assert not countdown.due(1.0)  # the first one sets the start of the pace
    clock.now += 1.0
    assert not countdown.due(2.0)  # 1 s a unit of time: 8 s to go
    clock.now += 7.0
    assert not countdown.due(9.0)  # 1 s to go
    clock.now += 0.6
    assert countdown.due(9.6)  # 0.4 s to go


def test_the_countdown_waits_for_enough_progress_before_it_trusts_the_pace() -> None:
    clock = Clock()
    countdown = Countdown(100.0, lead=0.5, clock=clock)
    countdown.due(0.0)
    clock.now += 0.001
    assert not countdown.due(5.0)  # a fast start says little: 5 % done
    clock.now += 10.0
    assert countdown.due(100.0)  # at the end time: due whatever the pace


def test_the_countdown_from_the_start_time_hands_a_short_step_over_at_its_first_line() -> None:
    clock = Clock()
    countdown = Countdown(0.5, start_time=0.0, lead=0.5, clock=clock)
    clock.now += 0.1
    assert countdown.due(0.1)  # 0.1 s for a fifth: the rest takes 0.4 s


def test_the_end_is_read_only_when_the_control_dict_gives_a_plain_one(tmp_path: Path) -> None:
    system = tmp_path / "system"
    system.mkdir()
    control = system / "controlDict"
    fd = nofollow.open_dir(str(tmp_path))
    try:
        control.write_text("startFrom startTime;\nstartTime 0;\nstopAt endTime;\nendTime   0.5;\n")
        assert times_of(fd) == (0.0, 0.5)
        control.write_text("startFrom latestTime;\nstartTime 0;\nendTime 2e-3;\n")
        assert times_of(fd) == (None, 0.002)  # it starts where the last run stopped
        control.write_text("stopAt writeNow;\nendTime 0.5;\n")
        assert times_of(fd) is None  # the run ends elsewhere
        control.write_text("endTime $finalTime;\n")
        assert times_of(fd) is None  # a macro: unforeseeable here
        control.write_text("#ifeq $x 1\nendTime 1;\n#else\nendTime 2;\n#endif\n")
        assert times_of(fd) is None
        control.unlink()
        control.symlink_to("/etc/passwd")
        assert times_of(fd) is None  # a link is never followed
    finally:
        os.close(fd)


def test_a_waiting_run_starts_when_the_lock_goes_and_not_before(tmp_path: Path) -> None:
    baton = Baton(str(tmp_path))
    assert baton.held
    waited: list[float] = []
    done: list[str] = []
    released_at: list[float] = []

    def waiter() -> None:
        done.append(
            wait_for(
                [str(tmp_path / LOCK_NAME), str(tmp_path / "gone" / LOCK_NAME)],
                should_stop=lambda: "",
                on_wait=lambda: waited.append(time.monotonic()),
            )
        )
        done.append(str(time.monotonic()))

    thread = threading.Thread(target=waiter)
    thread.start()
    time.sleep(0.3)
    assert waited and not done  # still waiting while the lock is held
    released_at.append(time.monotonic())
    baton.release()
    thread.join(timeout=5)
    assert done[0] == ""
    assert float(done[1]) - released_at[0] < 0.2  # woken by the release, not by a poll
    baton.release()  # a second release is harmless


def test_a_run_stopped_while_it_waits_stops_waiting(tmp_path: Path) -> None:
    baton = Baton(str(tmp_path))
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    answer = wait_for(
        [str(tmp_path / LOCK_NAME)],
        should_stop=lambda: "stopped by the portal" if stop.is_set() else "",
        on_wait=lambda: None,
    )
    assert answer == "stopped by the portal"
    assert baton.held
    baton.release()


def test_a_free_or_missing_lock_costs_no_wait(tmp_path: Path) -> None:
    Baton(str(tmp_path)).release()
    waits: list[int] = []
    assert (
        wait_for(
            [str(tmp_path / LOCK_NAME), str(tmp_path / "nothing")],
            should_stop=lambda: "never",
            on_wait=lambda: waits.append(1),
        )
        == ""
    )
    assert not waits


_BLOCKMESH = re.compile(r"^(\S+) agent: step blockMesh: ")


def _stamp(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%f").timestamp()


@pytest.mark.solver
@pytest.mark.slow
@needs_openfoam
def test_the_next_run_starts_its_first_step_as_the_last_one_ends(tmp_path: Path) -> None:
    """Run A announces `finishing` before its solver ends; run B, started then with A's lock in
    its `after`, prepares and waits, and its blockMesh starts after A's icoFoam has ended."""
    cavity = make_cavity(tmp_path / "template", end_time=5.0, write_interval=1000, cells=20)
    portals = [FakePortal(), FakePortal()]
    for fake in portals:
        fake.thread.start()
    driver = LocalDriver(fork_server=False)
    work_a, work_b = tmp_path / "a", tmp_path / "b"
    try:
        spec_a = make_spec(
            portal=portals[0],
            case_dir=cavity,
            work_dir=work_a,
            steps=serial_steps(),
            telemetry_interval=2.0,
            handover=2.0,  # A's solver takes seconds: B starts well before it ends
        )
        driver.prepare(spec_a)
        handle_a = driver.start(spec_a)

        def finishing() -> bool:
            return any(c.body.get("phase") == "finishing" for c in portals[0].of("heartbeat/"))

        deadline = time.monotonic() + 120
        while not finishing() and time.monotonic() < deadline:
            time.sleep(0.005)
        assert finishing(), "run A never handed its cores over"
        assert driver.poll(handle_a).phase == RunPhase.RUNNING  # its solver still runs
        spec_b = make_spec(
            portal=portals[1],
            case_dir=cavity,
            work_dir=work_b,
            steps=serial_steps(),
            handover=2.0,
            after=(str(work_a),),
        )
        driver.prepare(spec_b)
        handle_b = driver.start(spec_b)
        for handle in (handle_a, handle_b):

            def exited(handle: str = handle) -> bool:
                return driver.poll(handle).phase == RunPhase.EXITED

            assert wait_until(exited)
            assert driver.poll(handle).exit_code == 0
    finally:
        for fake in portals:
            fake.server.shutdown()
            fake.server.server_close()
    assert [c.body["state"] for c in portals[1].of("state/")][-1] == "completed"
    # A's solver wrote its log's last line just before it ended; B's agent logs (to the
    # millisecond) when it starts its first step
    a_ended = (work_a / "case" / "log.icoFoam").stat().st_mtime
    log_b = (work_b / "agent.log").read_text().splitlines()
    b_began = next(_stamp(m[1]) for m in map(_BLOCKMESH.match, log_b) if m)
    assert b_began + 0.001 >= a_ended  # never beside it
    assert b_began - a_ended < 0.5  # and without the portal's round trips between them
    assert any("waiting for the cores" in line for line in log_b)
