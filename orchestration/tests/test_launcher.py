"""The local driver's fork server: agents forked from a warm interpreter, exit codes kept,
a dead launcher replaced, and the plain start when it is switched off."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import psutil

from orchestration.drivers.base import RunPhase, Step
from orchestration.drivers.local import LocalDriver, parse_handle
from orchestration.tests.conftest import FakePortal, make_spec, wait_until


def _case(tmp_path: Path) -> Path:
    case = tmp_path / "case-src"
    (case / "system").mkdir(parents=True, exist_ok=True)
    (case / "system" / "controlDict").write_text("application echo;\n")
    return case


def _run(driver: LocalDriver, portal: FakePortal, tmp_path: Path, name: str, argv: tuple[str, ...]):
    spec = make_spec(
        portal=portal,
        case_dir=_case(tmp_path),
        work_dir=tmp_path / name,
        steps=[Step(name="step", argv=argv, role="solve")],
    )
    driver.prepare(spec)
    handle = driver.start(spec)
    parsed = parse_handle(handle)
    assert parsed is not None
    return handle, parsed[0], tmp_path / name


def _parent_cmdline(pid: int) -> str:
    return " ".join(psutil.Process(psutil.Process(pid).ppid()).cmdline())


def _finish(driver: LocalDriver, handle: str) -> int | None:
    assert wait_until(lambda: driver.poll(handle).phase == RunPhase.EXITED, timeout=60)
    return driver.poll(handle).exit_code


def test_agents_fork_from_the_launcher_and_report_their_exit_code(
    portal: FakePortal, tmp_path: Path
) -> None:
    driver = LocalDriver()
    handle, pid, work = _run(driver, portal, tmp_path, "ok", ("sh", "-c", "sleep 0.5; echo hi"))
    assert "orchestration.drivers.launcher" in _parent_cmdline(pid)
    assert os.getsid(pid) == pid  # its own session: a driver can signal the whole group
    assert _finish(driver, handle) == 0
    assert portal.states() == ["running", "completed"]
    assert "reported completed" in (work / "agent.log").read_text()

    # a failing step: the agent still exits 0 (it reported "failed"); a bad spec exits 2
    handle, _, _ = _run(driver, portal, tmp_path, "fails", ("sh", "-c", "exit 3"))
    assert _finish(driver, handle) == 0
    assert portal.states()[-1] == "failed"
    (tmp_path / "bad").mkdir()
    bad = make_spec(portal=portal, case_dir=_case(tmp_path), work_dir=tmp_path / "bad", steps=[])
    driver.prepare(bad)
    (tmp_path / "bad" / "run.json").write_text("{not json")
    assert _finish(driver, driver.start(bad)) == 2


def test_a_killed_launcher_is_replaced_and_running_agents_live_on(
    portal: FakePortal, tmp_path: Path
) -> None:
    driver = LocalDriver()
    handle, pid, _ = _run(driver, portal, tmp_path, "long", ("sleep", "3"))
    launcher = psutil.Process(psutil.Process(pid).ppid())
    launcher.send_signal(signal.SIGKILL)
    launcher.wait(timeout=10)
    assert driver.poll(handle).phase == RunPhase.RUNNING  # the agent did not die with it
    handle2, pid2, _ = _run(driver, portal, tmp_path, "next", ("true",))
    assert psutil.Process(pid2).ppid() != launcher.pid
    assert _finish(driver, handle2) == 0
    assert _finish(driver, handle) in (0, None)  # orphaned: its exit code may be unknown
    assert wait_until(lambda: portal.states().count("completed") == 2, timeout=30)


def test_without_the_fork_server_the_agent_is_a_plain_child(
    portal: FakePortal, tmp_path: Path
) -> None:
    driver = LocalDriver(fork_server=False)
    handle, pid, _ = _run(driver, portal, tmp_path, "plain", ("true",))
    assert psutil.Process(pid).ppid() == os.getpid()
    assert _finish(driver, handle) == 0
    assert portal.states() == ["running", "completed"]
