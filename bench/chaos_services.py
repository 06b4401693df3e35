"""The chaos benchmark's private services (PostgreSQL, Redis, slurmctld) as scripts/bootstrap
and scripts/start-slurm start them: whether each is up, starting it, stopping it with a
signal, and putting everything back as it was, whatever happened."""

from __future__ import annotations

import contextlib
import glob
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from bench.common import ROOT, progress

DATA = ROOT / ".data"


def db_call(call: Callable[[], Any]) -> Any:
    """`call()` on this thread's database connection, or None while PostgreSQL is away."""
    from django.db import DatabaseError, connection

    try:
        return call()
    except DatabaseError:
        with contextlib.suppress(Exception):
            connection.close()
        return None


def own_service(name: str) -> bool:
    """Whether the bench's database / Redis is the private one under .data (bootstrap made it
    unless .env names another, which the benchmark must not kill)."""
    url = os.environ.get("TEST_DATABASE_URL" if name == "postgres" else "TEST_REDIS_URL", "")
    port_file = DATA / f"{name}.port"
    return port_file.is_file() and f"127.0.0.1:{port_file.read_text().strip()}/" in url


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def gone(pids: list[int], timeout: float, *, zombies: bool = True) -> bool:
    """Wait until none of `pids` runs; with `zombies`, until none exists at all (pg_ctl and
    scripts/start-slurm take a zombie named in a pid file for a daemon still running, and
    the machine's init reaps orphans every couple of seconds); False after `timeout`."""
    deadline = time.monotonic() + timeout
    while any(psutil.pid_exists(p) if zombies else alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


class Service:
    """A daemon the portal needs: is it up, start it (returns once it answers), stop it.
    `data`: the folder scripts/bootstrap keeps it in (.data; another one in a trial)."""

    def __init__(self, data: Path = DATA) -> None:
        self.data = data

    def port(self, name: str) -> int:
        return int((self.data / f"{name}.port").read_text().strip())

    def up(self) -> bool:
        raise NotImplementedError

    def start(self) -> None:
        raise NotImplementedError

    def stop(self, sig: int) -> None:
        raise NotImplementedError


class Postgres(Service):
    runas = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    @property
    def pgdata(self) -> Path:
        return self.data / "postgres"

    @property
    def pg_ctl(self) -> str:
        bins = sorted(
            glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name)
        )
        return f"{bins[-1]}/pg_ctl"

    def up(self) -> bool:
        done = subprocess.run(
            [*self.runas, self.pg_ctl, "-D", str(self.pgdata), "status"],
            capture_output=True,
            timeout=30,
        )
        return done.returncode == 0

    def start(self) -> None:
        options = (
            f"-p {self.port('postgres')} -c listen_addresses=127.0.0.1 -k {self.data / 'run'}"
            " -c max_connections=200 -c fsync=off -c synchronous_commit=off"
        )
        # (after a SIGKILL pg_ctl says "another server might be running": the stale pid
        # file; it starts the server anyway, and says more only when that fails)
        done = subprocess.run(
            [*self.runas, self.pg_ctl, "-D", str(self.pgdata), "-w", "-t", "120"]
            + ["-l", str(self.pgdata / "server.log"), "-o", options, "start"],
            capture_output=True,
            text=True,
            timeout=150,
        )
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl start: {done.stderr.strip()} (see server.log)")

    def stop(self, sig: int) -> None:
        if sig != signal.SIGKILL:
            subprocess.run(
                [*self.runas, self.pg_ctl, "-D", str(self.pgdata), "-m", "fast", "-w", "stop"],
                check=True,
                stdout=subprocess.DEVNULL,
                timeout=120,
            )
            return
        pid = int((self.pgdata / "postmaster.pid").read_text().split()[0])
        children = [p.pid for p in psutil.Process(pid).children()]
        os.kill(pid, signal.SIGKILL)
        gone([pid], 10)
        # the backends notice their postmaster's death and leave; the new postmaster cannot
        # start while one still holds the old shared memory
        if not gone(children, 5):
            for child in children:
                with contextlib.suppress(psutil.Error):
                    psutil.Process(child).kill()
            gone(children, 10)


class Redis(Service):
    @property
    def folder(self) -> Path:
        return self.data / "redis"

    def up(self) -> bool:
        """PING answered (a bare socket: redis-py retries a refused connection for seconds)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port("redis")), timeout=2) as conn:
                conn.sendall(b"PING\r\n")
                return conn.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def start(self) -> None:
        port = str(self.port("redis"))
        subprocess.run(
            ["redis-server", "--port", port, "--bind", "127.0.0.1", "--daemonize", "yes"]
            + ["--save", "", "--appendonly", "no", "--dir", str(self.folder)]
            + ["--pidfile", str(self.folder / "redis.pid")]
            + ["--logfile", str(self.folder / "redis.log")],
            check=True,
            timeout=30,
        )
        deadline = time.monotonic() + 30
        while not self.up():
            if time.monotonic() > deadline:
                raise RuntimeError("redis-server did not answer after its start")
            time.sleep(0.1)

    def stop(self, sig: int) -> None:
        pid = int((self.folder / "redis.pid").read_text().strip())
        os.kill(pid, sig)  # SIGTERM: redis-server shuts down cleanly (nothing saved here)
        if not gone([pid], 30, zombies=False):
            os.kill(pid, signal.SIGKILL)
        gone([pid], 10, zombies=False)  # its port is free once it runs no more


class Slurmctld(Service):
    @property
    def pidfile(self) -> Path:
        return self.data / "slurm" / "run" / "slurmctld.pid"

    def up(self) -> bool:
        return self.pidfile.is_file() and alive(int(self.pidfile.read_text().strip()))

    def start(self) -> None:
        subprocess.run(
            [str(ROOT / "scripts/start-slurm")], check=True, stdout=subprocess.DEVNULL, timeout=180
        )

    def stop(self, sig: int) -> None:
        pid = int(self.pidfile.read_text().strip())
        os.kill(pid, sig)
        if not gone([pid], 30):
            os.kill(pid, signal.SIGKILL)
            gone([pid], 10)


def restore_services() -> list[str]:
    """Start again whatever of PostgreSQL, Redis and slurmctld is down; what was started."""
    started_again = []
    for name, service in (("postgres", Postgres()), ("redis", Redis()), ("slurmctld", Slurmctld())):
        if name != "slurmctld" and not own_service(name):
            continue
        try:
            if not service.up():
                service.start()
                started_again.append(name)
        except Exception as exc:  # noqa: BLE001 -- try the others, then say so
            print(f"[chaos] could not start {name} again: {exc}", file=sys.stderr, flush=True)
    conf = DATA / "slurm" / "slurm.conf"
    if conf.is_file():
        with contextlib.suppress(Exception):
            started_again += [f"node {d}" for d in resume_duplicate_jobid_drains(str(conf))]
    return started_again


def resume_duplicate_jobid_drains(slurm_conf: str) -> list[str]:
    """Resume the nodes Slurm drained for a "Duplicate jobid", as an operator would; what was
    resumed. A slurmctld killed before it saved its state forgets the last jobs it gave out
    and gives their ids out again, and a node still holding such a job is drained: no run
    starts there again until someone resumes it. Drains with other reasons (a test's own)
    are left alone."""
    env = {**os.environ, "SLURM_CONF": slurm_conf}
    done = subprocess.run(
        ["sinfo", "-h", "-N", "-o", "%N|%T|%E"], env=env, capture_output=True, text=True, timeout=30
    )
    resumed = []
    for line in done.stdout.splitlines() if done.returncode == 0 else []:
        node, state, reason = (line.split("|", 2) + ["", ""])[:3]
        if "drain" in state and reason.startswith("Duplicate jobid"):
            subprocess.run(
                ["scontrol", "update", f"nodename={node}", "state=resume"],
                env=env,
                capture_output=True,
                timeout=30,
            )
            progress(f"Slurm drained node {node} ({reason}): resumed, as an operator would")
            resumed.append(f"{time.strftime('%H:%M:%S')} {node}: {reason}")
    return resumed
