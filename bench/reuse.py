"""reuse_speedup: a study computed (reuse off) vs the same study repeated (reuse on).

Both sides go through the whole portal on the local backend with the real solver (the cavity
template's blockMesh and icoFoam): the API's services, the scheduler, Celery, the agent, the
local driver. The computed side is the study with `"reuse": false`, from submission to its
last run's end (`finished_at`, its final report committed). The reused side is the same study
submitted again, from submission to every run ended (reused at submission: no run starts).
The speedup is computed / reused, measured REPEATS times in alternating pairs (a repeat's
computed study is new: with reuse off it computes whatever came before); the headline is the
median of the pairs' ratios.

`measure_reuse_speedup(...)` is the measurement itself, for other benchmarks (`adaptive`
reports it too): it needs Django set up and a running stack (web and worker).
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

from bench.common import emit, fresh_stack, progress, setup_django, sized

RUNS = sized(8, 2)
REPEATS = sized(int(os.environ.get("WT_BENCH_REPEATS", "3")), 1)
PARAMS = {"lid_velocity": {"linspace": [0.5, 2.0, RUNS]}, "cells": 20, "end_time": 0.5}


def _study_wall(*, tenant: Any, user: Any, spec: dict, timeout: float = 900) -> tuple[float, Any]:
    """Submit `spec` and wait for every run to end: (seconds from submission to the last
    run's end, the study)."""
    from studies.choices import TERMINAL_STATES
    from studies.models import Run
    from studies.services import study_create

    t0 = time.time()
    study = study_create(tenant=tenant, owner=user, spec=spec, submit=True)
    submitted = time.time()
    runs = Run.objects.filter(study=study)
    deadline = time.monotonic() + timeout
    while runs.exclude(state__in=TERMINAL_STATES).exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"study {study.pk} did not end within {timeout:.0f} s")
        time.sleep(0.2)
    states = set(runs.values_list("state", flat=True))
    if states != {"completed"}:
        raise SystemExit(f"study {study.pk}: runs ended as {states}")
    # the last run's end as the portal recorded it (reused runs: their submission committed)
    end = max(max(runs.values_list("finished_at", flat=True)).timestamp(), submitted)
    return end - t0, study


def measure_reuse_speedup(*, tenant: Any, user: Any, spec: dict) -> dict[str, Any]:
    """One pair: `spec` computed (reuse off), then submitted again with reuse on. Returns
    {"speedup", "computed_s", "reused_s", "runs", "reused_runs"}. Needs a running stack
    (a worker to run the computed study) and a tenant whose quota fits a run."""
    from studies.models import Run

    computed_s, computed = _study_wall(
        tenant=tenant, user=user, spec={**spec, "name": f"{spec['name']} computed", "reuse": False}
    )
    reused_s, repeated = _study_wall(
        tenant=tenant, user=user, spec={**spec, "name": f"{spec['name']} reused", "reuse": True}
    )
    runs = Run.objects.filter(study=repeated)
    reused_runs = runs.filter(reused=True).count()
    if reused_runs != runs.count():
        raise SystemExit(f"only {reused_runs} of {runs.count()} runs were reused")
    return {
        "speedup": computed_s / reused_s,
        "computed_s": computed_s,
        "reused_s": reused_s,
        "runs": runs.count(),
        "reused_runs": reused_runs,
        "computed_study": str(computed.pk),
        "reused_study": str(repeated.pk),
    }


def main() -> None:
    setup_django()
    from quotas.services import tenant_provision

    tenant = tenant_provision(
        name="bench-reuse",
        username="bench-reuse",
        quota={"cores": 2, "memory_gb": 8, "max_runs": 2},
    )
    user = tenant.memberships.get().user
    spec = {"name": "reuse bench", "template": "cavity", "parameters": PARAMS}
    stack = fresh_stack()
    stack.start_web()
    stack.start_worker()
    pairs: list[dict[str, Any]] = []
    try:
        time.sleep(2)
        for i in range(REPEATS):
            pair = measure_reuse_speedup(tenant=tenant, user=user, spec=spec)
            pairs.append(pair)
            progress(
                f"[{i + 1}/{REPEATS}] computed {pair['computed_s']:.2f} s, reused"
                f" {pair['reused_s'] * 1000:.0f} ms ({pair['reused_runs']} runs reused):"
                f" {pair['speedup']:.1f}x"
            )
    finally:
        stack.stop()
    ratios = [p["speedup"] for p in pairs]
    emit(
        "reuse_speedup",
        statistics.median(ratios),
        "x",
        f"computed/reused,{RUNS} cavity runs (20x20, 0.5 s),local backend,2 at a time,"
        f"median of {REPEATS} pairs",
        pairs=pairs,
        computed_s=statistics.median(p["computed_s"] for p in pairs),
        reused_s=statistics.median(p["reused_s"] for p in pairs),
    )


if __name__ == "__main__":
    main()
