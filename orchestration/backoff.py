"""How long to wait before trying again: one formula for everything that retries (the run
agent reaching the portal, SSH to a cluster, a run's dispatch, a pool's boots, e-mail,
sign-in lockouts). Stdlib only: the run agent imports it."""

from __future__ import annotations

import random

__all__ = ["Backoff", "backoff_delay", "backoff_delays"]

_MAX_DOUBLINGS = 60  # 2**60 times anything is past every cap: no float overflow


def backoff_delay(attempt: int, *, first: float, cap: float, jitter: float = 0.0) -> float:
    """The wait before try number `attempt` + 1 (attempt 1: the first retry): `first`,
    2·`first`, 4·`first`, … never over `cap`; with `jitter` j, times a random factor in
    [1 - j, 1 + j] (so that many clients that failed together do not retry together)."""
    doublings = min(max(attempt - 1, 0), _MAX_DOUBLINGS)
    delay = min(cap, first * 2.0**doublings)
    if jitter:
        delay *= random.uniform(1.0 - jitter, 1.0 + jitter)
    return delay


class Backoff:
    """backoff_delay as a sequence: `next()` gives the next wait, `reset()` after a success."""

    def __init__(self, *, first: float, cap: float, jitter: float = 0.0) -> None:
        self.first, self.cap, self.jitter = first, cap, jitter
        self.attempt = 0

    def next(self) -> float:
        self.attempt += 1
        return backoff_delay(self.attempt, first=self.first, cap=self.cap, jitter=self.jitter)

    def reset(self) -> None:
        self.attempt = 0


def backoff_delays(retries: int, *, base: float = 0.25, cap: float = 8.0) -> list[float]:
    """The waits of `retries` retries: backoff_delay from `base`, each ±25 %."""
    return [backoff_delay(i + 1, first=base, cap=cap, jitter=0.25) for i in range(retries)]
