"""A fork server for run agents on this machine.

Starting the agent as a fresh interpreter costs every run about 0.15–0.3 s of CPU (imports),
on the same cores the solvers need. The launcher imports the agent once and forks a child per
run: the child becomes its own session leader, points its output at the run's agent.log and
runs the agent's `main` exactly as `python -m orchestration.agent run.json` would.

The local driver starts one launcher per interpreter and talks to it over a private socket
pair (nobody else can reach it). The launcher has no threads, so forking it is safe. It exits
when its parent (the Celery worker) goes away; agents it started live on in their own sessions
and are found by their pid and start time like any other agent.

Protocol: one JSON object per line each way.
  request  {"run_json": path, "cwd": dir, "log": path, "env": {…}}
  answer   {"pid": N} or {"error": "…"}
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import os
import random
import select
import signal
import socket
import sys
import traceback
from typing import Any

__all__ = ["serve"]

# seconds between checks that the parent is there (its socket's end says so at once; this is
# the fallback). Agents are reaped as they exit: SIGCHLD wakes the loop through a pipe.
PARENT_CHECK = 5.0
EXIT_FILE = "agent.exit"  # written into the agent's cwd when it is reaped: its exit code

_running: dict[int, str] = {}  # pid → cwd of the agents we forked


def _reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while True:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                return
            cwd = _running.pop(pid, None)
            if cwd is not None:
                _write_exit(cwd, os.waitstatus_to_exitcode(status))


def _write_exit(cwd: str, code: int) -> None:
    tmp = os.path.join(cwd, f".{EXIT_FILE}.tmp")
    with contextlib.suppress(OSError):
        with open(tmp, "w") as fh:
            fh.write(f"{code}\n")
        os.replace(tmp, os.path.join(cwd, EXIT_FILE))


def _child(request: dict[str, Any], log_fd: int, ready_fd: int) -> None:
    """In the forked child: become the agent. Never returns."""
    code = 1
    try:
        os.setsid()
        os.write(ready_fd, b"1")  # the parent answers only once we lead our own session
        os.close(ready_fd)
        signal.set_wakeup_fd(-1)  # the launcher's SIGCHLD pipe is not ours
        os.chdir(request["cwd"])
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        for name in os.listdir("/proc/self/fd"):  # the socket and whatever else was inherited
            if int(name) > 2:
                with contextlib.suppress(OSError):
                    os.close(int(name))
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in request["env"].items()})
        random.seed()
        assert isinstance(sys.stdout, io.TextIOWrapper)  # the launcher's own, on fd 1
        sys.stdout.reconfigure(line_buffering=True)
        sys.argv = ["windtunnel-agent", request["run_json"]]
        from orchestration.agent.main import main  # lazy: imported by serve() before the forks

        code = main([request["run_json"]])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 — whatever happens, the child must not return
        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _spawn(request: dict[str, Any]) -> dict[str, Any]:
    try:
        log_fd = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    except (OSError, KeyError, TypeError) as exc:
        return {"error": f"cannot open the agent log: {exc}"}
    ready_r, ready_w = os.pipe()
    try:
        pid = os.fork()
    except OSError as exc:
        for fd in (log_fd, ready_r, ready_w):
            os.close(fd)
        return {"error": f"cannot fork: {exc}"}
    if pid == 0:
        os.close(ready_r)
        _child(request, log_fd, ready_w)
    os.close(log_fd)
    os.close(ready_w)
    try:
        # a driver may signal the agent's process group right after start: wait for setsid
        select.select([ready_r], [], [], 5.0)
    finally:
        os.close(ready_r)
    _running[pid] = str(request["cwd"])
    return {"pid": pid}


def serve(fd: int) -> int:
    # everything the agent needs, imported once here (the forks share it)
    import orchestration.agent.main  # lazy: the launcher start-up, shared by forks
    import orchestration.case.render  # noqa: F401  # lazy: cases the portal did not render

    # and what every agent would otherwise find out for itself (the host's description for
    # its provenance, that bubblewrap starts here): once, before the forks
    orchestration.agent.main.warm_up()

    # out of the cyclic collector's sight: a fork's collections would otherwise walk (and so
    # copy, page by page) every object imported above
    gc.collect()
    gc.freeze()

    sock = socket.socket(fileno=fd)
    parent = os.getppid()
    # an agent's exit wakes the loop (no polling: the launcher costs nothing while idle)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)  # a handler: the byte is written
    buffer = b""
    watched: list[socket.socket | int] = [sock, wake_r]
    while True:
        _reap()
        if os.getppid() != parent:
            return 0  # the worker that started us is gone
        ready, _, _ = select.select(watched, [], [], PARENT_CHECK)
        if wake_r in ready:
            with contextlib.suppress(BlockingIOError):
                while os.read(wake_r, 512):
                    pass
        if sock not in ready:
            continue
        try:
            data = sock.recv(1 << 16)
        except OSError:
            return 0
        if not data:
            return 0
        buffer += data
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            try:
                answer = _spawn(json.loads(line))
            except (ValueError, AttributeError) as exc:
                answer = {"error": f"bad request: {exc}"}
            sock.sendall(json.dumps(answer).encode() + b"\n")


if __name__ == "__main__":
    raise SystemExit(serve(int(sys.argv[1])))
