"""Everything that retries waits the same way: doubling from a first wait up to a cap, with
jitter when many clients may have failed together."""

from __future__ import annotations

from orchestration.backoff import Backoff, backoff_delay, backoff_delays


def test_waits_double_from_the_first_and_stop_at_the_cap() -> None:
    waits = [backoff_delay(n, first=5.0, cap=60.0) for n in range(1, 8)]
    assert waits == [5.0, 10.0, 20.0, 40.0, 60.0, 60.0, 60.0]


def test_a_very_long_run_of_failures_does_not_overflow() -> None:
    assert backoff_delay(10_000, first=10.0, cap=3600.0) == 3600.0


def test_jitter_spreads_each_wait_within_its_share() -> None:
    waits = [backoff_delay(3, first=1.0, cap=100.0, jitter=0.25) for _ in range(500)]
    assert all(3.0 <= w <= 5.0 for w in waits)
    assert len({round(w, 6) for w in waits}) > 100  # not all the same wait


def test_the_sequence_starts_over_after_a_success() -> None:
    backoff = Backoff(first=0.5, cap=10.0)
    assert [backoff.next() for _ in range(7)] == [0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    backoff.reset()
    assert backoff.next() == 0.5


def test_a_list_of_waits_for_a_number_of_retries() -> None:
    waits = backoff_delays(4, base=0.25, cap=0.5)
    assert len(waits) == 4
    assert 0.1875 <= waits[0] <= 0.3125 and all(0.375 <= w <= 0.625 for w in waits[1:])
