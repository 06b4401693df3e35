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
import math
import os
import random
import signal
import threading
import time
from pathlib import Path
from typing import Any

from bench.chaos_faults import Chaos, Fault, plan
from bench.chaos_sampler import Sampler
from bench.chaos_services import DATA, db_call, own_service, restore_services
from bench.common import emit, progress, setup_django, sized, started

RUNS_EACH = sized(200, 6)  # on each backend
FAULTS = sized(20, 4)
QUOTA_CORES = 2
DEADLINE = sized(900, 400)  # after the last fault, for every run to end
COMPONENTS = ("web", "worker", "beat", "agent", "redis", "postgres", "slurmctld")
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


# -- the benchmark --------------------------------------------------------------------------


def _watch_handles(studies: list[Any], sampler: Sampler, stop: threading.Event) -> None:
    """Every 0.5 s, each attempt's handle (a Slurm job id for squeue's side of the sampler)."""
    from django.db import connection

    from studies.choices import STARTED_STATES
    from studies.models import Run

    # a handle's newest holder: a slurmctld that lost its state gives job ids out again
    runs = Run.objects.filter(study__in=studies, state__in=STARTED_STATES).exclude(handle="")
    while not stop.wait(0.5):
        rows = db_call(lambda: list(runs.values_list("id", "attempt", "handle")))
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

    total = db_call(runs.count) or 1
    while time.time() < deadline:
        ended = db_call(lambda: runs.filter(state__in=TERMINAL_STATES).count())
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
        if name in components and not own_service(name):
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
        if again := restore_services():
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
        while db_call(runs.exclude(state__in=TERMINAL_STATES).exists) is not False:
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
        restore_services()
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
    # their targets are in bench/figures.py; each BENCH line says whether it meets its own
    figures: list[tuple[str, float, str, dict[str, Any]]] = [
        ("chaos_lost_runs", len(lost), "runs", {"lost": lost_rows}),
        (
            "chaos_double_runs",
            len(doubles),
            "runs",
            {"processes": sampler.doubles, "slurm_jobs": sampler.slurm_doubles},
        ),
        (
            "chaos_quota_overshoot",
            sampler.overshoot,
            "cores",
            {"peak_per_tenant": sampler.peak, "samples": sampler.overshoot_at},
        ),
        (
            "chaos_recovery_p95_s",
            p95,
            "s",
            {"p95_of_faults_alone_s": _p95(alone) if alone else None, "faults_alone": len(alone)},
        ),
        ("chaos_lost_points", points["lost"], "points", {"points": points}),
    ]
    context = f"{len(runs)} cavity runs (local + Slurm),{len(faults)} faults,seed {seed}"
    for name, value, unit, extra in figures:
        emit(name, value, unit, context, **common, **extra)


if __name__ == "__main__":
    main()
