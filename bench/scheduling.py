"""Scheduling policies in the simulator (bench/sim), which runs the portal's own admission,
placement and autoscaler functions over a modelled pool, and the capacity degradation index of
the portal itself (bench/cdi.py).

Figures (docs/scheduling.md):
- placement_start_speedup: mean time to start, round_robin ÷ image_aware, 100 workers of 8
  cores, 5 images of 4 GB (a shared 1 GB base), 8 GB caches, 1 Gbit/s links, ~60 % load;
- fair_share_jain: Jain's index of the tenants' shares of a saturated pool while all three
  wait, 3 tenants of equal weight (fifo's in the context);
- sim_decisions_per_s: admission + placement decisions per CPU-second of the deciding code,
  1,000 workers, 100,000 runs queued by 5 tenants (fair_share, image_aware);
- portal_cdi_8 (bench.cdi).
"""

from __future__ import annotations

import json
import random

from bench.common import RESULTS, ROOT, SMOKE, emit, progress, setup_django, sized

PLACEMENTS = ("round_robin", "random", "least_loaded", "image_aware")


def _arrivals(
    *,
    tenants: list[str],
    images: int,
    runs: int,
    seconds: float,
    seed: int,
    scenario,
    sizes: tuple[int, int] = (10, 50),
) -> list:
    """Studies of `sizes` runs arriving over `seconds`, each of a random tenant and image,
    until `runs` runs."""
    rng = random.Random(seed)
    studies, total = [], 0
    while total < runs:
        n = min(rng.randint(*sizes), runs - total)
        studies.append(
            scenario.Study(
                tenant=rng.choice(tenants),
                submit_at=rng.uniform(0, seconds),
                runs=n,
                image=rng.randrange(images),
                duration_s=120.0,
                spread=0.5,
            )
        )
        total += n
    return sorted(studies, key=lambda s: s.submit_at)


def placement_scenarios(model, scenario) -> list:
    """Each placement policy on the same arrivals, at 20, 100 and 1,000 workers (~60 % load:
    4 runs/s per 100 workers of 8 cores, runs of 120 s, studies of 10–50 runs), from zero
    with the autoscaler, and at 100 workers with bursts (studies of 10–400 runs)."""
    out = []
    hosts = (20, 100) if SMOKE else (20, 100, 1000)
    images = scenario.images(5)
    seconds = sized(1800, 300)
    bursty = _arrivals(
        tenants=["a", "b", "c"],
        images=5,
        runs=int(4.0 * seconds),
        seconds=seconds,
        seed=7,
        scenario=scenario,
        sizes=(10, 400),
    )
    for placement in ("round_robin", "image_aware"):
        sc = scenario.Scenario(
            images=images,
            studies=bursty,
            tenants={"a": 1.0, "b": 1.0, "c": 1.0},
            workers=100,
            placement=placement,
        )
        result = model.Simulation(sc, name="100 workers, studies of 10-400").run()
        progress(
            f"{result.scenario:<32} {placement:<13} start mean {result.mean_start_s:6.1f} s "
            f"p95 {result.p95_start_s:6.1f} s"
        )
        out.append(result)
    for workers in hosts:
        seconds = sized(1800 if workers <= 100 else 600, 300)
        rate = 4.0 * workers / 100
        studies = _arrivals(
            tenants=["a", "b", "c"],
            images=5,
            runs=int(rate * seconds),
            seconds=seconds,
            seed=workers,
            scenario=scenario,
        )
        names = PLACEMENTS if workers != 1000 else ("round_robin", "image_aware")
        for autoscale in (False, True) if workers == 100 else (False,):
            for placement in names:
                sc = scenario.Scenario(
                    images=images,
                    studies=studies,
                    tenants={"a": 1.0, "b": 1.0, "c": 1.0},
                    workers=workers,
                    placement=placement,
                    autoscale=autoscale,
                    boot_s=60.0,
                )
                label = f"{workers} workers{', autoscaled' if autoscale else ''}"
                result = model.Simulation(sc, name=label).run()
                progress(
                    f"{label:<24} {placement:<13} start mean {result.mean_start_s:6.1f} s "
                    f"p95 {result.p95_start_s:6.1f} s, makespan {result.makespan_s:7.0f} s, "
                    f"{result.worker_hours:6.1f} worker-h, {result.decisions_per_s:,.0f} "
                    "decisions/s"
                )
                out.append(result)
    return out


def fairness_scenarios(model, scenario) -> list:
    """3 tenants of equal weight, each one study, submitted 30 s apart, on a saturated pool."""
    out = []
    runs = sized(2000, 150)
    for admission in ("fifo", "fair_share"):
        sc = scenario.Scenario(
            images=scenario.images(1),
            studies=[
                scenario.Study(tenant=t, submit_at=30.0 * i, runs=runs, image=0, spread=0.3)
                for i, t in enumerate(("a", "b", "c"))
            ],
            tenants={"a": 1.0, "b": 1.0, "c": 1.0},
            workers=sized(20, 4),
            admission=admission,
        )
        result = model.Simulation(sc, name="3 tenants, saturated").run()
        shares = ", ".join(f"{t} {v / 3600:.0f}" for t, v in result.shares.items())
        progress(
            f"fairness {admission:<10} Jain {result.jain:.3f} (core-hours while all wait: "
            f"{shares}); mean start {result.mean_start_s:.0f} s"
        )
        out.append(result)
    return out


def decision_rate(model, scenario):
    """1,000 workers, 100,000 runs queued at once by 5 tenants: the deciding code's CPU."""
    tenants = ["t1", "t2", "t3", "t4", "t5"]
    per = sized(20_000, 1_000)
    sc = scenario.Scenario(
        images=scenario.images(5),
        studies=[
            scenario.Study(tenant=t, submit_at=0.0, runs=per, image=i, spread=0.5)
            for i, t in enumerate(tenants)
        ],
        tenants=dict.fromkeys(tenants, 1.0),
        workers=sized(1000, 50),
        admission="fair_share",
        placement="image_aware",
        until_s=sized(900.0, 300.0),
    )
    result = model.Simulation(sc, name="1,000 workers, 100k queued").run()
    progress(
        f"decisions: {result.decisions:,} in {result.decision_cpu_s:.2f} CPU-s "
        f"({result.decisions_per_s:,.0f}/s) with {per * len(tenants):,} queued"
    )
    return result


def plot(placements: list, fairness: list) -> None:
    """docs/scheduling-sim.svg: time to start per placement policy, and the tenants' shares
    under fifo and fair share."""
    import matplotlib  # noqa: PLC0415 (a heavy import, only for the full run)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    rows = [r for r in placements if r.scenario == "100 workers"]
    names = [r.placement for r in rows]
    x = range(len(rows))
    left.bar([i - 0.2 for i in x], [r.mean_start_s for r in rows], 0.4, label="mean")
    left.bar([i + 0.2 for i in x], [r.p95_start_s for r in rows], 0.4, label="p95")
    left.set_xticks(list(x), names)
    left.set_ylabel("time to start (s)")
    left.set_title("Placement: 100 workers, 5 images of 4 GB, 8 GB caches")
    left.legend()
    for i, r in enumerate(fairness):
        total = sum(r.shares.values()) or 1.0
        bottom = 0.0
        for t, v in r.shares.items():
            right.bar(i, v / total, 0.5, bottom=bottom, label=t if i == 0 else None)
            bottom += v / total
        right.text(i, 1.02, f"Jain {r.jain:.2f}", ha="center")
    right.set_xticks(range(len(fairness)), [r.admission for r in fairness])
    right.set_ylim(0, 1.12)
    right.set_ylabel("share of the pool while all three wait")
    right.set_title("Admission: 3 tenants, saturated pool")
    right.legend(title="tenant")
    fig.tight_layout()
    fig.savefig(ROOT / "docs" / "scheduling-sim.svg")


def main() -> None:
    setup_django()
    from bench.sim import model, scenario  # noqa: PLC0415 (after Django is set up)

    placements = placement_scenarios(model, scenario)
    fairness = fairness_scenarios(model, scenario)
    rate = decision_rate(model, scenario)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / ("smoke" if SMOKE else "") / "scheduling-sim.json").parent.mkdir(exist_ok=True)
    (RESULTS / ("smoke" if SMOKE else "") / "scheduling-sim.json").write_text(
        json.dumps(
            {
                "placement": [r.as_dict() for r in placements],
                "fairness": [r.as_dict() for r in fairness],
                "decisions": rate.as_dict(),
            },
            indent=2,
        )
    )
    if not SMOKE:
        plot(placements, fairness)
    by = {r.placement: r for r in placements if r.scenario == "100 workers"}
    speedup = by["round_robin"].mean_start_s / max(by["image_aware"].mean_start_s, 1e-9)
    burst = {r.placement: r for r in placements if r.scenario.endswith("10-400")}
    burst_ratio = burst["round_robin"].mean_start_s / max(burst["image_aware"].mean_start_s, 1e-9)
    hours = ", ".join(
        f"{r.placement} {r.worker_hours:.1f}"
        for r in placements
        if r.scenario == "100 workers, autoscaled"
    )
    emit(
        "placement_start_speedup",
        speedup,
        "x",
        f"mean time to start round_robin {by['round_robin'].mean_start_s:.1f} s ÷ image_aware "
        f"{by['image_aware'].mean_start_s:.1f} s (least_loaded {by['least_loaded'].mean_start_s:.1f}, "
        f"random {by['random'].mean_start_s:.1f}); 100 workers, 5 images of 4 GB, 8 GB caches, "
        f"studies of 10-50 runs (of 10-400: {burst_ratio:.2f}x); "
        f"worker-hours from zero: {hours}" + ("" if speedup >= 2 else "; MISSES ≥ 2"),
        results=[r.as_dict() for r in placements],
    )
    fifo, fair = fairness
    emit(
        "fair_share_jain",
        fair.jain or 0.0,
        "index",
        f"3 tenants, equal weights, saturated pool, while all wait; fifo {fifo.jain:.3f}"
        + ("" if (fair.jain or 0) >= 0.95 else "; MISSES ≥ 0.95"),
        results=[r.as_dict() for r in fairness],
    )
    emit(
        "sim_decisions_per_s",
        rate.decisions_per_s,
        "decisions/s",
        f"admission (fair_share) + placement (image_aware), {rate.decisions:,} decisions, "
        f"{sc_size(rate)} " + ("" if rate.decisions_per_s >= 5000 else "; MISSES ≥ 5000"),
        result=rate.as_dict(),
    )
    try:
        from bench import cdi  # noqa: PLC0415 (its own benchmark, run last)
    except ImportError:
        progress("bench/cdi.py not found: portal_cdi_8 not measured")
        return
    cdi.main()


def sc_size(result) -> str:
    return f"{result.scenario}, CPU of the deciding code {result.decision_cpu_s:.2f} s"


if __name__ == "__main__":
    main()
