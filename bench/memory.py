"""portal_rss_mb: resident memory of the portal's own processes (web, worker, beat) while a
50-run study runs, sampled every 0.5 s; the peak is reported (target < 600 MB together).

Baseline in the same run: the same processes idle before the study starts.
"""

from __future__ import annotations

import time

import psutil

from bench.common import emit, fresh_stack, progress, setup_django, sized

RUNS = sized(50, 4)


def rss(procs: list[psutil.Popen]) -> float:
    """The portal's processes only: run agents (forked by the local driver's launcher, whose
    command line they keep, or started as `-m orchestration.agent`) and their solvers belong
    to the runs."""
    total = 0
    for p in procs:
        try:
            root = psutil.Process(p.pid)
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:
            continue
        runs: set[int] = set()
        for proc in tree:
            try:
                cmdline = " ".join(proc.cmdline())
                if "orchestration.drivers.launcher" in cmdline:
                    runs.update(c.pid for c in proc.children(recursive=True))
                elif "orchestration.agent" in cmdline:
                    runs.update([proc.pid, *(c.pid for c in proc.children(recursive=True))])
            except psutil.Error:
                pass
        for proc in tree:
            if proc.pid in runs:
                continue
            try:
                total += proc.memory_info().rss
            except psutil.Error:
                pass
    return total / 1024**2


def main() -> None:
    setup_django()
    from quotas.services import tenant_provision
    from studies.choices import TERMINAL_STATES
    from studies.models import Run
    from studies.services import study_create

    tenant = tenant_provision(
        name="bench-memory",
        username="bench-memory",
        quota={"cores": 2, "memory_gb": 8, "max_runs": 2},
    )
    user = tenant.memberships.get().user
    stack = fresh_stack()
    stack.start_web()
    stack.start_worker()
    procs = [stack.web, stack.worker]
    try:
        time.sleep(4)
        idle = rss(procs)
        spec = {
            "name": "memory bench",
            "template": "cavity",
            "reuse": False,  # measured runs are computed, never reused
            "parameters": {
                "lid_velocity": {"linspace": [0.5, 2.0, RUNS]},
                "cells": 10,
                "end_time": 0.2,
            },
        }
        study = study_create(tenant=tenant, owner=user, spec=spec, submit=True)
        samples = []
        while Run.objects.filter(study=study).exclude(state__in=TERMINAL_STATES).exists():
            samples.append(rss(procs))
            time.sleep(0.5)
    finally:
        stack.stop()
    peak = max(samples) if samples else idle
    progress(f"idle {idle:.0f} MB, peak {peak:.0f} MB over {len(samples)} samples")
    emit(
        "portal_rss_mb",
        peak,
        "MB",
        f"web+worker+beat peak during a {RUNS}-run study (idle {idle:.0f} MB)",
        idle_mb=idle,
        samples=samples,
    )


if __name__ == "__main__":
    main()
