"""Backfill (EASY, as Slurm's backfill scheduler does it): a run that does not fit reserves the
earliest start at which it will, and a later run may start ahead of it only if that start
does not move.

A queued run `blocked` that does not fit a pool of capacity (the tenant's quota, or a
backend) gets a *shadow time*: running runs are taken to end at their expected end (start +
their study's `max_wall_seconds`); walking those ends in order, the first at which `blocked`
fits is its reserved start, and what is in use then is remembered. A later run may start now
when it fits now and either ends before the reserved start (now + its own wall limit) or fits
beside `blocked` at the reserved start, counting the runs backfilled before it that will
still be running then. A running run with no wall limit has no known end: if the reserved
start depends on it there is no reservation, and nothing passes the blocked run.

Pure: callers bring what is in use and a `fits(usage, shape)` check (quotas.fit), so
admission and the simulator (bench/sim) run the same decisions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

from core.text import duration_words
from quotas.fit import Usage

Fits = Callable[[Usage, Usage], bool]  # (in use, what one more run needs) -> fits?


@dataclasses.dataclass(frozen=True, kw_only=True)
class Held:
    """A running run as backfill sees it: what it holds (a Usage of one run) and when it is
    expected to end (None: no wall limit, unknown)."""

    holds: Usage
    ends_at: datetime | None


@dataclasses.dataclass(kw_only=True)
class Reservation:
    """The reserved start of a run that did not fit, and what is in use then."""

    need: Usage
    starts_at: datetime
    in_use_then: Usage  # at `starts_at`, before `need` (the runs still running then)
    fits: Fits

    def admits(self, *, need: Usage, wall_limit: float | None, now: datetime) -> bool:
        """Whether a run that fits now may start ahead of the reserved run."""
        if self._gone_by_then(wall_limit=wall_limit, now=now):
            return True
        return self.fits(self.in_use_then.plus_usage(self.need), need)

    def count(self, *, need: Usage, wall_limit: float | None, now: datetime) -> None:
        """A run started ahead of the reserved run: if it will still run at the reserved
        start, it takes from what is left then."""
        if not self._gone_by_then(wall_limit=wall_limit, now=now):
            self.in_use_then = self.in_use_then.plus_usage(need)

    def _gone_by_then(self, *, wall_limit: float | None, now: datetime) -> bool:
        if wall_limit is None:
            return False
        return now + timedelta(seconds=wall_limit) <= self.starts_at

    def describe(self, *, now: datetime) -> str:
        wait = max(0.0, (self.starts_at - now).total_seconds())
        return f"its start is reserved in {duration_words(wait)}; runs that end before then may go first"


def reserve(
    *, need: Usage, in_use: Usage, held: Iterable[Held], fits: Fits, now: datetime
) -> Reservation | None:
    """The reserved start of a run needing `need` on top of `in_use` (what `held` and others
    hold now), or None when it depends on a run whose end is unknown."""
    known = sorted((h for h in held if h.ends_at is not None), key=lambda h: h.ends_at)  # type: ignore[arg-type, return-value]
    usage = in_use
    if fits(usage, need):
        return Reservation(need=need, starts_at=now, in_use_then=usage, fits=fits)
    for h in known:
        usage = usage.minus(h.holds)
        if fits(usage, need):
            assert h.ends_at is not None
            return Reservation(
                need=need, starts_at=max(h.ends_at, now), in_use_then=usage, fits=fits
            )
    return None
