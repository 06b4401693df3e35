"""overhead_ratio: the same 16 cavity runs, two at a time, through the portal vs a bare loop.

Bare baseline (same run, same machine): the cases rendered exactly as the portal renders
them, then `xargs -P 2` running blockMesh and icoFoam in each — what an engineer's bash loop
does. Portal: a 16-run study on a 2-core quota through the API's services, the scheduler,
Celery, the agent and the local driver; makespan from submission to the last run's end.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from bench.common import ROOT, emit, fresh_stack, progress, setup_django

RUNS = 16
PARAMS = {"lid_velocity": {"linspace": [0.5, 2.0, RUNS]}, "cells": 40, "end_time": 0.5}


def bare(contexts: list[dict], workdir: Path) -> float:
    from orchestration.render import render_case

    cases = []
    for i, context in enumerate(contexts):
        dst = workdir / f"case{i:02d}"
        render_case(ROOT / "templates" / "cavity", dst, context)
        cases.append(str(dst))
    script = 'cd "$1" && blockMesh > log.blockMesh 2>&1 && icoFoam > log.icoFoam 2>&1'
    env = {**os.environ, "WM_PROJECT_DIR": "/usr/share/openfoam"}
    t0 = time.perf_counter()
    subprocess.run(
        ["xargs", "-P", "2", "-n", "1", "sh", "-c", script, "sh"],
        input="\n".join(cases).encode(),
        check=True,
        env=env,
    )
    return time.perf_counter() - t0


def main() -> None:
    setup_django()
    from studies.choices import TERMINAL_STATES
    from studies.models import Simulation
    from studies.services import study_create
    from studies.spec import spec_resolve
    from tenancy.services import tenant_create_or_update

    tenant = tenant_create_or_update(
        name="bench-overhead",
        username="bench-overhead",
        quota={"cores": 2, "memory_gb": 8, "max_runs": 2},
    )
    user = tenant.memberships.get().user
    spec = {"name": "overhead bench", "template": "cavity", "parameters": PARAMS}
    contexts = [ctx for _, ctx in spec_resolve(tenant=tenant, spec=spec).points()]

    stack = fresh_stack()
    stack.start_web()
    stack.start_worker()
    try:
        time.sleep(2)
        with tempfile.TemporaryDirectory() as tmp:
            progress(f"bare loop: {RUNS} cavity runs with xargs -P 2")
            t_bare = bare(contexts, Path(tmp))
            shutil.rmtree(tmp, ignore_errors=True)
        progress(f"bare makespan {t_bare:.2f} s; now the portal")
        t0 = time.perf_counter()
        study = study_create(tenant=tenant, owner=user, spec=spec, submit=True)
        while Simulation.objects.filter(study=study).exclude(state__in=TERMINAL_STATES).exists():
            time.sleep(0.1)
        t_portal = time.perf_counter() - t0
        states = set(Simulation.objects.filter(study=study).values_list("state", flat=True))
        if states != {"completed"}:
            raise SystemExit(f"portal runs ended as {states}")
    finally:
        stack.stop()
    ratio = t_portal / t_bare
    progress(f"portal makespan {t_portal:.2f} s")
    emit(
        "overhead_ratio",
        ratio,
        "x",
        f"portal/bare,{RUNS} cavity runs (40x40, 0.5 s),2 at a time",
        portal_s=t_portal,
        bare_s=t_bare,
        target="<= 1.05",
    )


if __name__ == "__main__":
    main()
