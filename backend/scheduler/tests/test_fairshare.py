"""Fair share's arithmetic on small scenarios checked by hand (pure: no database)."""

import math

import pytest

from compute.capacity import BackendCapacity
from quotas.fit import Usage
from scheduler.fairshare import Recent, decay_factor, first_served, standing

BACKEND = BackendCapacity(name="hpc", kind="noop", cores=100, memory_gb=400.0, max_nodes=10)


def test_the_dominant_share_is_the_largest_fraction_of_any_resource():
    """30 of 100 cores and 200 of 400 GB: memory dominates at 50 %."""
    s = standing(
        holds=Usage(cores=30, memory_gb=200.0),
        recent=Recent(),
        backend=BACKEND,
        weight=1,
        weights=2,
    )
    assert s.resource == "memory" and s.dominant == pytest.approx(0.5)
    assert s.fair == pytest.approx(0.5) and s.ratio == pytest.approx(1.0)


def test_recent_use_counts_when_it_is_larger_than_what_is_held():
    s = standing(
        holds=Usage(cores=10), recent=Recent(cores=62.0), backend=BACKEND, weight=1, weights=3
    )
    assert s.dominant == pytest.approx(0.62) and s.resource == "cores"
    assert (
        s.describe("acme") == "tenant acme is above its fair share: 62 % of cores for a 33 % share"
    )


def test_weights_set_the_share_and_the_furthest_below_is_served_first():
    """A (weight 2) holds 40 cores, B (weight 1) 30: A's share is 2/3, B's 1/3; A stands at
    0.4 / 0.667 = 0.6, B at 0.3 / 0.333 = 0.9: A first, although it holds more."""
    a = standing(holds=Usage(cores=40), recent=Recent(), backend=BACKEND, weight=2, weights=3)
    b = standing(holds=Usage(cores=30), recent=Recent(), backend=BACKEND, weight=1, weights=3)
    assert a.ratio == pytest.approx(0.6) and b.ratio == pytest.approx(0.9)
    assert first_served({1: b, 2: a}) == 2
    assert first_served({}) is None
    # a tie goes to the smaller id, so the order never depends on dict order
    assert first_served({7: a, 3: a}) == 3


def test_nodes_count_only_where_runs_hold_nodes():
    nodes = BackendCapacity(
        name="c", kind="openstack", cores=100, memory_gb=400.0, max_nodes=10, holds_nodes=True
    )
    held = Usage(cores=10, memory_gb=10.0, nodes=8)
    assert standing(holds=held, recent=Recent(), backend=nodes, weight=1, weights=1).resource == (
        "nodes"
    )
    assert standing(holds=held, recent=Recent(), backend=BACKEND, weight=1, weights=1).resource == (
        "cores"
    )


def test_the_decay_halves_past_use_every_half_life():
    # held from one half-life ago until now: half the weight of holding it for ever
    assert decay_factor(start_age=60, end_age=0, half_life=60) == pytest.approx(0.5)
    # the same length of time, one half-life further back: half of that
    assert decay_factor(start_age=120, end_age=60, half_life=60) == pytest.approx(0.25)
    # held since long ago: all of it
    assert decay_factor(start_age=1e9, end_age=0, half_life=60) == pytest.approx(1.0)
    # half-life 0: only what is held now counts
    assert decay_factor(start_age=10, end_age=0, half_life=0) == 1.0
    assert decay_factor(start_age=10, end_age=5, half_life=0) == 0.0
    assert math.isclose(decay_factor(start_age=0, end_age=0, half_life=60), 0.0)
