"""Backfill's decisions on small scenarios checked by hand (pure: no database)."""

from datetime import UTC, datetime, timedelta

from quotas.fit import Usage
from scheduler.backfill import Held, reserve

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def _cores(n: int) -> Usage:
    return Usage(cores=n, memory_gb=0.0, runs=1)


def _fits_in(capacity: int):
    return lambda in_use, need: in_use.cores + need.cores <= capacity


def _at(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


def test_the_reserved_start_is_the_first_end_after_which_the_run_fits():
    """4 cores; runs of 2 cores end at +10 s and +20 s; a 3-core run fits only when both
    are gone (at +10 s 2 cores are free, at +20 s 4)."""
    held = [Held(holds=_cores(2), ends_at=_at(20)), Held(holds=_cores(2), ends_at=_at(10))]
    found = reserve(
        need=_cores(3), in_use=Usage(cores=4, runs=2), held=held, fits=_fits_in(4), now=NOW
    )
    assert found is not None
    assert found.starts_at == _at(20)
    assert found.in_use_then.cores == 0


def test_a_run_that_ends_before_the_reserved_start_may_go_first_one_that_would_delay_it_not():
    """4 cores, 2 held until +100 s, a 4-core run reserved for +100 s; 2 cores are free now."""
    held = [Held(holds=_cores(2), ends_at=_at(100))]
    found = reserve(
        need=_cores(4), in_use=Usage(cores=2, runs=1), held=held, fits=_fits_in(4), now=NOW
    )
    assert found is not None and found.starts_at == _at(100)
    assert found.admits(need=_cores(1), wall_limit=50, now=NOW)  # gone at +50 s
    assert found.admits(need=_cores(2), wall_limit=100, now=NOW)  # gone just in time
    assert not found.admits(need=_cores(1), wall_limit=101, now=NOW)  # would delay it
    assert not found.admits(need=_cores(1), wall_limit=None, now=NOW)  # no known end


def test_a_run_beside_the_reserved_one_may_go_while_room_is_left_at_its_start():
    """6 cores, 4 held until +60 s, a 4-core run reserved for +60 s: at that start 2 cores
    are left beside it, so two 1-core runs with no wall limit may start now, a third not."""
    held = [Held(holds=_cores(4), ends_at=_at(60))]
    found = reserve(
        need=_cores(4), in_use=Usage(cores=4, runs=1), held=held, fits=_fits_in(6), now=NOW
    )
    assert found is not None and found.starts_at == _at(60)
    for _ in range(2):
        assert found.admits(need=_cores(1), wall_limit=None, now=NOW)
        found.count(need=_cores(1), wall_limit=None, now=NOW)
    assert not found.admits(need=_cores(1), wall_limit=None, now=NOW)
    # one that ends before the start does not take from what is left then
    assert found.admits(need=_cores(1), wall_limit=30, now=NOW)
    found.count(need=_cores(1), wall_limit=30, now=NOW)
    assert found.in_use_then.cores == 2


def test_no_reservation_when_the_start_depends_on_a_run_with_no_wall_limit():
    held = [Held(holds=_cores(2), ends_at=None), Held(holds=_cores(2), ends_at=_at(10))]
    assert (
        reserve(need=_cores(4), in_use=Usage(cores=4, runs=2), held=held, fits=_fits_in(4), now=NOW)
        is None
    )
    # it fits once the run with a known end is gone: that is enough
    found = reserve(
        need=_cores(2), in_use=Usage(cores=4, runs=2), held=held, fits=_fits_in(4), now=NOW
    )
    assert found is not None and found.starts_at == _at(10)


def test_a_run_end_already_past_reserves_now():
    held = [Held(holds=_cores(2), ends_at=NOW - timedelta(seconds=5))]  # overdue
    found = reserve(
        need=_cores(4), in_use=Usage(cores=2, runs=1), held=held, fits=_fits_in(4), now=NOW
    )
    assert found is not None and found.starts_at == NOW
    assert "reserved in 0 s" in found.describe(now=NOW)
