"""The local driver: the run agent as a detached process group on this machine."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

import orchestration
from orchestration.drivers.base import (
    Capabilities,
    DriverError,
    RunPhase,
    RunSpec,
    RunStatus,
    register,
)

__all__ = ["LocalDriver", "format_handle", "parse_handle"]

REPO_ROOT = Path(orchestration.__file__).resolve().parent.parent
ROOT_MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
_CREATE_TIME_TOLERANCE = 0.05

# Agents this interpreter started, so any LocalDriver instance can reap them and read their
# exit code (the backend may build a new driver object for every call).
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}
_CHILDREN_LOCK = threading.Lock()


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


def _reap(pid: int) -> int | None:
    """Reap our own exited child; its exit code when known."""
    with _CHILDREN_LOCK:
        child = _CHILDREN.get(pid)
    if child is not None:
        return child.poll()
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
class LocalDriver:
    name = "local"

    def __init__(
        self,
        *,
        cores: int | None = None,
        memory_gb: float | None = None,
        work_root: str = "",
        python: str = sys.executable,
        grace: float = 10.0,
        **ignored: object,
    ) -> None:
        self.cores = int(cores or os.cpu_count() or 1)
        self.memory_gb = float(memory_gb or psutil.virtual_memory().total / 1024**3)
        self.work_root = work_root
        self.python = python
        self.grace = grace

    # -- Driver ---------------------------------------------------------------------------

    def prepare(self, spec: RunSpec) -> None:
        if spec.processes > self.cores:
            raise DriverError(f"the run needs {spec.processes} cores; this host has {self.cores}")
        work_dir = self._work_dir(spec)
        try:
            work_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            data = json.loads(spec.to_json())
            data["work_dir"] = str(work_dir)
            path = work_dir / "run.json"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                os.fchmod(fh.fileno(), 0o600)
                json.dump(data, fh, indent=2)
        except OSError as exc:
            raise DriverError(f"cannot prepare {work_dir}: {exc}", retryable=True) from exc

    def start(self, spec: RunSpec) -> str:
        work_dir = self._work_dir(spec)
        run_json = work_dir / "run.json"
        if not run_json.is_file():
            raise DriverError(f"{run_json} is missing: call prepare() first")
        try:
            with (work_dir / "agent.log").open("ab") as agent_log:
                proc = subprocess.Popen(
                    [self.python, "-m", "orchestration.agent", str(run_json)],
                    cwd=work_dir,
                    env=self._agent_env(),
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
        try:
            create_time = psutil.Process(proc.pid).create_time()
        except psutil.Error:  # exited already: still a valid handle for poll()
            create_time = time.time()
        return format_handle(proc.pid, create_time)

    def poll(self, handle: str) -> RunStatus:
        parsed = parse_handle(handle)
        if parsed is None:
            return RunStatus(phase=RunPhase.UNKNOWN, reason="not a local handle")
        pid, create_time = parsed
        exit_code = _reap(pid)
        if exit_code is None and _process(pid, create_time) is not None:
            return RunStatus(phase=RunPhase.RUNNING)
        with _CHILDREN_LOCK:
            ours = pid in _CHILDREN
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

    def _work_dir(self, spec: RunSpec) -> Path:
        path = Path(spec.work_dir)
        if not path.is_absolute():
            if not self.work_root:
                raise DriverError(f"work_dir {spec.work_dir!r} is relative and no work_root is set")
            path = Path(self.work_root) / path
        return path

    @staticmethod
    def _agent_env() -> dict[str, str]:
        env = dict(os.environ)
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
