"""The local driver: the run agent as a detached process group on this machine."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import psutil

import orchestration
from orchestration.agent.cgroups import limits_problem
from orchestration.agent.handover import LOCK_NAME as HANDOVER_LOCK
from orchestration.drivers.base import (
    Capabilities,
    DriverBase,
    DriverContext,
    DriverError,
    RunPhase,
    RunSpec,
    RunStatus,
    register,
    write_private_json,
)
from orchestration.environment import agent_environment

__all__ = ["LocalDriver", "format_handle", "parse_handle"]

REPO_ROOT = Path(orchestration.__file__).resolve().parent.parent
ROOT_MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
_CREATE_TIME_TOLERANCE = 0.05
_log = logging.getLogger(__name__)

# Agents this interpreter started, so any LocalDriver instance can reap them and read their
# exit code (the backend may build a new driver object for every call).
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}
_CHILDREN_LOCK = threading.Lock()
# Agents the fork server started for this interpreter: pid → the file their exit code lands in
_LAUNCHED: dict[int, Path] = {}
_EXIT_FILE_WAIT = 1.0  # the launcher reaps an agent as it exits; never wait longer than this


class _Launcher:
    """The driver's side of orchestration.drivers.launcher: one fork server per interpreter
    path, started on first use, restarted when it died; None from spawn() means "start the
    agent the plain way"."""

    TIMEOUT = 10.0

    def __init__(self, python: str) -> None:
        self.python = python
        self.lock = threading.Lock()
        self.proc: subprocess.Popen[bytes] | None = None
        self.sock: socket.socket | None = None
        self.buffer = b""

    def spawn(self, *, run_json: Path, cwd: Path, log: Path, env: dict[str, str]) -> int | None:
        request = {"run_json": str(run_json), "cwd": str(cwd), "log": str(log), "env": env}
        with self.lock:
            try:
                if self.proc is None or self.proc.poll() is not None:
                    self._start(env, log.parent.parent)
                assert self.sock is not None
                self.sock.sendall(json.dumps(request).encode() + b"\n")
                while b"\n" not in self.buffer:
                    data = self.sock.recv(1 << 16)
                    if not data:
                        raise OSError("the agent launcher closed its socket")
                    self.buffer += data
                line, self.buffer = self.buffer.split(b"\n", 1)
                answer = json.loads(line)
            except (OSError, ValueError) as exc:
                _log.warning("agent launcher unusable (%s): starting agents directly", exc)
                self._stop()
                return None
        if "pid" not in answer:
            raise DriverError(
                f"cannot start the agent: {answer.get('error', answer)}", retryable=True
            )
        return int(answer["pid"])

    def _start(self, env: dict[str, str], log_dir: Path) -> None:
        self._stop()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            log_path = log_dir / "agent-launcher.log"
            with contextlib.suppress(OSError):
                log_dir.mkdir(parents=True, exist_ok=True)
            out = log_path.open("ab") if log_dir.is_dir() else subprocess.DEVNULL
            try:
                # same process group as the worker: stopping the worker stops the launcher
                # (agents are session leaders of their own and live on)
                self.proc = subprocess.Popen(
                    [self.python, "-m", "orchestration.drivers.launcher", str(theirs.fileno())],
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    pass_fds=(theirs.fileno(),),
                )
            finally:
                if not isinstance(out, int):  # a log file, not subprocess.DEVNULL
                    out.close()
        finally:
            theirs.close()
        ours.settimeout(self.TIMEOUT)
        self.sock, self.buffer = ours, b""

    def _stop(self) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=2)
        self.proc, self.sock, self.buffer = None, None, b""


_LAUNCHERS: dict[str, _Launcher] = {}


def track_child(proc: subprocess.Popen[bytes]) -> None:
    """Keep `proc` (started by a driver of this process) to be waited for: its exit code is
    read when it ends, and it is never left a zombie."""
    with _CHILDREN_LOCK:
        _CHILDREN[proc.pid] = proc


def warm_up_launcher(*, log_dir: Path, python: str = sys.executable) -> None:
    """Start the fork server now (a worker calls this when it starts), so the first run does
    not wait for its imports."""
    launcher = _launcher(python)
    with launcher.lock:
        if launcher.proc is None or launcher.proc.poll() is not None:
            try:
                launcher._start(LocalDriver._agent_env(), log_dir)
            except OSError as exc:
                _log.warning("agent launcher not started: %s", exc)


def _launcher(python: str) -> _Launcher:
    with _CHILDREN_LOCK:
        return _LAUNCHERS.setdefault(python, _Launcher(python))


def format_handle(pid: int, create_time: float) -> str:
    return f"{pid}:{create_time!r}"


def parse_handle(handle: str) -> tuple[int, float] | None:
    """(pid, create time) from a handle, or None when it is not one of ours."""
    pid_text, sep, time_text = str(handle).partition(":")
    if not sep:
        return None
    try:
        pid, create_time = int(pid_text), float(time_text)
    except ValueError:
        return None
    return (pid, create_time) if pid > 0 else None


def _launched_exit_code(pid: int, *, wait: bool = False) -> int | None:
    """The exit code the fork server recorded for one of its agents (None: not yet/unknown)."""
    with _CHILDREN_LOCK:
        path = _LAUNCHED.get(pid)
    if path is None:
        return None
    deadline = time.monotonic() + (_EXIT_FILE_WAIT if wait else 0.0)
    while True:
        with contextlib.suppress(OSError, ValueError):
            return int(path.read_text().strip())
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.02)


def _reap(pid: int) -> int | None:
    """Reap our own exited child; its exit code when known."""
    with _CHILDREN_LOCK:
        child = _CHILDREN.get(pid)
        launched = pid in _LAUNCHED
    if child is not None:
        return child.poll()
    if launched:
        return _launched_exit_code(pid)
    with contextlib.suppress(ChildProcessError, OSError):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
    return None


def _process(pid: int, create_time: float) -> psutil.Process | None:
    """The live (non-zombie) process of a handle, or None."""
    try:
        proc = psutil.Process(pid)
        if abs(proc.create_time() - create_time) > _CREATE_TIME_TOLERANCE:
            return None
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return proc
    except psutil.Error:
        return None


def _session_members(sid: int, not_before: float) -> list[psutil.Process]:
    """Processes of the agent's session (the agent is its leader), started after the agent."""
    members = []
    for proc in psutil.process_iter(["pid", "create_time"]):
        try:
            if (
                proc.pid != sid
                and os.getsid(proc.pid) == sid
                and proc.info["create_time"] >= not_before - _CREATE_TIME_TOLERANCE
            ):
                members.append(proc)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return members


def _tree(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return [proc]


@register("local")
class LocalDriver(DriverBase):
    """The agent as a detached session on the portal's own host."""

    releases_early = True
    hands_over = True
    prerenders_case = True
    on_portal_host = True
    keeps_attempts = True

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any], context: DriverContext) -> LocalDriver:
        base = {"cores": context.cores, "memory_gb": context.memory_gb}
        here = {"work_root": context.work_root, "cgroup_parent": context.cgroup_parent}
        return cls(**{**base, **here, **settings})

    @classmethod
    def warm_up(cls, *, work_root: str) -> None:
        """The fork server, started now: the first local run starts at once."""
        warm_up_launcher(log_dir=Path(work_root))

    def __init__(
        self,
        *,
        cores: int | None = None,
        memory_gb: float | None = None,
        work_root: str = "",
        python: str = sys.executable,
        grace: float = 10.0,
        fork_server: bool = True,
        cgroup_parent: str = "",
        **ignored: object,
    ) -> None:
        self.cores = int(cores or os.cpu_count() or 1)
        self.memory_gb = float(memory_gb or psutil.virtual_memory().total / 1024**3)
        self.work_root = work_root
        self.python = python
        self.grace = grace
        self.fork_server = bool(fork_server)
        self.cgroup_parent = cgroup_parent

    # -- Driver ---------------------------------------------------------------------------

    def prepare(self, spec: RunSpec) -> None:
        if spec.processes > self.cores:
            raise DriverError(f"the run needs {spec.processes} cores; this host has {self.cores}")
        work_dir = self._work_dir(spec)
        try:
            work_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            data = json.loads(spec.to_json(sandbox=self.sandbox))
            data["work_dir"] = str(work_dir)
            if spec.handover > 0:  # orchestration/agent/handover.py
                data["handover"] = spec.handover
                data["after"] = [str(self._work_dir_of(w) / HANDOVER_LOCK) for w in spec.after]
            write_private_json(work_dir / "run.json", data)
        except OSError as exc:
            raise DriverError(f"cannot prepare {work_dir}: {exc}", retryable=True) from exc

    def start(self, spec: RunSpec) -> str:
        work_dir = self._work_dir(spec)
        run_json = work_dir / "run.json"
        if not run_json.is_file():
            raise DriverError(f"{run_json} is missing: call prepare() first")
        env = self._agent_env()
        pid = None
        with contextlib.suppress(FileNotFoundError):
            (work_dir / "agent.exit").unlink()  # an earlier attempt's
        if self.fork_server:
            pid = _launcher(self.python).spawn(
                run_json=run_json, cwd=work_dir, log=work_dir / "agent.log", env=env
            )
        if pid is not None:
            exit_file = work_dir / "agent.exit"
            with _CHILDREN_LOCK:
                _LAUNCHED[pid] = exit_file
            return format_handle(pid, self._create_time(pid))
        try:
            with (work_dir / "agent.log").open("ab") as agent_log:
                proc = subprocess.Popen(
                    [self.python, "-m", "orchestration.agent", str(run_json)],
                    cwd=work_dir,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=agent_log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    close_fds=True,
                )
        except OSError as exc:
            raise DriverError(f"cannot start the agent: {exc}", retryable=True) from exc
        with _CHILDREN_LOCK:
            _CHILDREN[proc.pid] = proc
        return format_handle(proc.pid, self._create_time(proc.pid))

    @staticmethod
    def _create_time(pid: int) -> float:
        try:
            return psutil.Process(pid).create_time()
        except psutil.Error:  # exited already: still a valid handle for poll()
            return time.time()

    def poll(self, handle: str) -> RunStatus:
        parsed = parse_handle(handle)
        if parsed is None:
            return RunStatus(phase=RunPhase.UNKNOWN, reason="not a local handle")
        pid, create_time = parsed
        exit_code = _reap(pid)
        if exit_code is None and _process(pid, create_time) is not None:
            return RunStatus(phase=RunPhase.RUNNING)
        if exit_code is None:
            exit_code = _launched_exit_code(pid, wait=True)
        with _CHILDREN_LOCK:
            ours = pid in _CHILDREN or pid in _LAUNCHED
        if ours or create_time >= psutil.boot_time() - 1 and create_time <= time.time() + 1:
            return RunStatus(phase=RunPhase.EXITED, exit_code=exit_code)
        return RunStatus(phase=RunPhase.UNKNOWN, reason="no such agent since the last boot")

    def cancel(self, handle: str, *, grace: float | None = None) -> None:
        """SIGTERM the agent's group, SIGKILL it and its descendants after `grace` s."""
        grace = self.grace if grace is None else grace
        parsed = parse_handle(handle)
        if parsed is None:
            return
        pid, create_time = parsed
        proc = _process(pid, create_time)
        if proc is None:
            _reap(pid)
            # the agent is gone; its steps may live on in its session (e.g. agent SIGKILLed)
            for leftover in _session_members(pid, create_time):
                with contextlib.suppress(psutil.Error):
                    leftover.kill()
            return
        tree = _tree(proc)  # the agent's steps run in their own process groups
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            _reap(pid)
            if _process(pid, create_time) is None:
                break
            time.sleep(0.05)
        self._kill_leftovers(pid, create_time, tree)

    def collect(self, handle: str) -> None:
        parsed = parse_handle(handle)
        if parsed is None:
            return
        pid, _ = parsed
        if _reap(pid) is not None:
            with _CHILDREN_LOCK:
                _CHILDREN.pop(pid, None)
                _LAUNCHED.pop(pid, None)

    def limits_problem(self) -> str:
        """Can this host's agents give runs cgroups (orchestration/agent/cgroups.py)? A
        container without cgroup delegation cannot: runs there are held to their limits
        only per process, and the backend's health says so."""
        return limits_problem(parent=self.cgroup_parent)

    def check(self) -> dict[str, Any]:
        caps = self.capabilities()
        problem = self.limits_problem()
        return {
            "ok": True,
            "capacity": {"cores": caps.cores, "memory_gb": caps.memory_gb, "nodes": 1},
            "limits": {
                "enforced": not problem,
                "detail": problem or "each run in a cgroup of its own (memory, cores, processes)",
            },
        }

    def capabilities(self) -> Capabilities:
        return Capabilities(
            kind="local",
            cores=self.cores,
            memory_gb=round(self.memory_gb, 2),
            max_nodes=1,
            mpi=shutil.which("mpirun") is not None,
            remote=False,
        )

    # -- helpers --------------------------------------------------------------------------

    def results_dir(self, spec: RunSpec) -> str | None:
        """The portal runs on this machine: it reads the finished case where the agent ran it."""
        return str(self._work_dir(spec) / "case")

    def _work_dir(self, spec: RunSpec) -> Path:
        return self._work_dir_of(spec.work_dir)

    def _work_dir_of(self, work_dir: str) -> Path:
        path = Path(work_dir)
        if not path.is_absolute():
            if not self.work_root:
                raise DriverError(f"work_dir {work_dir!r} is relative and no work_root is set")
            path = Path(self.work_root) / path
        return path

    @staticmethod
    def _agent_env() -> dict[str, str]:
        # the worker's environment holds the database URL and the secret keys: agents (and so
        # the tenants' solvers) get an allowlist of it
        env = agent_environment(os.environ)
        paths = [str(REPO_ROOT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
        env["PYTHONUNBUFFERED"] = "1"
        if os.geteuid() == 0:
            env.update(ROOT_MPI_ENV)
        return env

    @staticmethod
    def _kill_leftovers(pid: int, create_time: float, tree: list[psutil.Process]) -> None:
        """SIGKILL what is still alive of the agent's group and of its process tree."""
        agent = _process(pid, create_time)
        tree = [*tree, *_session_members(pid, create_time)]
        if agent is not None:
            tree = [*tree, *_tree(agent)]
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        for proc in tree:
            with contextlib.suppress(psutil.Error):
                proc.kill()  # psutil checks the create time: no reused PID is hit
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            _reap(pid)  # before psutil could reap our child and lose its exit code
            if not any(_alive(proc) for proc in tree):
                break
            time.sleep(0.05)


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
