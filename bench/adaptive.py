"""adaptive_error_ratio and adaptive_runs_to_grid_error: adaptive sampling vs a uniform grid.

On the airfoil template (templates/airfoil2d, real simpleFoam runs of `ITERATIONS` SIMPLE
iterations: short, so trends rather than converged values) learning Cl and Cd over
aoa ∈ [−4, 14] × speed ∈ [10, 40]:

1. A dense reference grid (13 × 13 = 169 points) is solved once, two runs at a time, with
   the portal's own renderer and the installed OpenFOAM, and cached under .data/bench-cache/
   keyed by the template's digest, the iteration count and the grid (a rerun reads it back).
2. On those stored results, with the portal's surrogate code (orchestration/planning/surrogate.py,
   the same calls studies/batches.py makes): a uniform 5 × 5 grid (a sub-grid of the
   reference: every third point) against adaptive sampling (goal map: a Latin hypercube of
   6, then batches of 2, the runs this machine runs at once, where the map is expected to be
   most wrong), its points chosen among the
   reference grid's (so each has a real solver result; this restricts adaptive, not the grid).
   The error of each is the RMS over all 169 reference points of its prediction's error,
   per objective over that objective's spread on the reference (Cl and Cd weigh alike),
   combined as the root of their mean square. The grid's error is its better of two
   interpolations: bilinear, and the same Gaussian process fitted on the grid's 25 runs.
   - adaptive_error_ratio = adaptive's error at 25 runs ÷ the grid's at 25 (goal ≤ 0.7)
   - adaptive_runs_to_grid_error = the runs adaptive needs to reach the grid's error at 25
     runs ÷ 25 (goal ≤ 0.6)
   Both are medians over SEEDS initial designs.
3. One real adaptive study runs through the portal (web, worker, scheduler, local driver,
   agent, solver): its batches follow each other and its surrogate answers; its figures are
   printed, not compared (a few runs).
4. reuse_speedup: bench.reuse's measurement, run by `reuse()`.

Smoke mode (CI): a 5 × 5 reference grid of 30 iterations, a 3 × 3 uniform grid, one seed,
and a three-run portal study: the same code paths, figures that say nothing.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from bench.common import emit, progress, setup_django, sized
from orchestration.case import render

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "templates" / "airfoil2d"
CACHE = ROOT / ".data" / "bench-cache"


def template_digest(path: Path = TEMPLATE) -> str:
    """sha256 over the template's files (relative path and bytes), in path order."""
    h = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(str(file.relative_to(path)).encode() + b"\0")
        h.update(file.read_bytes())
    return h.hexdigest()


def _coefficients(case: Path) -> dict[str, float]:
    """Cl and Cd, the mean of the last 20 iterations (the template's objectives)."""
    (dat,) = case.glob("postProcessing/*/0/coefficient.dat")
    header: list[str] = []
    rows: list[list[float]] = []
    for line in dat.read_text().splitlines():
        if line.startswith("# Time"):
            header = line[1:].split()
        elif line and not line.startswith("#"):
            rows.append([float(v) for v in line.split()])
    tail = rows[-20:]
    return {name: sum(r[header.index(name)] for r in tail) / len(tail) for name in ("Cl", "Cd")}


def solve(point: dict[str, float], *, iterations: int) -> dict[str, Any]:
    """One real airfoil run at `point` (aoa, speed): its Cl, Cd and wall seconds."""
    spec = yaml.safe_load((TEMPLATE / "template.yaml").read_text())
    context: dict[str, Any] = {"nu": 1.0e-5, "iterations": iterations, **point}
    context.update(render.evaluate_derived(spec["derived"], context, {}))
    with tempfile.TemporaryDirectory(prefix="wt-airfoil-") as tmp:
        case = Path(tmp) / "case"
        render.render_case(TEMPLATE, case, context)
        env = {
            **os.environ,
            "WM_PROJECT_DIR": os.environ.get("WM_PROJECT_DIR", "/usr/share/openfoam"),
        }
        start = time.perf_counter()
        subprocess.run(
            ["simpleFoam"],
            cwd=case,
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        seconds = time.perf_counter() - start
        return {**point, **_coefficients(case), "seconds": seconds}


def reference_grid(
    aoas: list[float], speeds: list[float], *, iterations: int, workers: int = 2
) -> tuple[list[dict[str, Any]], bool]:
    """Every (aoa, speed) of the grid solved (or read from the cache); whether it was cached."""
    key = hashlib.sha256(
        json.dumps([template_digest(), iterations, aoas, speeds]).encode()
    ).hexdigest()[:16]
    path = CACHE / f"airfoil-grid-{key}.json"
    if path.exists():
        return json.loads(path.read_text()), True
    points = [{"aoa": a, "speed": s} for a in aoas for s in speeds]
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        rows = list(pool.map(lambda p: solve(p, iterations=iterations), points))
    CACHE.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows))
    return rows, False


def linspace(low: float, high: float, n: int) -> list[float]:
    return [round(low + (high - low) * i / (n - 1), 9) for i in range(n)]


# --- the comparison, on stored results ------------------------------------------------------

GRID_N = sized(13, 5)  # the reference grid, points a side
UNIFORM_N = sized(5, 3)  # the uniform grid compared, points a side (a sub-grid)
ITERATIONS = sized(100, 30)
SEEDS = sized(16, 1)  # initial designs: the median over 16 (5 moved it by a batch either way)
INITIAL = sized(6, 4)
BATCH = 2  # what runs at once on this machine's 2 cores
BOX = {"aoa": (-4.0, 14.0), "speed": (10.0, 40.0)}
OBJECTIVES = ("Cl", "Cd")


def _bounds():
    from orchestration.planning.surrogate import Bound

    return tuple(Bound(name=n, low=lo, high=hi) for n, (lo, hi) in BOX.items())


def _error(predict, rows: list[dict[str, Any]]) -> float:
    """RMS error over the reference rows, each objective over its spread, combined."""
    import numpy as np

    squares = []
    for name in OBJECTIVES:
        truth = np.array([r[name] for r in rows])
        guess = np.asarray(predict(name, rows))
        squares.append(float(np.mean(((guess - truth) / truth.std()) ** 2)))
    return float(np.sqrt(np.mean(squares)))


def _gp_error(rows, sampled) -> float:
    from orchestration.planning import surrogate

    models = {o: surrogate.fit(_bounds(), sampled, [p[o] for p in sampled]) for o in OBJECTIVES}
    return _error(lambda o, pts: models[o].predict(pts)[0], rows)


def grid_error(rows, aoas, speeds) -> tuple[float, dict[str, float]]:
    """The uniform sub-grid's error: the better of bilinear and GP interpolation."""
    import numpy as np
    from scipy.interpolate import RegularGridInterpolator

    step = (GRID_N - 1) // (UNIFORM_N - 1)
    ua, us = aoas[::step], speeds[::step]
    by_point = {(r["aoa"], r["speed"]): r for r in rows}
    grid = [by_point[(a, s)] for a in ua for s in us]

    def bilinear(name, pts):
        z = np.array([[by_point[(a, s)][name] for s in us] for a in ua])
        f = RegularGridInterpolator((ua, us), z)
        return f([(p["aoa"], p["speed"]) for p in pts])

    both = {"bilinear": _error(bilinear, rows), "gp": _gp_error(rows, grid)}
    return min(both.values()), both


def adaptive_errors(rows, *, budget: int, seed: int, stop: int) -> list[tuple[int, float]]:
    """(runs, error) after the initial design and after each batch, up to `budget` runs; a
    batch is cut short to have a figure at exactly `stop` runs."""
    import numpy as np

    from orchestration.planning import surrogate

    bounds = _bounds()
    candidates = [{"aoa": r["aoa"], "speed": r["speed"]} for r in rows]
    by_point = {(r["aoa"], r["speed"]): r for r in rows}
    # the initial Latin hypercube, each point moved to the nearest reference point not taken
    units = surrogate.to_unit(bounds, candidates)
    sampled: list[dict[str, Any]] = []
    for point in surrogate.latin_hypercube(bounds, INITIAL, seed=seed):
        u = surrogate.to_unit(bounds, [point])[0]
        order = np.argsort(np.sum((units - u) ** 2, axis=1))
        taken = {(p["aoa"], p["speed"]) for p in sampled}
        best = next(i for i in order if (rows[i]["aoa"], rows[i]["speed"]) not in taken)
        sampled.append(dict(rows[best]))
    out = []
    while True:
        models = {
            o: surrogate.fit(bounds, sampled, [p[o] for p in sampled], seed=seed)
            for o in OBJECTIVES
        }
        out.append((len(sampled), _error(lambda o, pts, m=models: m[o].predict(pts)[0], rows)))
        if len(sampled) >= budget:
            return out
        size = min(BATCH, budget - len(sampled))
        if len(sampled) < stop:
            size = min(size, stop - len(sampled))
        choice = surrogate.next_batch(
            models,
            size=size,
            goal="map",
            seed=seed + len(out),
            candidates=candidates,
            exclude=[{"aoa": p["aoa"], "speed": p["speed"]} for p in sampled],
        )
        sampled += [dict(by_point[(p["aoa"], p["speed"])]) for p in choice.points]


# --- one real adaptive study through the portal ------------------------------------------------


def portal_study() -> dict[str, Any]:
    """A small adaptive airfoil study through the running portal, to its end."""
    from bench.common import fresh_stack
    from quotas.services import tenant_provision
    from studies.choices import ENDED_STUDY_STATES
    from studies.models import Run, Study
    from studies.services import study_create
    from studies.surrogate_map import study_surrogate

    tenant = tenant_provision(
        name="bench-adaptive",
        username="bench-adaptive",
        quota={"cores": 2, "memory_gb": 8, "max_runs": 2},
    )
    Study.objects.filter(tenant=tenant).delete()
    budget = sized(8, 3)
    spec = {
        "name": "adaptive bench",
        "template": "airfoil2d",
        "combine": "adaptive",
        "seed": 1,
        "parameters": {
            "aoa": {"min": -4, "max": 14},
            "speed": {"min": 10, "max": 40},
            "iterations": ITERATIONS,
        },
        "adaptive": {
            "goal": "map",
            "objectives": list(OBJECTIVES),
            "initial": sized(4, 2),
            "batch": 2,
            "budget": budget,
        },
    }
    stack = fresh_stack()
    stack.start_web()
    stack.start_worker()
    try:
        t0 = time.perf_counter()
        study = study_create(
            tenant=tenant, owner=tenant.memberships.get().user, spec=spec, submit=True
        )
        deadline = t0 + 600
        while True:
            study.refresh_from_db()
            if study.state in ENDED_STUDY_STATES:
                break
            if time.perf_counter() > deadline:
                raise SystemExit(f"the adaptive study did not end in 600 s ({study.state})")
            time.sleep(1)
        seconds = time.perf_counter() - t0
    finally:
        stack.stop()
    states = set(Run.objects.filter(study=study).values_list("state", flat=True))
    if study.state != "completed" or states != {"completed"}:
        raise SystemExit(f"the adaptive study ended {study.state} with runs {states}")
    answer = study_surrogate(study=study, query={"aoa": "4", "speed": "25"})
    return {
        "runs": study.runs.count(),
        "batches": study.batches,
        "end": study.adaptive_end,
        "seconds": seconds,
        "cl_at_4deg_25ms": answer["prediction"]["Cl"],
    }


def reuse() -> None:
    """reuse_speedup (a study repeated with reuse vs without, ≥ 20): the same measurement as
    `make bench NAME=reuse` (bench.reuse), reported beside adaptive sampling's figures, the
    other way a study spends fewer runs."""
    from bench import reuse as reuse_bench

    reuse_bench.main()


def main() -> None:
    import statistics

    setup_django()
    aoas = linspace(*BOX["aoa"], GRID_N)
    speeds = linspace(*BOX["speed"], GRID_N)
    t0 = time.perf_counter()
    rows, cached = reference_grid(aoas, speeds, iterations=ITERATIONS)
    per_run = statistics.median(r["seconds"] for r in rows)
    progress(
        f"reference grid {GRID_N}×{GRID_N} of {ITERATIONS} iterations: "
        + ("read from the cache" if cached else f"solved in {time.perf_counter() - t0:.0f} s")
        + f"; one run took {per_run:.2f} s (median, when it was solved)"
    )
    grid_runs = UNIFORM_N**2
    target, grid_both = grid_error(rows, aoas, speeds)
    progress(
        f"uniform {UNIFORM_N}×{UNIFORM_N} grid: error {target:.4f} "
        f"(bilinear {grid_both['bilinear']:.4f}, GP {grid_both['gp']:.4f})"
    )
    ratios, needs, curves = [], [], []
    for seed in range(SEEDS):
        curve = adaptive_errors(rows, budget=2 * grid_runs, seed=seed, stop=grid_runs)
        curves.append(curve)
        at_grid = next(e for n, e in curve if n == grid_runs)
        reached = next((n for n, e in curve if e <= target), None)
        ratios.append(at_grid / target)
        needs.append((reached if reached is not None else 2 * grid_runs) / grid_runs)
        progress(
            f"seed {seed}: adaptive error at {grid_runs} runs {at_grid:.4f} "
            f"(ratio {ratios[-1]:.2f}); reaches the grid's error at {reached} runs; "
            f"curve {', '.join(f'{n}:{e:.3f}' for n, e in curve)}"
        )
    study = portal_study()
    progress(
        f"portal: an adaptive study of {study['runs']} real runs in {study['batches']} batches "
        f"ended ({study['end']}) in {study['seconds']:.0f} s; its surrogate predicts "
        f"Cl(4°, 25 m/s) = {study['cl_at_4deg_25ms']['mean']:.3f} "
        f"± {study['cl_at_4deg_25ms']['std']:.3f}"
    )
    reuse()
    context = (
        f"airfoil Cl+Cd over aoa[-4,14]×speed[10,40], {grid_runs} runs, vs a "
        f"{UNIFORM_N}×{UNIFORM_N} grid, reference {GRID_N}×{GRID_N} real runs of "
        f"{ITERATIONS} iterations, adaptive: an initial {INITIAL} then batches of {BATCH}, "
        f"median of {SEEDS} seeds"
    )
    extra = {
        "grid_error": target,
        "grid_errors": grid_both,
        "curves": curves,
        "reference_runs": len(rows),
        "reference_cached": cached,
        "seconds_per_run": per_run,
        "portal_study": study,
    }
    emit(
        "adaptive_runs_to_grid_error",
        statistics.median(needs),
        "x",
        f"runs adaptive needs to reach the grid's error ÷ {grid_runs}; {context}",
        samples=needs,
        **extra,
    )
    emit("adaptive_error_ratio", statistics.median(ratios), "x", context, samples=ratios, **extra)


if __name__ == "__main__":
    main()
