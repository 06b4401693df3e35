"""The simulator (bench/sim) against tiny cases computed by hand: it drives the real
admission, placement and autoscaler functions, so these also check that they compose."""

import pytest

from bench.sim.model import Simulation
from bench.sim.scenario import Scenario, Study, images, jain

ONE_LAYER = images(1, base_gb=1.0, own_gb=())  # 1 GB: 8 s over a 1 Gbit/s link


def test_a_fixed_fleet_pulls_once_per_worker_and_runs_two_at_a_time():
    """2 workers of 2 cores, 4 one-core runs of 10 s: admission takes all four at t=0;
    least_loaded places them w1, w2, w1, w2; each worker pulls the 1 GB image once (8 s) and
    both its runs start when it is there: every run waits 8 s, the last ends at 18 s; the
    fleet is up for 18 s each."""
    result = Simulation(
        Scenario(
            images=ONE_LAYER,
            studies=[Study(tenant="a", submit_at=0.0, runs=4, image=0, duration_s=10.0)],
            tenants={"a": 1.0},
            workers=2,
            worker_cores=2,
            link_gbps=1.0,
            placement="least_loaded",
        )
    ).run()
    assert result.runs == 4
    assert result.mean_start_s == pytest.approx(8.0)
    assert result.p95_start_s == pytest.approx(8.0)
    assert result.makespan_s == pytest.approx(18.0)
    assert result.worker_hours == pytest.approx(2 * 18.0 / 3600)
    assert result.decisions == 8  # 4 admitted + 4 placed


def test_the_autoscaler_boots_for_admitted_runs_and_deletes_idle_workers_after_the_timeout():
    """The same runs on a pool from zero (max 2 workers, 30 s boot, 300 s idle timeout,
    checked every 5 s): at t=0 the runs are admitted after the autoscaler's first look; at
    t=5 it boots two workers (4 cores wait, none free), ready at 35; pulls take 8 s: the runs
    start at 43 (43 s after submission) and end at 53; the workers are idle from 53 and go at
    the first look past 353, t=355: 2 × 350 s of workers."""
    result = Simulation(
        Scenario(
            images=ONE_LAYER,
            studies=[Study(tenant="a", submit_at=0.0, runs=4, image=0, duration_s=10.0)],
            tenants={"a": 1.0},
            workers=2,
            worker_cores=2,
            boot_s=30.0,
            idle_timeout_s=300.0,
            autoscale=True,
        )
    ).run()
    assert result.mean_start_s == pytest.approx(43.0)
    assert result.makespan_s == pytest.approx(53.0)
    assert result.worker_hours == pytest.approx(2 * 350.0 / 3600)


def test_fair_share_splits_a_saturated_pool_where_fifo_gives_it_to_the_first_tenant():
    """One 4-core worker; tenant a submits 40 one-core runs at t=0, b 40 at t=1. Under fifo
    a's older runs take every core that frees until a's queue is empty (b gets nothing while
    both wait: Jain's index 0.5 over two tenants); under fair share b gets freed cores until
    both hold 2 (index 1)."""

    def scenario(admission):
        return Scenario(
            images=ONE_LAYER,
            studies=[
                Study(tenant="a", submit_at=0.0, runs=40, image=0, duration_s=10.0),
                Study(tenant="b", submit_at=1.0, runs=40, image=0, duration_s=10.0),
            ],
            tenants={"a": 1.0, "b": 1.0},
            workers=1,
            worker_cores=4,
            admission=admission,
        )

    fifo = Simulation(scenario("fifo")).run()
    fair = Simulation(scenario("fair_share")).run()
    assert fifo.jain == pytest.approx(0.5)
    assert fair.jain is not None and fair.jain > 0.95
    assert fifo.makespan_s == fair.makespan_s  # the same work, shared differently


def test_jains_index():
    assert jain([1, 1, 1]) == pytest.approx(1.0)
    assert jain([1, 0, 0]) == pytest.approx(1 / 3)
