"""portal_cpu_share: the CPU the portal spends on a run (web, worker with beat, PostgreSQL,
the run's agent) against the CPU of the run's own solver, for the 16 cavity runs of
bench/overhead.py, two at a time.

CPU time, read from /proc between studies, barely moves with the host's speed, unlike wall
time: this is the steadier companion of overhead_ratio, and it says where the overhead is.
The agents' own CPU comes from their last log line. One warm-up study, then REPEATS.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import psutil

from bench.common import emit, fresh_stack, progress, setup_django, sized

RUNS = sized(16, 2)
PARAMS = {"lid_velocity": {"linspace": [0.5, 2.0, RUNS]}, "cells": 40, "end_time": 0.5}
STUDIES = sized(int(os.environ.get("WT_BENCH_REPEATS", "3")), 1)
PARTS = ("web", "worker", "beat", "postgres", "agents")


def cpu(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def portal_cpu(pids: dict[str, int]) -> dict[str, float]:
    out = {}
    for name, pid in pids.items():
        try:
            out[name] = cpu(psutil.Process(pid))
        except psutil.Error:
            out[name] = 0.0
    pg = 0.0
    for p in psutil.process_iter(["name", "cmdline"]):
        try:
            if p.info["name"] == "postgres" or (p.info["cmdline"] or [""])[0].startswith(
                "postgres"
            ):
                pg += cpu(p)
        except psutil.Error:
            pass
    out["postgres"] = pg
    return out


AGENT = re.compile(
    r"CPU ([\d.]+) s user \+ ([\d.]+) s system in the agent, ([\d.]+) s in its steps"
)


def main() -> None:
    setup_django()
    from django.conf import settings

    from quotas.services import tenant_provision
    from studies.choices import TERMINAL_STATES
    from studies.models import Run
    from studies.services import study_create

    tenant = tenant_provision(
        name="bench-portal-cpu",
        username="bench-portal-cpu",
        quota={"cores": 2, "memory_gb": 8, "max_runs": 2},
    )
    user = tenant.memberships.get().user
    spec = {"name": "cpu breakdown", "template": "cavity", "parameters": PARAMS, "reuse": False}
    stack = fresh_stack()
    stack.start_web()
    stack.start_worker()
    time.sleep(5)  # the worker starts its beat and the agent launcher
    worker = psutil.Process(stack.worker.pid)
    pids = {"web": stack.web.pid, "worker": stack.worker.pid}
    for child in worker.children():
        if "launcher" not in " ".join(child.cmdline()):
            pids["beat"] = child.pid
    samples: list[dict[str, float]] = []
    try:
        for i in range(STUDIES + 1):
            before = portal_cpu(pids)
            t0 = time.time()
            study = study_create(tenant=tenant, owner=user, spec=spec, submit=True)
            runs = Run.objects.filter(study=study)
            while runs.exclude(state__in=TERMINAL_STATES).exists():
                time.sleep(0.5)
            end = max(runs.values_list("finished_at", flat=True)).timestamp() - t0
            time.sleep(1)
            after = portal_cpu(pids)
            agent = steps = 0.0
            for run in runs:
                log = Path(settings.RUNS_DIR) / str(run.id) / f"attempt-{run.attempt}" / "agent.log"
                m = AGENT.search(log.read_text()) if log.exists() else None
                if m:
                    agent += float(m[1]) + float(m[2])
                    steps += float(m[3])
            parts = {k: (after.get(k, 0) - before.get(k, 0)) * 1000 / RUNS for k in PARTS}
            parts["agents"] = agent * 1000 / RUNS
            parts["solver"] = steps * 1000 / RUNS
            total = sum(parts[k] for k in PARTS)
            label = "warm-up" if i == 0 else f"study {i}"
            progress(
                f"{label}: makespan {end:.2f} s; per run (ms CPU): "
                + ", ".join(f"{k} {parts[k]:.0f}" for k in PARTS)
                + f"; total {total:.0f} vs solver {parts['solver']:.0f}"
            )
            if i:
                samples.append(parts)
    finally:
        stack.stop()
    mean = {k: sum(s[k] for s in samples) / len(samples) for k in (*PARTS, "solver")}
    portal = sum(mean[k] for k in PARTS)
    if mean["solver"] <= 0:
        raise SystemExit(
            "portal_cpu: the agents reported no CPU in their steps (agent.log's last line):"
            " the solver's CPU time is not reaching the agent's accounting"
        )
    emit(
        "portal_cpu_share",
        portal / mean["solver"],
        "x",
        f"portal CPU/solver CPU per run,{portal:.0f} vs {mean['solver']:.0f} ms,"
        + ",".join(f"{k} {mean[k]:.0f}" for k in PARTS)
        + f",{RUNS} cavity runs (40x40, 0.5 s),2 at a time,mean of {STUDIES} studies",
        per_run_ms=mean,
        samples=samples,
    )


if __name__ == "__main__":
    main()
