"""The benchmarks guard their targets (bench/figures.py): a figure that misses its target by
more than its noise margin fails its benchmark, with a line naming the figure, its value, its
target and the margin; at smoke size (CI) only the figures that mean something on a few runs
fail, the others are reported."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from bench import common
from bench.figures import FIGURES, Figure, at_least, at_most
from orchestration.agent.main import TEST_ONLY_SLOWDOWN_VAR

ROOT = Path(__file__).resolve().parents[3]


def test_a_miss_within_the_noise_margin_is_reported_a_miss_beyond_it_fails():
    ceiling = at_most(1.03, margin=0.04)
    assert ceiling.met_by(1.03) and not ceiling.missed_beyond(1.03, 0.04)
    assert not ceiling.met_by(1.06) and not ceiling.missed_beyond(1.06, 0.04)
    assert ceiling.missed_beyond(1.08, 0.04)
    floor = at_least(2000, margin=200)
    assert not floor.missed_beyond(1850, 200) and floor.missed_beyond(1750, 200)
    assert floor.limit(200) == 1800 and ceiling.limit(0.04) == pytest.approx(1.07)


def test_every_bench_line_says_whether_its_figure_meets_its_target(monkeypatch):
    monkeypatch.setattr(common, "SMOKE", False)
    assert common.verdict_of("overhead_ratio", 1.02) == " [meets ≤ 1.03]"
    assert common.verdict_of("overhead_ratio", 1.05).startswith(" [misses ≤ 1.03, within")
    assert common.verdict_of("overhead_ratio", 1.2) == " [MISSES ≤ 1.03]"
    assert common.verdict_of("downsample_speedup", 3.0) == " [no target]"


def test_at_smoke_size_a_figure_that_follows_the_machines_speed_is_reported_not_failed(
    monkeypatch,
):
    monkeypatch.setattr(common, "SMOKE", True)
    # dispatch_rate is runs per second: a slow CI runner is not a slow portal
    assert FIGURES["dispatch_rate"].smoke_margin is None
    assert common.guard_failure("dispatch_rate", 10.0, "runs/s") is None
    assert "reported, not failed" in common.verdict_of("dispatch_rate", 10.0)
    # overhead_ratio is against a baseline of the same run: it fails past its smoke margin
    failure = common.guard_failure("overhead_ratio", 2.0, "x")
    assert failure is not None
    assert "overhead_ratio = 2 x misses its target ≤ 1.03" in failure
    assert "noise margin 0.5 at smoke size" in failure


def test_the_ratio_figures_the_issue_names_have_the_targets_it_sets():
    def target(name: str) -> str:
        figure: Figure = FIGURES[name]
        return str(figure.target)

    assert target("overhead_ratio") == "≤ 1.03"
    assert target("dispatch_rate") == "≥ 2,000"
    assert target("live_latency_p95_ms") == "≤ 100"
    assert target("live_latency_p99_ms") == "≤ 150"
    assert target("large_study_http_submit_s") == "≤ 3"
    assert target("large_study_http_cancel_s") == "≤ 0.5"
    assert target("large_study_http_delete_s") == "≤ 0.5"
    assert target("large_study_http_page_ms") == "≤ 150"


@pytest.mark.slow
@pytest.mark.solver
@pytest.mark.xdist_group("bench_guard")
def test_smoke_benchmarks_fail_when_the_run_path_is_deliberately_slowed():
    """`make bench SMOKE=1 NAME=overhead` as CI runs it, with every run's agent waiting as
    long again as its steps took (the test-only hook: a run path twice as slow, however
    loaded the machine): the overhead benchmark exits 1 and says which figure missed, by how
    much, and against which target and margin."""
    # as from a shell: none of this test worker's settings (its database, Redis DB, queue,
    # directories), which scripts/bench's bootstrap would otherwise write into .data/env
    worker_settings = {
        "DATABASE_URL",
        "REDIS_URL",
        "TEST_DATABASE_URL",
        "TEST_REDIS_URL",
        "CELERY_QUEUE",
        "CELERY_BROKER_URL",
        "WINDTUNNEL_DATA_DIR",
        "WINDTUNNEL_METRICS_DIR",
        "WINDTUNNEL_TEST_WORKER",
        "PYTEST_XDIST_WORKER",
        "DJANGO_SETTINGS_MODULE",
    }
    env = {
        **{k: v for k, v in os.environ.items() if k not in worker_settings},
        "WT_BENCH_SMOKE": "1",
        "WT_BENCH_DB": "windtunnel_bench_guard",
        "WT_BENCH_REDIS_DB": "13",
        TEST_ONLY_SLOWDOWN_VAR: "1",
    }
    environment = (ROOT / ".data" / "env").read_text()
    done = subprocess.run(
        [str(ROOT / "scripts/bench"), "overhead"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 1, out + done.stderr[-3000:]
    bench_line = next(line for line in out.splitlines() if line.startswith("BENCH overhead_ratio"))
    assert bench_line.endswith("[MISSES ≤ 1.03]"), bench_line
    guard = next(line for line in out.splitlines() if line.startswith("GUARD overhead:"))
    value = float(bench_line.split()[2])
    assert value > 1.03 + 0.5, bench_line
    assert f"overhead_ratio = {value:.4g} x misses its target ≤ 1.03 x" in guard, guard
    assert "by more than its noise margin 0.5 at smoke size (fails past 1.53)" in guard, guard
    assert "== benchmarks that failed: overhead" in out
    # the portal's own settings (`make run`'s database and Redis) are as they were
    assert (ROOT / ".data" / "env").read_text() == environment
