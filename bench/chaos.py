"""chaos_*: two studies of short real runs while the portal's parts are killed and restarted.

RUNS_EACH cavity runs (10×10 cells, 50–200 steps of icoFoam: under a second each) on the
local backend and as many on the private Slurm cluster (scripts/start-slurm, local transport),
each study in a tenant of its own with a 2-core quota. While they run, FAULTS faults hit, at
random moments (when a random share of the runs has ended, plus a random 0–2 s): a SIGKILL,
or a graceful stop, of uvicorn, the Celery worker, beat (a process of its own here),
PostgreSQL and Redis (the private ones under .data/, started again as scripts/bootstrap starts
them) or slurmctld (started again by scripts/start-slurm), each back after a random 0.5–5 s
down, one at a time; and SIGKILLs of local runs' agents (from a thread of their own, at their
share of the local runs ended; the portal alone starts those again). Every component is hit
at least once. The plan comes from a seeded RNG: the seed is printed and WT_CHAOS_SEED
replays it (the moments follow the studies' progress: a replay is close, not exact);
WT_CHAOS_COMPONENTS=web,worker,… limits the components hit.

Measured (one BENCH line each; every target is 0 but the recovery's, ≤ 60 s):
- chaos_lost_runs: runs not `completed` DEADLINE s after the last fault;
- chaos_double_runs: runs seen solving twice at once. Every 0.2 s a sampler lists the step
  processes (blockMesh, icoFoam) and maps each to its run and attempt by the run's
  directory in its ancestors' command lines (bubblewrap binds the attempt's case); every
  second, squeue's RUNNING jobs are mapped to runs by the handles the portal recorded;
- chaos_quota_overshoot: the most cores a tenant's solving runs used at once (one step
  process, one core) beyond its quota;
- chaos_recovery_p95_s: per fault, from the component being back (answering) to the end of
  the first run dispatched after that moment (on the Slurm backend for slurmctld; the next
  run's end when nothing was left to dispatch): the whole path, admission → dispatch →
  agent → final report, works again. An agent's clock runs from the kill to its run's end
  on a later attempt. Faults whose windows meet are marked (recoveries then add up);
- chaos_lost_points: for completed runs, the time steps in the final attempt's log.icoFoam
  less the points of its stored residual.Ux series.

The portal runs with production's intervals (60 s heartbeat timeout, 10 s beat tick), on its
own database, Redis DB and queue. Its database commits durably (synchronous_commit=on, as in
production; the private server's default is off, see _isolate). A slurmctld killed before it
saved its state gives job ids out again, and Slurm drains the node for a "Duplicate jobid":
the benchmark resumes such a node as an operator would, and says so. PostgreSQL, Redis and
Slurm are shared with the rest of the tree's tests: whatever happens, they are started again
before the benchmark ends (try/finally, SIGTERM included).
"""

from __future__ import annotations

import contextlib
import glob
import math
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from bench.common import ROOT, SMOKE, emit, progress, setup_django, sized, started
from bench.figures import threshold

RUNS_EACH = sized(200, 6)  # on each backend
FAULTS = sized(20, 4)
QUOTA_CORES = 2
DOWN_S = (0.5, 5.0)
# faults fall between these shares of the runs ended (a smoke run's few runs end quickly)
MOMENTS = (0.03, 0.5) if SMOKE else (0.03, 0.9)
DELAY_S = (0.0, 0.5) if SMOKE else (0.0, 2.0)  # a moment later, at random
DEADLINE = sized(900, 400)  # after the last fault, for every run to end
TARGET_RECOVERY_S = threshold("chaos_recovery_p95_s")
COMPONENTS = ("web", "worker", "beat", "agent", "redis", "postgres", "slurmctld")
STEP_NAMES = frozenset({"blockMesh", "icoFoam"})
DATA = ROOT / ".data"
PARAMETERS = {"cells": 10, "end_time": 0.5}  # lid 0.5–2 m/s: 50–200 steps of icoFoam


def _isolate() -> None:
    """Own database, Redis DB, Celery queue and data dir (other benchmarks may run at the same
    time on this machine), and the portal's production intervals (config/settings/base.py):
    an agent that went silent is given up after 60 s, not the other benchmarks' 120."""
    import psycopg

    url = os.environ.get("TEST_DATABASE_URL", "")
    if url:
        base = url.rsplit("/", 1)[0]
        with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
            if not conn.execute(
                "SELECT 1 FROM pg_database WHERE datname='windtunnel_bench_chaos'"
            ).fetchone():
                conn.execute("CREATE DATABASE windtunnel_bench_chaos")
            # durable commits, as a production server makes them: the private server runs
            # with synchronous_commit=off (scripts/bootstrap, for the tests' speed), and a
            # SIGKILLed postmaster then loses the commits of its last ~0.6 s, which no
            # production server does (a claimed run would be claimed again as the same
            # attempt). A database's own setting overrides the server's for its sessions.
            conn.execute("ALTER DATABASE windtunnel_bench_chaos SET synchronous_commit = on")
        os.environ["TEST_DATABASE_URL"] = f"{base}/windtunnel_bench_chaos"
    if redis_url := os.environ.get("TEST_REDIS_URL", ""):
        os.environ["TEST_REDIS_URL"] = f"{redis_url.rsplit('/', 1)[0]}/13"
    os.environ["CELERY_QUEUE"] = "windtunnel-bench-chaos"
    os.environ["WINDTUNNEL_DATA_DIR"] = str(DATA / "bench-chaos-files")
    for name, value in (
        ("WINDTUNNEL_HEARTBEAT_INTERVAL", "5"),
        ("WINDTUNNEL_HEARTBEAT_TIMEOUT", os.environ.get("WT_CHAOS_HEARTBEAT_TIMEOUT", "60")),
        ("WINDTUNNEL_DISPATCH_TIMEOUT", "60"),
        ("WINDTUNNEL_TICK_SECONDS", "10"),
        ("WINDTUNNEL_TELEMETRY_INTERVAL", "0.25"),
    ):
        os.environ[name] = value


def _at(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


def _db(call: Callable[[], Any]) -> Any:
    """`call()` on this thread's database connection, or None while PostgreSQL is away."""
    from django.db import DatabaseError, connection

    try:
        return call()
    except DatabaseError:
        with contextlib.suppress(Exception):
            connection.close()
        return None


# -- the private services, as scripts/bootstrap and scripts/start-slurm start them ----------


def _own_service(name: str) -> bool:
    """Whether the bench's database / Redis is the private one under .data (bootstrap made it
    unless .env names another, which the benchmark must not kill)."""
    url = os.environ.get("TEST_DATABASE_URL" if name == "postgres" else "TEST_REDIS_URL", "")
    port_file = DATA / f"{name}.port"
    return port_file.is_file() and f"127.0.0.1:{port_file.read_text().strip()}/" in url


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _gone(pids: list[int], timeout: float, *, zombies: bool = True) -> bool:
    """Wait until none of `pids` runs; with `zombies`, until none exists at all (pg_ctl and
    scripts/start-slurm take a zombie named in a pid file for a daemon still running, and
    the machine's init reaps orphans every couple of seconds); False after `timeout`."""
    deadline = time.monotonic() + timeout
    while any(psutil.pid_exists(p) if zombies else _alive(p) for p in pids):
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
        _gone([pid], 10)
        # the backends notice their postmaster's death and leave; the new postmaster cannot
        # start while one still holds the old shared memory
        if not _gone(children, 5):
            for child in children:
                with contextlib.suppress(psutil.Error):
                    psutil.Process(child).kill()
            _gone(children, 10)


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
        if not _gone([pid], 30, zombies=False):
            os.kill(pid, signal.SIGKILL)
        _gone([pid], 10, zombies=False)  # its port is free once it runs no more


class Slurmctld(Service):
    @property
    def pidfile(self) -> Path:
        return self.data / "slurm" / "run" / "slurmctld.pid"

    def up(self) -> bool:
        return self.pidfile.is_file() and _alive(int(self.pidfile.read_text().strip()))

    def start(self) -> None:
        subprocess.run(
            [str(ROOT / "scripts/start-slurm")], check=True, stdout=subprocess.DEVNULL, timeout=180
        )

    def stop(self, sig: int) -> None:
        pid = int(self.pidfile.read_text().strip())
        os.kill(pid, sig)
        if not _gone([pid], 30):
            os.kill(pid, signal.SIGKILL)
            _gone([pid], 10)


def _restore_services() -> list[str]:
    """Start again whatever of PostgreSQL, Redis and slurmctld is down; what was started."""
    started_again = []
    for name, service in (("postgres", Postgres()), ("redis", Redis()), ("slurmctld", Slurmctld())):
        if name != "slurmctld" and not _own_service(name):
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
            started_again += [f"node {d}" for d in _resume_duplicate_jobid_drains(str(conf))]
    return started_again


def _resume_duplicate_jobid_drains(slurm_conf: str) -> list[str]:
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


# -- the sampler: step processes, their runs, Slurm jobs ------------------------------------


@dataclass
class Sampler:
    """Every 0.2 s: the step processes on this machine mapped to (run, attempt); every 1 s,
    the RUNNING Slurm jobs mapped to runs through `handles`."""

    runs_dir: Path
    run_tenant: dict[str, int]
    quota: dict[int, int]
    slurm_conf: str
    handles: dict[str, tuple[str, int]] = field(default_factory=dict)
    doubles: dict[str, dict[str, Any]] = field(default_factory=dict)
    slurm_doubles: dict[str, dict[str, Any]] = field(default_factory=dict)
    overshoot: int = 0
    overshoot_at: list[dict[str, Any]] = field(default_factory=list)
    peak: dict[int, int] = field(default_factory=dict)
    samples: int = 0
    solving: set[str] = field(default_factory=set)  # runs with a step process, last sample
    stopping: threading.Event = field(default_factory=threading.Event)
    owners: dict[tuple[int, float], tuple[str, int] | None] = field(default_factory=dict)
    drains: list[str] = field(default_factory=list)  # nodes resumed (see _resume_…)

    def __post_init__(self) -> None:
        self.pattern = re.compile(re.escape(str(self.runs_dir)) + r"/([0-9a-f-]{36})/attempt-(\d+)")
        # two threads: a Slurm command hangs for seconds while slurmctld is down
        self.threads = [
            threading.Thread(target=self._loop, args=(0.2, self._sample_processes), daemon=True),
            threading.Thread(target=self._loop, args=(1.0, self._sample_jobs), daemon=True),
        ]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=30)

    def _loop(self, interval: float, sample: Callable[[], None]) -> None:
        while not self.stopping.wait(interval):
            try:
                sample()
            except Exception as exc:  # noqa: BLE001 -- a sampler must not die mid-benchmark
                progress(f"sampler: {exc!r}")

    def _owner(self, proc: psutil.Process) -> tuple[str, int] | None:
        key = (proc.pid, proc.info["create_time"])
        if key not in self.owners:
            owner = None
            with contextlib.suppress(psutil.Error):
                for ancestor in [proc, *proc.parents()]:
                    match = self.pattern.search(" ".join(ancestor.cmdline()))
                    if match:
                        owner = (match.group(1), int(match.group(2)))
                        break
            self.owners[key] = owner
        return self.owners[key]

    def _sample_processes(self) -> None:
        live: dict[str, set[tuple[int, int]]] = {}
        for proc in psutil.process_iter(["name", "create_time", "status"]):
            if proc.info["name"] not in STEP_NAMES or proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            owner = self._owner(proc)
            if owner is not None and owner[0] in self.run_tenant:
                live.setdefault(owner[0], set()).add((owner[1], proc.pid))
        self.samples += 1
        self.solving = set(live)
        now = time.time()
        for run, procs in live.items():
            if len(procs) > 1 and run not in self.doubles:
                self.doubles[run] = {"at": now, "attempts_pids": sorted(procs)}
                progress(f"DOUBLE: run {run} solving twice at once: (attempt, pid) {sorted(procs)}")
        per_tenant: dict[int, int] = {}
        for run in live:
            tenant = self.run_tenant[run]
            per_tenant[tenant] = per_tenant.get(tenant, 0) + 1
        for tenant, cores in per_tenant.items():
            self.peak[tenant] = max(self.peak.get(tenant, 0), cores)
            over = cores - self.quota[tenant]
            if over > 0:
                self.overshoot = max(self.overshoot, over)
                if len(self.overshoot_at) < 50:
                    runs = sorted(r for r in live if self.run_tenant[r] == tenant)
                    self.overshoot_at.append({"at": now, "tenant": tenant, "runs": runs})
                    progress(f"OVERSHOOT: tenant {tenant}: {cores} cores in use: {runs}")

    def _sample_jobs(self) -> None:
        done = subprocess.run(
            ["squeue", "-h", "-t", "R", "-o", "%i"],
            env={**os.environ, "SLURM_CONF": self.slurm_conf},
            capture_output=True,
            text=True,
            timeout=30,
        )
        if done.returncode != 0:
            return  # slurmctld is down
        self.drains += _resume_duplicate_jobid_drains(self.slurm_conf)
        by_run: dict[str, set[tuple[int, str]]] = {}
        for job in done.stdout.split():
            if job in self.handles:
                run, attempt = self.handles[job]
                by_run.setdefault(run, set()).add((attempt, job))
        for run, jobs in by_run.items():
            if len({a for a, _ in jobs}) > 1 and run not in self.slurm_doubles:
                self.slurm_doubles[run] = {"at": time.time(), "attempts_jobs": sorted(jobs)}
                progress(f"DOUBLE (squeue): run {run} has two jobs RUNNING: {sorted(jobs)}")


# -- the faults -----------------------------------------------------------------------------


@dataclass
class Fault:
    component: str
    action: str  # kill (SIGKILL) | restart (a graceful stop)
    down: float  # seconds down before it is started again
    when: float  # made once this share of the runs has ended
    delay: float  # and this many seconds more
    at: float = 0.0  # when it was hit
    back: float = 0.0  # when it answered again
    recovery: float | None = None
    detail: str = ""
    run: tuple[str, int] | None = None  # an agent's (run, attempt)
    waiting: int | None = None  # runs not yet dispatched when it was back
    stuck: bool = False  # no progress after it until the benchmark stopped waiting
    overlaps: list[str] = field(default_factory=list)  # faults within its window


def plan(rng: random.Random, count: int, components: tuple[str, ...]) -> list[Fault]:
    """`count` faults: every component once (when there are enough), the rest at random."""
    names = rng.sample(components, min(count, len(components)))
    names += [rng.choice(components) for _ in range(count - len(names))]
    rng.shuffle(names)
    moments = sorted(rng.uniform(*MOMENTS) for _ in names)
    return [
        Fault(
            component=name,
            action="kill" if name == "agent" else rng.choice(("kill", "restart")),
            down=0.0 if name == "agent" else round(rng.uniform(*DOWN_S), 2),
            when=round(when, 3),
            delay=round(rng.uniform(*DELAY_S), 2),
        )
        for name, when in zip(names, moments, strict=True)
    ]


def _signal_of(fault: Fault) -> int:
    return signal.SIGKILL if fault.action == "kill" else signal.SIGTERM


def _agent(handle: str) -> psutil.Process | None:
    """The live agent process of a local run's handle, or None."""
    from orchestration.drivers.local import parse_handle

    parsed = parse_handle(handle)
    if parsed is None:
        return None
    try:
        proc = psutil.Process(parsed[0])
        if abs(proc.create_time() - parsed[1]) > 0.05 or proc.status() == psutil.STATUS_ZOMBIE:
            return None
    except psutil.Error:
        return None
    return proc


class Chaos:
    """The portal under test and the means to hit each of its parts."""

    def __init__(self, *, stack: Any, studies: list[Any], slurm_backend: Any, rng: random.Random):
        self.stack = stack
        self.studies = studies
        self.slurm_backend = slurm_backend
        self.rng = rng
        self.services: dict[str, Service] = {
            "postgres": Postgres(),
            "redis": Redis(),
            "slurmctld": Slurmctld(),
        }

    def hit(self, fault: Fault, sampler: Sampler) -> None:
        fault.at = time.time()
        sig = _signal_of(fault)
        stack = self.stack
        if fault.component == "agent":
            self._kill_an_agent(fault, sampler)
            fault.back = fault.at
            return
        if fault.component == "web":
            stack.web.send_signal(sig)
            try:
                stack.web.wait(timeout=30)
            except subprocess.TimeoutExpired:
                stack.web.kill()
                stack.web.wait()
            time.sleep(fault.down)
            stack.start_web()  # returns once /healthz answers
        elif fault.component == "worker":
            stack.stop_worker(sig)  # its process group: the agent launcher goes too
            time.sleep(fault.down)
            stack.start_worker(beat=False)
        elif fault.component == "beat":
            stack.stop_beat(sig)
            time.sleep(fault.down)
            stack.start_beat()
        else:
            service = self.services[fault.component]
            try:
                service.stop(sig)
                time.sleep(fault.down)
            finally:
                service.start()  # returns once it answers
        fault.back = time.time()

    def _kill_an_agent(self, fault: Fault, sampler: Sampler) -> None:
        """SIGKILL the live agent of a local run that is solving (or at least running)."""
        from studies.choices import TERMINAL_STATES
        from studies.models import Run

        local = Run.objects.filter(study=self.studies[0])
        started = time.monotonic()
        while True:
            rows = _db(
                lambda: list(
                    local.filter(state="running")
                    .exclude(handle="")
                    .order_by("id")
                    .values_list("id", "attempt", "handle")
                )
            )
            agents = [(r, proc) for r in rows or [] if (proc := _agent(r[2])) is not None]
            solving = [(r, proc) for r, proc in agents if str(r[0]) in sampler.solving]
            if solving or (agents and time.monotonic() > started + 5):
                break  # a solving one if there is one within 5 s, else one that runs
            left = _db(lambda: local.exclude(state__in=TERMINAL_STATES).exists())
            if left is False or time.monotonic() > started + 60:
                fault.detail = "no local run was running: nothing killed"
                return
            time.sleep(0.1)
        (run_id, attempt, _), proc = self.rng.choice(solving or agents)
        try:
            proc.kill()  # psutil checks the process is still the agent (its create time)
        except psutil.Error:
            fault.detail = f"run {run_id}: its agent exited first"
            return
        fault.at = time.time()
        fault.run = (str(run_id), attempt)
        state = "solving" if solving else "running"
        fault.detail = f"run {run_id} attempt {attempt} ({state}), agent pid {proc.pid}"

    def waiting(self, fault: Fault) -> int | None:
        """Runs of the fault's scope not yet claimed by dispatch (None: PostgreSQL is away)."""
        return _db(lambda: self._scope(fault).filter(state__in=("pending", "admitted")).count())

    def _scope(self, fault: Fault) -> Any:
        from studies.models import Run

        runs = Run.objects.filter(study__in=self.studies)
        if fault.component == "slurmctld":
            runs = runs.filter(backend=self.slurm_backend)
        return runs

    def recovery(self, fault: Fault, *, until: float) -> None:
        """After the run: from the component's return to the end of the first run dispatched
        after it (on the Slurm backend for slurmctld): the whole path, admission → dispatch →
        agent → final report, worked again. With nothing left to dispatch then, the next
        run's end."""
        if fault.component == "agent":
            self._agent_recovery(fault, until=until)
            return
        back = _at(fault.back)
        ended = self._scope(fault).filter(finished_at__gt=back).order_by("finished_at")
        first = ended.filter(provisioning_at__gt=back).first()
        if first is None and fault.waiting == 0:
            first = ended.first()
            fault.detail = "nothing left to dispatch: the next run's end"
        if first is not None and first.finished_at is not None:
            fault.recovery = max(0.0, first.finished_at.timestamp() - fault.back)
        elif fault.waiting:
            fault.recovery = until - fault.back  # at least
            fault.stuck = True
            fault.detail = f"{fault.waiting} runs were waiting; none dispatched after it ended"
        else:
            fault.detail = "no run ended after it"

    def _agent_recovery(self, fault: Fault, *, until: float) -> None:
        """After the run: the agent's run, from its kill to its end on a later attempt."""
        from studies.models import Run

        if fault.run is None:
            return
        run = Run.objects.get(pk=fault.run[0])
        killed_attempt = fault.run[1]
        if run.state != "completed" or run.finished_at is None:
            fault.recovery = until - fault.at  # at least
            fault.stuck = True
            fault.detail += f"; the run ended {run.state} (attempt {run.attempt})"
        elif run.attempt == killed_attempt:
            fault.recovery = max(0.0, run.finished_at.timestamp() - fault.at)
            fault.detail += "; its end was reported before the kill took"
        else:
            fault.recovery = run.finished_at.timestamp() - fault.at
            fault.detail += f"; completed on attempt {run.attempt}"


# -- the benchmark --------------------------------------------------------------------------


def _watch_handles(studies: list[Any], sampler: Sampler, stop: threading.Event) -> None:
    """Every 0.5 s, each attempt's handle (a Slurm job id for squeue's side of the sampler)."""
    from django.db import connection

    from studies.choices import STARTED_STATES
    from studies.models import Run

    # a handle's newest holder: a slurmctld that lost its state gives job ids out again
    runs = Run.objects.filter(study__in=studies, state__in=STARTED_STATES).exclude(handle="")
    while not stop.wait(0.5):
        rows = _db(lambda: list(runs.values_list("id", "attempt", "handle")))
        for run_id, attempt, handle in rows or []:
            sampler.handles[handle] = (str(run_id), attempt)
    connection.close()


def _kill_agents(
    chaos: Chaos,
    kills: list[Fault],
    local: Any,
    sampler: Sampler,
    made: list[Fault],
    t0: float,
) -> None:
    """The agent kills of the plan, each at its share of the local runs ended."""
    from django.db import connection

    for i, fault in enumerate(kills):
        reached = _progressed_to(fault.when, local, deadline=time.time() + DEADLINE)
        if reached != "yes":
            progress(f"agent kills {i + 1}–{len(kills)} not made: the local runs had ended")
            break
        chaos.hit(fault, sampler)
        if fault.run is not None:  # (a kill that found no agent made nothing)
            made.append(fault)
        progress(f"[agent {i + 1}/{len(kills)}] {fault.at - t0:6.1f} s kill: {fault.detail}")
    connection.close()


def _progressed_to(share: float, runs: Any, *, deadline: float) -> str:
    """Wait until `share` of `runs` have ended: "yes", "all" (every one has ended), or "stuck"
    (they stopped ending before `deadline`)."""
    from studies.choices import TERMINAL_STATES

    total = _db(runs.count) or 1
    while time.time() < deadline:
        ended = _db(lambda: runs.filter(state__in=TERMINAL_STATES).count())
        if ended == total:
            return "all"
        if ended is not None and ended >= share * total:
            return "yes"
        time.sleep(0.2)
    return "stuck"


def _log_steps(path: Path) -> int | None:
    """The time steps a solver's log shows (its `Time = …` lines), None without a log."""
    try:
        with path.open(errors="replace") as fh:
            return sum(1 for line in fh if line.startswith("Time = "))
    except OSError:
        return None


def _lost_points(studies: list[Any], runs_dir: Path) -> dict[str, Any]:
    from studies.models import Run
    from telemetry.selectors import series_length

    lost = extra = 0
    missing_logs: list[str] = []
    short: list[dict[str, Any]] = []
    for run in Run.objects.filter(study__in=studies, state="completed"):
        log = runs_dir / str(run.pk) / f"attempt-{run.attempt}" / "case" / "log.icoFoam"
        expected = _log_steps(log)
        if expected is None:
            missing_logs.append(str(run.pk))
            continue
        stored = series_length(run=run, attempt=run.attempt, name="residual.Ux")
        lost += max(0, expected - stored)
        extra += max(0, stored - expected)
        if stored != expected and len(short) < 20:
            short.append({"run": str(run.pk), "attempt": run.attempt, "log_steps": expected})
            short[-1]["stored_points"] = stored
    return {"lost": lost, "duplicated": extra, "missing_logs": missing_logs, "runs": short}


def _p95(values: list[float]) -> float:
    """Nearest-rank 95th percentile (of 20 values: the 19th smallest)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def _cleanup(studies: list[Any]) -> None:
    """Stop whatever of the studies is still running: local agents, Slurm jobs."""
    from compute.drivers import driver_for
    from studies.choices import TERMINAL_STATES
    from studies.models import Run

    for run in (
        Run.objects.filter(study__in=studies)
        .exclude(state__in=TERMINAL_STATES)
        .exclude(handle="")
        .select_related("backend")
    ):
        with contextlib.suppress(Exception):
            driver_for(run.backend).cancel(run.handle, grace=2)


def main() -> None:
    seed = int(os.environ.get("WT_CHAOS_SEED") or random.SystemRandom().randrange(1, 1_000_000))
    print(f"[chaos] seed {seed} (WT_CHAOS_SEED={seed} replays this plan)", flush=True)
    wanted = os.environ.get("WT_CHAOS_COMPONENTS", "")
    components = tuple(c for c in COMPONENTS if not wanted or c in wanted.split(","))
    _isolate()
    for name in ("postgres", "redis"):
        if name in components and not _own_service(name):
            progress(f"{name} is not the private one under .data: not hit")
            components = tuple(c for c in components if c != name)
    setup_django()

    def terminated(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)  # the finally blocks below start the services again

    signal.signal(signal.SIGTERM, terminated)
    try:
        with started("slurm"):
            _main(seed, components)
    finally:
        if again := _restore_services():
            progress(f"started again after the benchmark: {', '.join(again)}")


def _main(seed: int, components: tuple[str, ...]) -> None:
    from django.conf import settings

    from bench.common import fresh_stack
    from catalog.models import Backend
    from orchestration.tests.test_slurm_cluster import cluster, slurm_settings, slurm_unavailable
    from quotas.services import tenant_provision
    from studies.choices import TERMINAL_STATES
    from studies.models import Run, Study
    from studies.services import study_create

    if reason := slurm_unavailable():
        raise SystemExit(f"chaos: {reason}")
    rng = random.Random(seed)
    faults = plan(rng, FAULTS, components)
    slurm_backend, _ = Backend.objects.update_or_create(
        name="slurm-chaos",
        defaults={
            "kind": "slurm",
            "settings": slurm_settings(),
            "cores": cluster()["cpus"],
            "memory_gb": 16,
            "max_nodes": 1,
            "enabled": True,
        },
    )
    quota: dict[str, float | int | None] = {
        "cores": QUOTA_CORES,
        "memory_gb": 8,
        "max_runs": QUOTA_CORES,
        "max_nodes": 4,
    }
    specs, tenants = [], []
    per_backend = RUNS_EACH
    for backend in ("local", slurm_backend.name):
        tenant = tenant_provision(
            name=f"bench-chaos-{backend}", username=f"chaos-{backend}", quota=quota
        )
        Study.objects.filter(tenant=tenant).delete()  # an earlier run's
        tenants.append(tenant)
        specs.append(
            {
                "name": f"chaos on {backend}",
                "template": "cavity",
                "reuse": False,  # measured runs are computed, never reused
                "backend": backend,
                "parameters": {
                    "lid_velocity": {"linspace": [0.5, 2.0, per_backend]},
                    **PARAMETERS,
                },
            }
        )
    studies: list[Study] = []
    runs_dir = Path(settings.RUNS_DIR)
    stack = fresh_stack()
    stack.start_web()
    stack.start_worker(beat=False)
    stack.start_beat()
    stop_watch = threading.Event()
    sampler = None
    try:
        time.sleep(3)  # the worker connects
        t0 = time.time()
        studies += [
            study_create(tenant=t, owner=t.memberships.get().user, spec=spec, submit=True)
            for t, spec in zip(tenants, specs, strict=True)
        ]
        runs = Run.objects.filter(study__in=studies)
        sampler = Sampler(
            runs_dir=runs_dir,
            run_tenant={str(i): t for i, t in runs.values_list("id", "tenant_id")},
            quota={t.pk: QUOTA_CORES for t in tenants},
            slurm_conf=cluster()["slurm_conf"],
        )
        sampler.start()
        watcher = threading.Thread(
            target=_watch_handles, args=(studies, sampler, stop_watch), daemon=True
        )
        watcher.start()
        chaos = Chaos(stack=stack, studies=studies, slurm_backend=slurm_backend, rng=rng)
        progress(
            f"{2 * per_backend} runs ({per_backend} local, {per_backend} on Slurm), {len(faults)} faults"
            f" planned: {', '.join(f'{f.component}/{f.action}' for f in faults)}"
        )
        made: list[Fault] = []
        # agents are killed from a thread of their own, at their share of the local runs
        # ended (the local study ends first: it must not wait for the components' faults)
        kills = [f for f in faults if f.component == "agent"]
        killer = threading.Thread(
            target=_kill_agents,
            args=(chaos, kills, runs.filter(study=studies[0]), sampler, made, t0),
            daemon=True,
        )
        killer.start()
        hits = [f for f in faults if f.component != "agent"]
        for i, fault in enumerate(hits):
            # at its share of the runs ended (or as soon as the portal gets there)
            reached = _progressed_to(fault.when, runs, deadline=time.time() + DEADLINE)
            if reached != "yes":
                why = "every run had ended" if reached == "all" else "the runs stopped ending"
                progress(f"{why}: faults {i + 1}–{len(hits)} not made")
                break
            time.sleep(fault.delay)
            chaos.hit(fault, sampler)
            made.append(fault)
            fault.waiting = chaos.waiting(fault)
            progress(
                f"[{i + 1}/{len(hits)}] {fault.at - t0:6.1f} s {fault.component} {fault.action}"
                f" (back after {fault.back - fault.at:.1f} s) {fault.detail}"
            )
        killer.join()
        faults = sorted(made, key=lambda f: f.at)
        last = max((f.back for f in faults), default=time.time())
        while _db(runs.exclude(state__in=TERMINAL_STATES).exists) is not False:
            if time.time() > last + DEADLINE:
                progress(f"runs still not ended {DEADLINE} s after the last fault")
                break
            time.sleep(1)
        elapsed = time.time() - t0
    finally:
        stop_watch.set()
        if sampler is not None:
            sampler.stop()
        stack.stop()
        _restore_services()
        _cleanup(studies)
    _report(
        seed=seed,
        faults=faults,
        chaos=chaos,
        sampler=sampler,
        studies=studies,
        runs_dir=runs_dir,
        elapsed=elapsed,
        t0=t0,
    )


def _overlap(f: Fault, g: Fault) -> bool:
    """Whether two faults' windows (hit → recovered) meet."""
    end_f = f.back + (f.recovery or 0.0)
    end_g = g.back + (g.recovery or 0.0)
    return f.at < end_g and g.at < end_f


def _fault_row(fault: Fault, t0: float) -> dict[str, Any]:
    return {
        "t_s": round(fault.at - t0, 1),
        "component": fault.component,
        "action": fault.action,
        "back_after_s": round(fault.back - fault.at, 2),
        "recovery_s": None if fault.recovery is None else round(fault.recovery, 2),
        "stuck": fault.stuck,  # no progress until the end: recovery_s is a lower bound
        "overlaps": fault.overlaps,
        "detail": fault.detail,
    }


def _report(
    *,
    seed: int,
    faults: list[Fault],
    chaos: Chaos,
    sampler: Sampler,
    studies: list[Any],
    runs_dir: Path,
    elapsed: float,
    t0: float,
) -> None:
    from studies.models import Run

    for fault in faults:
        chaos.recovery(fault, until=t0 + elapsed)
    for fault in faults:  # another fault within its window may have slowed its recovery
        # (an agent kill holds one local run for the reaper's minute: not counted as one)
        others = [
            g.component
            for g in faults
            if g is not fault and g.component != "agent" and _overlap(fault, g)
        ]
        if others:
            fault.overlaps = others
            fault.detail = f"{fault.detail} (overlaps {', '.join(others)})".strip()
    runs = list(Run.objects.filter(study__in=studies).select_related("backend"))
    lost = [r for r in runs if r.state != "completed"]
    doubles = sorted(set(sampler.doubles) | set(sampler.slurm_doubles))
    recoveries = [f.recovery for f in faults if f.recovery is not None]
    p95 = _p95(recoveries) if recoveries else 0.0
    alone = [f.recovery for f in faults if f.recovery is not None and not f.overlaps]
    points = _lost_points(studies, runs_dir)
    retries = sum(max(0, r.attempt - 1) for r in runs)

    print(f"\nchaos: seed {seed}, {len(runs)} runs, {len(faults)} faults, {elapsed:.0f} s")
    print(f"{'t (s)':>7}  {'component':<10} {'action':<8} {'back s':>6} {'recovery s':>10}  detail")
    for f in faults:
        rec = "—" if f.recovery is None else f"{'≥ ' if f.stuck else ''}{f.recovery:.1f}"
        print(
            f"{f.at - t0:7.1f}  {f.component:<10} {f.action:<8} {f.back - f.at:6.1f}"
            f" {rec:>10}  {f.detail}"
        )
    for r in lost:
        print(f"LOST run {r.pk} ({r.backend.name}): {r.state}, attempt {r.attempt}: {r.message}")
    for run, seen in sampler.doubles.items():
        print(
            f"DOUBLE run {run}: (attempt, pid) {seen['attempts_pids']} at {seen['at'] - t0:.1f} s"
        )
    for run, seen in sampler.slurm_doubles.items():
        print(f"DOUBLE run {run} on Slurm: {seen['attempts_jobs']} at {seen['at'] - t0:.1f} s")
    if points["missing_logs"] or points["duplicated"]:
        print(
            f"no log.icoFoam for {len(points['missing_logs'])} completed runs;"
            f" {points['duplicated']} points stored beyond the log's steps"
        )
    if alone:
        print(f"recovery p95 of the {len(alone)} faults no other overlapped: {_p95(alone):.1f} s")
    for drain in sampler.drains:
        print(f"SLURM drained a node, resumed by the benchmark: {drain}")
    print(
        f"{retries} attempts beyond the first; {sampler.samples} process samples; peak cores"
        f" in use per tenant {sorted(sampler.peak.values())} (quota {QUOTA_CORES} each)"
    )

    common: dict[str, Any] = {
        "seed": seed,
        "runs": len(runs),
        "faults": [_fault_row(f, t0) for f in faults],
        "elapsed_s": round(elapsed, 1),
        "attempts_beyond_first": retries,
        "slurm_drains_resumed": sampler.drains,
    }
    lost_rows = [
        {"run": str(r.pk), "backend": r.backend.name, "state": r.state, "attempt": r.attempt}
        | {"message": r.message[:1000]}
        for r in lost
    ]
    figures: list[tuple[str, float, str, float, dict[str, Any]]] = [
        ("chaos_lost_runs", len(lost), "runs", 0, {"lost": lost_rows}),
        (
            "chaos_double_runs",
            len(doubles),
            "runs",
            0,
            {"processes": sampler.doubles, "slurm_jobs": sampler.slurm_doubles},
        ),
        (
            "chaos_quota_overshoot",
            sampler.overshoot,
            "cores",
            0,
            {"peak_per_tenant": sampler.peak, "samples": sampler.overshoot_at},
        ),
        (
            "chaos_recovery_p95_s",
            p95,
            "s",
            TARGET_RECOVERY_S,
            {"p95_of_faults_alone_s": _p95(alone) if alone else None, "faults_alone": len(alone)},
        ),
        ("chaos_lost_points", points["lost"], "points", 0, {"points": points}),
    ]
    context = f"{len(runs)} cavity runs (local + Slurm),{len(faults)} faults,seed {seed}"
    verdicts = []
    for name, value, unit, target, extra in figures:
        met = value <= target
        verdicts.append(
            f"  {name} {value:.4g} {'meets' if met else 'MISSES'} its target ≤ {target:g}"
        )
        emit(name, value, unit, context, **common, **extra)
    print("\n".join(verdicts))


if __name__ == "__main__":
    main()
