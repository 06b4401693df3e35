"""The autoscaler's decisions on small scenarios checked by hand (pure: no database)."""

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

from dispatch.autoscale import scale_down_plan, scale_up_plan

POOL: dict[str, Any] = {
    "worker_cores": 4,
    "worker_memory_gb": 8.0,
    "min_workers": 0,
    "max_workers": 5,
}


@dataclasses.dataclass
class Room:
    cores: int | None = None
    ram_gb: float | None = None
    instances: int | None = None
    cores_used: int = 0
    ram_gb_used: float = 0.0
    instances_used: int = 0


def test_it_boots_enough_workers_for_the_cores_that_wait_beyond_free_and_booting_ones():
    """10 cores wait; 1 free on a ready worker and one 4-core worker booting: 5 short, two
    4-core workers."""
    plan = scale_up_plan(waiting=10, demand_cores=10, free_cores=1, booting=1, live=2, **POOL)
    assert plan is not None and plan.count == 2
    assert plan.reason.format(booted=2).startswith("10 run(s) wait (10 cores), 5 cores free")


def test_nothing_to_boot_when_supply_covers_demand_and_min_is_met():
    assert scale_up_plan(waiting=2, demand_cores=2, free_cores=4, booting=0, live=1, **POOL) is None


def test_min_workers_are_booted_with_nothing_waiting():
    plan = scale_up_plan(
        waiting=0, demand_cores=0, free_cores=0, booting=0, live=0, **{**POOL, "min_workers": 2}
    )
    assert plan is not None and plan.count == 2 and "< min 2" in plan.reason


def test_max_backoff_and_the_cloud_project_hold_it_back_with_their_reasons():
    at_max = scale_up_plan(waiting=9, demand_cores=40, free_cores=0, booting=0, live=5, **POOL)
    assert at_max is not None and at_max.count == 0 and "at max 5" in at_max.reason
    backing = scale_up_plan(
        waiting=9, demand_cores=40, free_cores=0, booting=0, live=1, backing_off=3, **POOL
    )
    assert backing is not None and backing.count == 0 and "after 3 failed boot(s)" in backing.reason
    # the project has 6 cores left: one 4-core worker of the 4 wanted
    capped = scale_up_plan(
        waiting=9,
        demand_cores=40,
        free_cores=0,
        booting=0,
        live=1,
        limits=Room(cores=10, cores_used=4),
        **POOL,
    )
    assert capped is not None and (capped.count, capped.wanted) == (1, 4)
    assert "allow 1 of 4" in capped.reason
    full = scale_up_plan(
        waiting=9,
        demand_cores=40,
        free_cores=0,
        booting=0,
        live=1,
        limits=Room(instances=1, instances_used=1),
        **POOL,
    )
    assert full is not None and full.count == 0 and "leave no room" in full.reason


def test_idle_workers_past_the_timeout_go_longest_idle_first_down_to_min():
    now = datetime(2026, 1, 1, tzinfo=UTC)
    idle = {
        "a": now - timedelta(seconds=400),
        "b": now - timedelta(seconds=900),
        "c": now - timedelta(seconds=100),  # idle, but not for long enough
    }
    assert scale_down_plan(idle_since=idle, live=4, min_workers=0, idle_timeout=300, now=now) == [
        "b",
        "a",
    ]
    assert scale_down_plan(idle_since=idle, live=4, min_workers=3, idle_timeout=300, now=now) == [
        "b"
    ]
    assert scale_down_plan(idle_since=idle, live=2, min_workers=2, idle_timeout=300, now=now) == []
