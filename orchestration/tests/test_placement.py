"""Placement policies (orchestration/planning/placement.py) on small hand-checked scenarios: which
worker of a warm pool each run goes to, and how stable the image_aware ring is."""

from __future__ import annotations

import hashlib
import random

import pytest

from orchestration.composer import layer_digests
from orchestration.planning.placement import (
    DEFAULT_THRESHOLD,
    DIGEST_RE,
    POLICIES,
    Fleet,
    HashRing,
    PlacementState,
    RunView,
    UnknownPolicy,
    WorkerView,
    assign,
    lease,
    policy_named,
)


def digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def worker(wid: str, *, free: int = 4, cores: int = 4, cached: tuple[str, ...] = ()) -> WorkerView:
    return WorkerView(
        id=wid,
        free_cores=free,
        total_cores=cores,
        load=(cores - free) / cores,
        cached=frozenset(cached),
    )


def run(
    rid: str, *, processes: int = 1, image: str = "img", layers: tuple[str, ...] = ()
) -> RunView:
    return RunView(id=rid, processes=processes, image_digest=digest(image), layer_digests=layers)


def test_the_registered_names_and_an_unknown_one():
    assert list(POLICIES) == ["least_loaded", "round_robin", "random", "image_aware"]
    for name in POLICIES:
        assert policy_named(name).name == name
    with pytest.raises(UnknownPolicy, match="least_loaded, round_robin, random, image_aware"):
        policy_named("fastest")


def test_round_robin_goes_round_in_id_order_skipping_full_workers():
    fleet = Fleet([worker("c"), worker("a"), worker("b", free=0)])
    state = PlacementState()
    rr = policy_named("round_robin")
    picks = [rr.place(run(f"r{i}"), fleet, state) for i in range(5)]
    assert picks == ["a", "c", "a", "c", "a"]  # b is full: skipped
    assert state.cursor == 1  # after a (index 0)
    # a 5-core run fits nobody: no worker, the cursor stays
    assert rr.place(run("big", processes=5), fleet, state) is None and state.cursor == 1


def test_round_robin_over_a_queue_charges_each_worker():
    fleet = Fleet([worker("a", free=2), worker("b", free=1)])
    placed = assign(
        [run(f"r{i}") for i in range(4)], fleet, policy_named("round_robin"), PlacementState()
    )
    # a, b, a; then nobody has room for r3
    assert placed == {"r0": "a", "r1": "b", "r2": "a"}
    assert fleet["a"].free_cores == 0 and fleet["a"].load == 1.0


def test_random_is_reproducible_with_a_seed_and_only_picks_workers_with_room():
    fleet = Fleet([worker(w) for w in "abcdef"] + [worker("full", free=0)])
    rnd = policy_named("random")

    def draw(seed: int) -> list[str | None]:
        state = PlacementState(rng=random.Random(seed))
        return [rnd.place(run(f"r{i}"), fleet, state) for i in range(50)]

    assert draw(7) == draw(7)
    assert draw(7) != draw(8)
    assert "full" not in draw(7)
    assert set(draw(7)) == set("abcdef")  # 50 draws reach all six
    only = Fleet([worker("x", free=0), worker("y", free=1)])
    assert rnd.place(run("r"), only, PlacementState(rng=random.Random(1))) == "y"
    assert rnd.place(run("r", processes=2), only, PlacementState()) is None


def test_least_loaded_picks_the_lowest_load_and_breaks_ties_by_id():
    ll = policy_named("least_loaded")
    fleet = Fleet([worker("b", free=3), worker("a", free=2), worker("c", free=3)])
    # loads: a 0.5, b 0.25, c 0.25 → b (tie with c, b first by id)
    assert ll.place(run("r"), fleet, PlacementState()) == "b"
    # a run of 3 cores: b and c have room, a does not
    assert ll.place(run("r", processes=3), fleet, PlacementState()) == "b"
    # placing three one-core runs in a row spreads them: b, c, then the 0.5s tie → a? no:
    # after b and c each hold one more (0.5 each), a, b, c all 0.5 → a by id
    placed = assign([run("x"), run("y"), run("z")], fleet, ll, PlacementState())
    assert placed == {"x": "b", "y": "c", "z": "a"}
    assert ll.place(run("huge", processes=8), fleet, PlacementState()) is None


def test_image_aware_sends_an_image_to_its_owner_on_the_ring():
    fleet = Fleet([worker(w) for w in ("w1", "w2", "w3")])
    ia = policy_named("image_aware")
    r = run("r", image="openfoam-12")
    owner = HashRing(["w1", "w2", "w3"]).owner(r.image_digest)
    assert owner is not None
    assert ia.place(r, fleet, PlacementState()) == owner
    # every run of that image goes there while its load stays at or under the threshold
    # (4 cores, 0.8: 3 busy is 0.75, a fourth would be 1.0 only after it is placed)
    placed = assign(
        [run(f"r{i}", image="openfoam-12") for i in range(4)], fleet, ia, PlacementState()
    )
    assert set(placed.values()) == {owner}


def test_image_aware_spills_to_the_least_loaded_worker_above_the_threshold():
    r = run("r", image="openfoam-12")
    owner = HashRing(["w1", "w2", "w3"]).owner(r.image_digest)
    assert owner is not None
    others = sorted({"w1", "w2", "w3"} - {owner})
    # the owner has room (1 core) but its load 0.875 is above 0.8: the least loaded of the
    # others takes the run (others[1] at 0.5 rather than others[0] at 0.75)
    fleet = Fleet(
        [
            worker(owner, free=1, cores=8),
            worker(others[0], free=1, cores=4),
            worker(others[1], free=2, cores=4),
        ]
    )
    assert policy_named("image_aware").place(r, fleet, PlacementState()) == others[1]
    # with a threshold of 0.9 the owner keeps it
    assert policy_named("image_aware", threshold=0.9).place(r, fleet, PlacementState()) == owner


def test_image_aware_spill_prefers_the_worker_that_holds_most_of_the_image():
    layers = layer_digests(
        kind="vm",
        packages=[{"name": "openfoam-core", "version": "12"}, {"name": "icofoam", "version": "12"}],
    )
    r = run("r", image="icofoam-image", layers=layers)
    owner = HashRing(["w1", "w2", "w3", "w4"]).owner(r.image_digest)
    assert owner is not None
    rest = sorted({"w1", "w2", "w3", "w4"} - {owner})
    fleet = Fleet(
        [
            worker(owner, free=0),  # full
            worker(rest[0], free=4),  # idle, holds nothing
            worker(rest[1], free=2, cached=(layers[0],)),  # half busy, holds the base layer
            worker(rest[2], free=3, cached=(r.image_digest,)),  # holds the whole image
        ]
    )
    assert policy_named("image_aware").place(r, fleet, PlacementState()) == rest[2]
    fleet.put(worker(rest[2], free=0, cached=(r.image_digest,)))  # now full: the layer holder
    assert policy_named("image_aware").place(r, fleet, PlacementState()) == rest[1]
    # every worker with room above the threshold: the least loaded of them
    fleet = Fleet(
        [worker("a", free=1, cores=10), worker("b", free=1, cores=5), worker(owner, free=0)]
    )
    assert policy_named("image_aware").place(r, fleet, PlacementState()) == "b"  # 0.8 ≤ 0.8
    fleet = Fleet([worker("a", free=1, cores=10), worker("b", free=1, cores=8)])
    assert policy_named("image_aware").place(r, fleet, PlacementState()) == "b"  # 0.875 < 0.9
    assert (
        policy_named("image_aware").place(run("big", processes=2), fleet, PlacementState()) is None
    )


def test_the_ring_moves_about_one_nth_of_the_images_when_a_worker_is_added():
    ids = [f"worker-{i:02d}" for i in range(10)]
    images = [digest(f"image-{i}") for i in range(1000)]
    before = HashRing(ids)
    after = HashRing(ids)
    after.add("worker-new")
    moved = [d for d in images if before.owner(d) != after.owner(d)]
    # ideally 1/11 (91); the new worker takes them all, and no image moves between the others
    assert 40 <= len(moved) <= 2 * 1000 // 11
    assert {after.owner(d) for d in moved} == {"worker-new"}
    # built afresh from the 11 ids: the same owners (positions depend only on the ids)
    assert all(HashRing([*ids, "worker-new"]).owner(d) == after.owner(d) for d in images)
    # removing it again gives every image back to its old owner
    after.remove("worker-new")
    assert all(before.owner(d) == after.owner(d) for d in images)


def test_a_fleet_keeps_its_ring_when_loads_change_and_updates_it_when_workers_come_and_go():
    fleet = Fleet([worker(f"w{i}") for i in range(5)])
    ring = fleet.ring
    fleet.charge("w1", 2)
    fleet.put(worker("w2", free=1))
    assert fleet.ring is ring and fleet["w1"].free_cores == 2 and fleet["w1"].load == 0.5
    fleet.put(worker("w9"))
    assert fleet.ring is ring and len(ring) == 6 and fleet.ids[-1] == "w9"
    fleet.remove("w0")
    assert len(fleet.ring) == 5 and "w0" not in fleet.ids


def test_layer_digests_are_digests_chained_in_install_order():
    a = layer_digests(
        kind="vm",
        packages=[{"name": "openfoam-core", "version": "12"}, {"name": "icofoam", "version": "12"}],
    )
    b = layer_digests(
        kind="vm",
        packages=[
            {"name": "openfoam-core", "version": "12"},
            {"name": "simplefoam", "version": "12"},
        ],
    )
    assert all(DIGEST_RE.match(d) for d in a) and len(a) == 2
    assert a[0] == b[0] and a[1] != b[1]  # a shared foundation shares its layer
    assert (
        layer_digests(kind="container", packages=[{"name": "openfoam-core", "version": "12"}])[0]
        != a[0]
    )


def test_the_default_threshold():
    assert DEFAULT_THRESHOLD == 0.8
    with pytest.raises(ValueError, match="threshold"):
        policy_named("image_aware", threshold=1.5)


def test_a_worker_asking_takes_the_runs_placed_on_it_and_leaves_the_others():
    # least_loaded over a (idle) and b (half busy): r0 → a (0 → 0.25), r1 → a (0.25 < 0.5),
    # r2 → a (0.5 tie, a by id), r3 → b (0.5 < 0.75): the asker b takes only r3
    def fleet() -> Fleet:
        return Fleet([worker("a", free=4), worker("b", free=2)])

    queue = [run(f"r{i}") for i in range(4)]
    ll = policy_named("least_loaded")
    assert assign(queue, fleet(), ll, PlacementState()) == {
        "r0": "a",
        "r1": "a",
        "r2": "a",
        "r3": "b",
    }
    assert lease("b", queue, fleet(), ll, PlacementState()) == ["r3"]
    assert lease("a", queue, fleet(), ll, PlacementState(), limit=2) == ["r0", "r1"]
    # round robin: a takes r0; the cursor stays after a, so b's plan gives b r1, then c r2
    three = Fleet([worker("a"), worker("b"), worker("c")])
    state = PlacementState()
    rr = policy_named("round_robin")
    assert lease("a", queue[:3], three, rr, state) == ["r0"] and state.cursor == 1
    rest = Fleet([worker("a", free=3), worker("b"), worker("c")])
    assert lease("b", queue[1:3], rest, rr, state) == ["r1"] and state.cursor == 2


def _image_aware_by_scan(run: RunView, fleet: Fleet, threshold: float) -> str | None:
    """image_aware as its definition reads, over every worker: the reference the indexed
    implementation must agree with."""
    owner = fleet.ring.owner(run.image_digest)
    if owner is not None and fleet[owner].fits(run) and fleet[owner].load <= threshold:
        return owner
    room = [w for w in fleet if w.fits(run)]
    under = [w for w in room if w.load <= threshold]
    if under:
        return min(under, key=lambda w: (-w.holds(run), w.load, w.id)).id
    if room:
        whole = len(run.layer_digests) + 1
        return min(room, key=lambda w: (w.load, w.holds(run) != whole, w.id)).id
    return None


@pytest.mark.parametrize("seed", range(12))
def test_image_aware_agrees_with_a_scan_of_every_worker_as_workers_change(seed: int) -> None:
    """The indexes (workers by load, digests' holders) kept up to date through charges,
    changed caches, new and removed workers give the decisions a scan of every worker
    gives, ties and spills included."""
    rng = random.Random(seed)
    layers = [digest(f"layer-{i}") for i in range(6)]
    images = [
        RunView(
            id="",
            processes=1,
            image_digest=digest(f"image-{i}"),
            layer_digests=tuple(rng.sample(layers, rng.randint(1, 3))),
        )
        for i in range(4)
    ]

    def random_worker(wid: str) -> WorkerView:
        cores = rng.choice([2, 4, 8])
        free = rng.randint(0, cores)
        cached = set(rng.sample(layers, rng.randint(0, 4)))
        for image in images:
            if set(image.layer_digests) <= cached and rng.random() < 0.7:
                cached.add(image.image_digest)
        return worker(f"w{wid}", free=free, cores=cores, cached=tuple(cached))

    fleet = Fleet(random_worker(str(i)) for i in range(rng.randint(3, 30)))
    policy = policy_named("image_aware", threshold=rng.choice([0.5, 0.75, DEFAULT_THRESHOLD]))
    decided = 0
    for step in range(300):
        image = rng.choice(images)
        run = RunView(
            id=f"r{step}",
            processes=rng.choice([1, 1, 2, 4]),
            image_digest=image.image_digest,
            layer_digests=image.layer_digests,
        )
        expected = _image_aware_by_scan(run, fleet, policy.threshold)  # type: ignore[attr-defined]
        assert policy.place(run, fleet, PlacementState()) == expected
        if expected is not None:
            decided += 1
            fleet.charge(expected, run.processes)
        move = rng.random()
        if move < 0.1:  # a worker is back to empty, or its cache changed
            fleet.put(random_worker(rng.choice(fleet.ids)[1:]))
        elif move < 0.15:
            fleet.put(random_worker(str(100 + step)))
        elif move < 0.2 and len(fleet) > 2:
            fleet.remove(rng.choice(fleet.ids))
    assert decided > 50  # the scenario placed runs, not only refused them
