"""Runs that go on from a write, on the real stack (web, Celery, the local backend, real
OpenFOAM), two runs at a time:

- warm_start_iteration_ratio: the airfoil polar (aoa −4 … 10 step 2, simpleFoam, an iteration
  cap of 3,000 that no run reaches: each ends by the solver's residual control, every
  residual below 1e-5) run cold, then again with `warm_start: true`; the time steps all its
  runs took, warm ÷ cold. From 12° on the template's coarse mesh has no steady solution to
  1e-5 (its residuals stall at 2e-5 to 2e-4 and Cl cycles about its mean): those angles end
  at the cap, or by a looser rule that a warm start reaches differently, and are left out.
- warm_start_max_rel_err: the largest |Cl warm − Cl cold| over the polar, relative to the
  polar's largest |Cl| (at aoa 0 the symmetric section's Cl is near 0: a run's own Cl is no
  scale for it).
- continue_vs_uninterrupted_rel_err: the cavity (40 × 40 cells, 2 s of flow, a write every
  0.4 s) run through, and again with its agent and solver SIGKILLed once past half way (its
  second write done): the portal requeues it and its next attempt goes on from its last
  complete write. The largest relative difference of any objective; the time steps solved
  over both attempts are printed against the uninterrupted run's, and solving more than one
  write interval over fails the benchmark.

- cost_estimate_rel_err: a tenant runs 5 cavity runs (40 × 40 cells, 0.5 s of flow, lid speeds
  0.5 … 2), then submits 10 more of the same case: |the estimate's middle − the core-hours the
  10 used| ÷ what they used (the estimate is kept on the study at submission, from the 5).

Smoke mode: a polar of four angles.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from bench.common import emit, fresh_stack, progress, setup_django, sized

AOAS = sized(list(range(-4, 11, 2)), [0, 2, 4, 6])
CAP = 3000
CAVITY = {"cells": 40, "end_time": 2}
WRITE_EVERY = 0.4  # the cavity template writes every end_time / 5


def _wait(runs: Any, *, timeout: float = 3600) -> None:
    from studies.choices import TERMINAL_STATES

    deadline = time.monotonic() + timeout
    while runs.exclude(state__in=TERMINAL_STATES).exists() or runs.filter(results_at=None).exists():
        if time.monotonic() > deadline:
            raise SystemExit("the runs did not end in time")
        time.sleep(1)


def _polar(tenant: Any, user: Any, *, warm: bool) -> dict[float, Any]:
    from studies.models import Run
    from studies.services import study_create

    spec = {
        "name": f"polar {'warm' if warm else 'cold'}",
        "template": "airfoil2d",
        "parameters": {"aoa": {"values": AOAS}, "iterations": CAP},
        "reuse": False,
        "warm_start": warm,
    }
    study = study_create(tenant=tenant, owner=user, spec=spec, submit=True)
    runs = Run.objects.filter(study=study)
    _wait(runs)
    out = {r.parameters["aoa"]: r for r in runs}
    failed = [a for a, r in out.items() if r.state != "completed"]
    if failed:
        raise SystemExit(f"polar runs at aoa {failed} did not complete")
    capped = [a for a, r in out.items() if (r.iterations or 0) >= CAP]
    if capped:
        raise SystemExit(f"runs at aoa {capped} reached the iteration cap: not converged")
    return out


def _interrupted(tenant: Any, user: Any) -> tuple[Any, Any]:
    from orchestration.drivers.local import parse_handle
    from studies.models import Run
    from studies.services import study_create

    def study(name: str) -> Any:
        spec = {"name": name, "template": "cavity", "parameters": CAVITY, "reuse": False}
        return study_create(tenant=tenant, owner=user, spec=spec, submit=True)

    through = Run.objects.get(study=study("uninterrupted"))
    _wait(Run.objects.filter(pk=through.pk))
    killed = Run.objects.get(study=study("killed half way"))
    deadline = time.monotonic() + 600
    second = None
    while second is None or not (second / "U").is_file():
        killed.refresh_from_db()
        if killed.results_dir:
            second = Path(killed.results_dir) / f"{2 * WRITE_EVERY:g}"
        if time.monotonic() > deadline or killed.state in ("completed", "failed"):
            raise SystemExit(f"the run ended ({killed.state}) before it could be killed")
        time.sleep(0.05)
    parsed = parse_handle(killed.handle)
    if parsed is None:
        raise SystemExit(f"no process group in the handle {killed.handle!r}")
    os.killpg(parsed[0], signal.SIGKILL)
    progress(f"killed the agent and solver of run {killed.pk} after its write at {second.name}")
    _wait(Run.objects.filter(pk=killed.pk), timeout=900)
    through.refresh_from_db()
    killed.refresh_from_db()
    if killed.state != "completed" or killed.attempt != 2:
        raise SystemExit(f"the killed run ended {killed.state} at attempt {killed.attempt}")
    return through, killed


def _steps_solved(run: Any) -> int:
    """The time steps solved over both attempts of the killed run: those before the write it
    went on from (the write's own index), those its first attempt solved past the write
    before it was killed (as far as its points reached the portal: an unwatched run reports
    every few seconds), and those its second attempt solved."""
    from telemetry.selectors import series_values

    resumed = (run.provenance or {}).get("resumed_from") or {}
    if not resumed:
        raise SystemExit("the killed run did not go on from a write")
    time = float(resumed["time"])
    before = round(time / run.context["delta_t"])
    lost, _ = series_values(run=run, attempt=1, name="residual.Ux")
    own, _ = series_values(run=run, attempt=run.attempt, name="residual.Ux")
    return before + sum(1 for x in lost if x > time) + sum(1 for x in own if x > time)


def _estimated(user_of: Any) -> tuple[list[float], float]:
    """The core-hours a 10-run study was estimated at, after 5 runs of its case, and used."""
    from studies.models import Run
    from studies.services import study_create

    tenant, user = user_of("bench-estimate")
    Run.objects.filter(tenant=tenant).delete()  # its earlier runs would be its samples

    def study(name: str, count: int, low: float, high: float) -> Any:
        parameters = {
            "lid_velocity": {"linspace": [low, high, count]},
            "cells": 40,
            "end_time": 0.5,
        }
        spec = {"name": name, "template": "cavity", "reuse": False, "parameters": parameters}
        made = study_create(tenant=tenant, owner=user, spec=spec, submit=True)
        _wait(Run.objects.filter(study=made))
        return made

    study("5 earlier runs", 5, 0.5, 2.0)
    later = study("10 later runs", 10, 0.6, 1.9)
    later.refresh_from_db()
    estimate = (later.cost_estimate or {}).get("core_hours")
    if not estimate:
        raise SystemExit(f"the 10-run study was not estimated: {later.cost_estimate}")
    used = sum(r.core_hours or 0.0 for r in Run.objects.filter(study=later))
    return [float(estimate[0]), float(estimate[1])], used


def main() -> None:
    setup_django()
    from quotas.services import tenant_provision

    def user_of(name: str) -> tuple[Any, Any]:
        tenant = tenant_provision(
            name=name, username=name, quota={"cores": 2, "memory_gb": 8, "max_runs": 2}
        )
        return tenant, tenant.memberships.get().user

    tenant, user = user_of("bench-warm-start")
    stack = fresh_stack()
    stack.start_web()
    stack.start_worker()
    try:
        progress(f"the cold polar: {len(AOAS)} runs, aoa {AOAS[0]} to {AOAS[-1]}")
        cold = _polar(tenant, user, warm=False)
        progress("the warm polar")
        warm = _polar(tenant, user, warm=True)
        progress("the cavity, uninterrupted and killed half way")
        through, killed = _interrupted(tenant, user)
        progress("a cost estimate from 5 runs, against the 10 that follow")
        estimate, used = _estimated(user_of)
    finally:
        stack.stop()

    cold_iterations = sum(r.iterations for r in cold.values())
    warm_iterations = sum(r.iterations for r in warm.values())
    sources = sum(1 for r in warm.values() if (r.provenance or {}).get("resumed_from"))
    for aoa in AOAS:
        progress(
            f"aoa {aoa:>3}: cold {cold[aoa].iterations:>5} steps, Cl {cold[aoa].objectives['Cl']:+.6f};"
            f" warm {warm[aoa].iterations:>5} steps, Cl {warm[aoa].objectives['Cl']:+.6f}"
        )
    emit(
        "warm_start_iteration_ratio",
        warm_iterations / cold_iterations,
        "x",
        f"time steps warm/cold,airfoil polar of {len(AOAS)} angles,{sources} runs started warm,"
        "2 at a time,residual control 1e-5",
        cold_iterations=cold_iterations,
        warm_iterations=warm_iterations,
        warm_started=sources,
    )
    scale = max(abs(r.objectives["Cl"]) for r in cold.values())
    worst = max(abs(warm[a].objectives["Cl"] - cold[a].objectives["Cl"]) for a in AOAS) / scale
    emit(
        "warm_start_max_rel_err",
        worst,
        "",
        f"max |Cl warm - Cl cold| / max |Cl|,airfoil polar of {len(AOAS)} angles",
        cl_scale=scale,
    )
    errors = {
        name: abs(killed.objectives[name] - value) / max(abs(value), 1e-300)
        for name, value in through.objectives.items()
    }
    solved, uninterrupted = _steps_solved(killed), through.iterations
    interval = round(WRITE_EVERY / killed.context["delta_t"])
    progress(
        f"time steps: {uninterrupted} uninterrupted; {solved} solved over both attempts of the"
        f" killed run (one write interval: {interval}); reported {killed.iterations}"
    )
    for name, err in errors.items():
        progress(
            f"{name}: uninterrupted {through.objectives[name]!r}, continued"
            f" {killed.objectives[name]!r}, relative difference {err:.3g}"
        )
    if solved > uninterrupted + interval:
        raise SystemExit(f"{solved} time steps solved: more than one write interval over")
    emit(
        "continue_vs_uninterrupted_rel_err",
        max(errors.values()),
        "",
        f"max over objectives,cavity 40x40 2 s killed after its write at {2 * WRITE_EVERY:g} s,"
        f"{solved} steps solved vs {uninterrupted}",
        steps_solved=solved,
        steps_uninterrupted=uninterrupted,
        write_interval_steps=interval,
    )

    middle = (estimate[0] + estimate[1]) / 2
    emit(
        "cost_estimate_rel_err",
        abs(middle - used) / used,
        "",
        f"|estimate middle - used| / used,10 cavity runs after 5,estimate {estimate[0]:.4g}"
        f"-{estimate[1]:.4g} core-hours,used {used:.4g}",
        estimate_core_hours=estimate,
        used_core_hours=used,
    )


if __name__ == "__main__":
    main()
