"""Every figure the benchmarks measure: its target and the command that reproduces it.

`bench.common.emit` reads a figure's target from here to say whether a measurement meets it,
and records full-size measurements into bench/results.json (bench/record.py), from which
scripts/render_docs.py renders the table of docs/benchmarks.md.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass

_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "≤": operator.le,
    "<": operator.lt,
    "≥": operator.ge,
    ">": operator.gt,
}


@dataclass(frozen=True, kw_only=True)
class Target:
    """A figure's target, `value <op> threshold` (e.g. ≤ 1.05), and its noise margin: how far
    past the threshold a measurement may land on a shared machine before the miss counts as a
    real one (a benchmark that lands further fails; see `Figure`)."""

    op: str
    threshold: float
    margin: float = 0.0

    def met_by(self, value: float) -> bool:
        return _COMPARE[self.op](value, self.threshold)

    def limit(self, margin: float) -> float:
        """The value past which a miss is beyond `margin`: threshold + margin for ≤ and <,
        threshold − margin for ≥ and >."""
        return self.threshold + margin if self.op in ("≤", "<") else self.threshold - margin

    def missed_beyond(self, value: float, margin: float) -> bool:
        """Whether `value` misses the target by more than `margin`."""
        return not _COMPARE[self.op](value, self.limit(margin))

    def __str__(self) -> str:
        return f"{self.op} {self.threshold:,g}"


@dataclass(frozen=True, kw_only=True)
class Figure:
    """One figure: the benchmark that measures it (`make bench NAME=<bench>`), the settings a
    full-size measurement uses, and its target (None: a figure to read, not to meet).

    A full-size measurement that misses its target by more than the target's margin fails its
    benchmark. At smoke size (`make bench SMOKE=1`, CI) a figure fails only when it has a
    `smoke_margin` (the figures that mean something on a few runs: ratios measured against a
    baseline of the same run, and counts of what must never happen) and misses by more than
    it; figures whose value follows the machine's speed are reported, never failed, there."""

    bench: str
    target: Target | None = None
    settings: str = ""
    smoke_margin: float | None = None

    @property
    def command(self) -> str:
        return " ".join(x for x in (self.settings, f"make bench NAME={self.bench}") if x)

    def margin(self, *, smoke: bool) -> float | None:
        """The noise margin a measurement is judged with (None: reported, never failed)."""
        if self.target is None:
            return None
        return self.smoke_margin if smoke else self.target.margin


def at_most(threshold: float, *, margin: float = 0.0) -> Target:
    return Target(op="≤", threshold=threshold, margin=margin)


def below(threshold: float, *, margin: float = 0.0) -> Target:
    return Target(op="<", threshold=threshold, margin=margin)


def at_least(threshold: float, *, margin: float = 0.0) -> Target:
    return Target(op="≥", threshold=threshold, margin=margin)


# margins: a full-size figure's spread between measurements on the shared 2-core VM (e.g.
# a 9-pair median of overhead_ratio moves by about ±3 %); smoke margins: the spread of one
# small measurement on a CI runner, wide enough to pass a sound portal, narrow enough that a
# run path a third slower fails
FIGURES: dict[str, Figure] = {
    "dispatch_rate": Figure(bench="dispatch", target=at_least(2000, margin=200)),
    "portal_rss_mb": Figure(bench="memory", target=below(600, margin=30)),
    "downsample_speedup": Figure(bench="downsample"),
    "ingest_ratio": Figure(bench="ingest", target=at_least(0.25, margin=0.03)),
    "live_latency_p95_ms": Figure(bench="live_latency", target=at_most(100, margin=15)),
    "live_latency_p99_ms": Figure(bench="live_latency", target=at_most(150, margin=25)),
    "overhead_ratio": Figure(bench="overhead", target=at_most(1.03, margin=0.04), smoke_margin=0.5),
    "portal_cpu_share": Figure(bench="portal_cpu"),
    "request_cpu_ms_per_run": Figure(bench="request_cpu"),
    "slurm_overhead_ratio": Figure(
        bench="slurm_overhead", target=at_most(1.10, margin=0.05), settings="WT_BENCH_REPEATS=7"
    ),
    "slurm_submit_rate": Figure(bench="slurm_submit"),
    "openstack_active_latency_s": Figure(bench="openstack"),
    "openstack_leaked_servers": Figure(bench="openstack", target=at_most(0), smoke_margin=0),
    "pool_makespan_ratio": Figure(
        bench="pools", target=at_most(0.5, margin=0.05), smoke_margin=0.4
    ),
    "pool_idle_worker_s_ratio": Figure(
        bench="pools", target=at_most(1.2, margin=0.1), smoke_margin=0.5
    ),
    "elastic_resume_ratio": Figure(
        bench="elastic", target=at_most(1.5, margin=0.1), smoke_margin=1.0
    ),
    "compose_cached_speedup": Figure(bench="compose_build"),
    "gci_rel_err_vs_hand": Figure(bench="analysis", target=at_most(1e-6), smoke_margin=0),
    # at smoke size the surrogate learns from a third of the runs: reported, not failed
    "sobol_ishigami_max_abs_err": Figure(bench="analysis", target=at_most(0.05)),
    "pareto_hypervolume_ratio": Figure(bench="analysis", target=at_least(0.95)),
    # four angles at smoke size: two start cold, so the ratio means little there
    "warm_start_iteration_ratio": Figure(bench="warm_start", target=at_most(0.65, margin=0.03)),
    "warm_start_max_rel_err": Figure(bench="warm_start", target=at_most(1e-4), smoke_margin=1e-4),
    "cost_estimate_rel_err": Figure(bench="warm_start", target=at_most(0.25, margin=0.05)),
    "continue_vs_uninterrupted_rel_err": Figure(
        bench="warm_start", target=at_most(1e-6), smoke_margin=1e-6
    ),
    "fuzz_failures": Figure(bench="fuzz", target=at_most(0), smoke_margin=0),
    "chaos_lost_runs": Figure(bench="chaos", target=at_most(0), smoke_margin=0),
    "chaos_double_runs": Figure(bench="chaos", target=at_most(0), smoke_margin=0),
    "chaos_quota_overshoot": Figure(bench="chaos", target=at_most(0), smoke_margin=0),
    "chaos_lost_points": Figure(bench="chaos", target=at_most(0), smoke_margin=0),
    "chaos_recovery_p95_s": Figure(bench="chaos", target=at_most(60, margin=10)),
    "admission_flatness": Figure(
        bench="admission_flatness", target=at_most(1.5, margin=0.2), smoke_margin=0.5
    ),
    "large_study_submit_s": Figure(bench="large_study", target=at_most(3, margin=0.3)),
    "large_study_cancel_s": Figure(bench="large_study", target=at_most(1, margin=0.1)),
    "large_study_csv_s": Figure(bench="large_study", target=at_most(3, margin=0.3)),
    "large_study_page_ms": Figure(bench="large_study", target=at_most(150, margin=15)),
    "large_study_scaling": Figure(
        bench="large_study", target=at_most(12, margin=1), smoke_margin=3
    ),
    "large_study_rss_mb": Figure(bench="large_study", target=below(600, margin=30)),
    "large_study_http_submit_s": Figure(bench="large_study_http", target=at_most(3, margin=0.3)),
    "large_study_http_cancel_s": Figure(bench="large_study_http", target=at_most(0.5, margin=0.05)),
    "large_study_http_delete_s": Figure(bench="large_study_http", target=at_most(0.5, margin=0.05)),
    "large_study_http_page_ms": Figure(bench="large_study_http", target=at_most(150, margin=15)),
    "reuse_speedup": Figure(bench="reuse", target=at_least(20, margin=2)),
    "adaptive_error_ratio": Figure(bench="adaptive", target=at_most(0.7, margin=0.05)),
    "adaptive_runs_to_grid_error": Figure(bench="adaptive", target=at_most(0.6, margin=0.05)),
    "placement_start_speedup": Figure(bench="scheduling", target=at_least(2, margin=0.1)),
    "fair_share_jain": Figure(bench="scheduling", target=at_least(0.95, margin=0.01)),
    "sim_decisions_per_s": Figure(bench="scheduling", target=at_least(5000, margin=500)),
    "portal_cdi_8": Figure(bench="cdi", target=at_most(10, margin=2)),
}


def target_of(name: str) -> Target | None:
    """The target of a figure (None for a figure without one, or one not listed here)."""
    figure = FIGURES.get(name)
    return figure.target if figure else None


def threshold(name: str) -> float:
    """The threshold of a figure's target, for a benchmark that reports progress against it."""
    target = target_of(name)
    if target is None:
        raise KeyError(f"{name} has no target in bench/figures.py")
    return target.threshold
