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
    """A figure's target: `value <op> threshold`, e.g. ≤ 1.05."""

    op: str
    threshold: float

    def met_by(self, value: float) -> bool:
        return _COMPARE[self.op](value, self.threshold)

    def __str__(self) -> str:
        return f"{self.op} {self.threshold:,g}"


@dataclass(frozen=True, kw_only=True)
class Figure:
    """One figure: the benchmark that measures it (`make bench NAME=<bench>`), the settings a
    full-size measurement uses, and its target (None: a figure to read, not to meet)."""

    bench: str
    target: Target | None = None
    settings: str = ""

    @property
    def command(self) -> str:
        return " ".join(x for x in (self.settings, f"make bench NAME={self.bench}") if x)


def at_most(threshold: float) -> Target:
    return Target(op="≤", threshold=threshold)


def below(threshold: float) -> Target:
    return Target(op="<", threshold=threshold)


def at_least(threshold: float) -> Target:
    return Target(op="≥", threshold=threshold)


FIGURES: dict[str, Figure] = {
    "dispatch_rate": Figure(bench="dispatch", target=at_least(200)),
    "portal_rss_mb": Figure(bench="memory", target=below(600)),
    "downsample_speedup": Figure(bench="downsample"),
    "ingest_ratio": Figure(bench="ingest", target=at_least(0.25)),
    "live_latency_p95_ms": Figure(bench="live_latency", target=at_most(100)),
    "overhead_ratio": Figure(bench="overhead", target=at_most(1.05)),
    "portal_cpu_share": Figure(bench="portal_cpu"),
    "request_cpu_ms_per_run": Figure(bench="request_cpu"),
    "slurm_overhead_ratio": Figure(
        bench="slurm_overhead", target=at_most(1.10), settings="WT_BENCH_REPEATS=7"
    ),
    "slurm_submit_rate": Figure(bench="slurm_submit"),
    "openstack_active_latency_s": Figure(bench="openstack"),
    "openstack_leaked_servers": Figure(bench="openstack", target=at_most(0)),
    "pool_makespan_ratio": Figure(bench="pools", target=at_most(0.5)),
    "pool_idle_worker_s_ratio": Figure(bench="pools", target=at_most(1.2)),
    "elastic_resume_ratio": Figure(bench="elastic", target=at_most(1.5)),
    "compose_cached_speedup": Figure(bench="compose_build"),
    "fuzz_failures": Figure(bench="fuzz", target=at_most(0)),
    "chaos_lost_runs": Figure(bench="chaos", target=at_most(0)),
    "chaos_double_runs": Figure(bench="chaos", target=at_most(0)),
    "chaos_quota_overshoot": Figure(bench="chaos", target=at_most(0)),
    "chaos_lost_points": Figure(bench="chaos", target=at_most(0)),
    "chaos_recovery_p95_s": Figure(bench="chaos", target=at_most(60)),
    "admission_flatness": Figure(bench="admission_flatness", target=at_most(1.5)),
    "large_study_submit_s": Figure(bench="large_study", target=at_most(3)),
    "large_study_cancel_s": Figure(bench="large_study", target=at_most(1)),
    "large_study_csv_s": Figure(bench="large_study", target=at_most(3)),
    "large_study_page_ms": Figure(bench="large_study", target=at_most(150)),
    "large_study_scaling": Figure(bench="large_study", target=at_most(12)),
    "large_study_rss_mb": Figure(bench="large_study", target=below(600)),
    "reuse_speedup": Figure(bench="reuse", target=at_least(20)),
    "adaptive_error_ratio": Figure(bench="adaptive", target=at_most(0.7)),
    "adaptive_runs_to_grid_error": Figure(bench="adaptive", target=at_most(0.6)),
    "placement_start_speedup": Figure(bench="scheduling", target=at_least(2)),
    "fair_share_jain": Figure(bench="scheduling", target=at_least(0.95)),
    "sim_decisions_per_s": Figure(bench="scheduling", target=at_least(5000)),
    "portal_cdi_8": Figure(bench="cdi", target=at_most(10)),
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
