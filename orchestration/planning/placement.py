"""Placement: which worker of a warm pool gets which run (docs/pools.md, *Placement*).

Plain Python, no Django: the portal's lease (backend/dispatch/pilots.py) and a simulator
use the same decisions. A policy answers, for one run and the pool's live workers, the
worker the run should go to, or None when no worker has room for it now:

- `round_robin`: the next worker in id order, from a cursor kept in the `PlacementState`
  passed in, that has room;
- `random`: a worker with room, drawn from the state's seeded `random.Random`;
- `least_loaded`: the worker with room and the lowest load, ties broken by id;
- `image_aware`: the worker that owns the run's image digest on a consistent-hash ring
  (virtual nodes; adding or removing a worker moves only ~1/n of the images), when it has
  room and its load is at most the threshold (0.8 by default); else, of the workers with
  room under the threshold, the one holding most of the run's image and package layers in
  its cache (then the least loaded, then by id); else the least-loaded worker with room
  (of equal loads one that holds the whole image, else by id).
  Workers report the digests their cache holds; the composer's layer digests
  (`orchestration.composer.layer_digests`) name the layers exactly.

`Fleet` indexes the workers once per change of the worker set (ids in order, the hash
ring); changing a worker's free cores, load or cache keeps the ring. `assign` places a
queue of runs in order over a fleet, charging each placed run to its worker; `lease` is
what a pool's pull protocol makes of it: a worker asking for runs takes those the plan
gives it and leaves the others to theirs. Policies are registered by name in `POLICIES`;
`policy_named` builds one.
"""

from __future__ import annotations

import bisect
import hashlib
import random
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar, Protocol

__all__ = [
    "DEFAULT_THRESHOLD",
    "DIGEST_RE",
    "POLICIES",
    "Fleet",
    "HashRing",
    "ImageAware",
    "LeastLoaded",
    "Placement",
    "PlacementState",
    "RandomPlacement",
    "RoundRobin",
    "RunView",
    "UnknownPolicy",
    "WorkerView",
    "assign",
    "lease",
    "policy_named",
]

DEFAULT_THRESHOLD = 0.8  # image_aware: the owner takes runs while its load is at most this
DEFAULT_VNODES = 64  # points per worker on the hash ring
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")


@dataclass(frozen=True, kw_only=True, slots=True)
class WorkerView:
    """What placement knows of a worker: its room, its load (busy cores ÷ cores, 0–1) and
    the image and layer digests its local cache holds."""

    id: str
    free_cores: int
    total_cores: int
    load: float
    cached: frozenset[str] = frozenset()

    def fits(self, run: RunView) -> bool:
        return self.free_cores >= run.processes

    def charged(self, cores: int) -> WorkerView:
        """This worker once it holds `cores` more cores."""
        free = self.free_cores - cores
        busy = self.total_cores - free
        return replace(
            self, free_cores=free, load=busy / self.total_cores if self.total_cores else 1.0
        )

    def holds(self, run: RunView) -> int:
        """How much of the run's image this worker's cache holds: each of its layers counts
        1, the whole image (its digest) one more than all its layers."""
        if not self.cached:
            return 0
        if run.image_digest in self.cached:
            return len(run.layer_digests) + 1
        return sum(1 for d in run.layer_digests if d in self.cached)


@dataclass(frozen=True, kw_only=True, slots=True)
class RunView:
    """What placement knows of a run: its cores and its image's digest and layer digests."""

    id: str
    processes: int
    image_digest: str
    layer_digests: tuple[str, ...] = ()


@dataclass(kw_only=True)
class PlacementState:
    """What a policy carries from one decision to the next: the round-robin cursor and the
    random generator (seeded by the caller, so a run of decisions can be replayed)."""

    cursor: int = 0
    rng: random.Random = field(default_factory=lambda: random.Random(0))


def _point(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


class HashRing:
    """A consistent-hash ring with `vnodes` points per worker. A key belongs to the first
    point at or after its hash (wrapping around). Adding a worker takes over only the keys
    falling just before its points (~1/n of them); removing one hands only its keys on."""

    __slots__ = ("_keys", "_owners", "vnodes")

    def __init__(self, ids: Iterable[str] = (), *, vnodes: int = DEFAULT_VNODES) -> None:
        self.vnodes = vnodes
        points = sorted((_point(f"{wid}#{i}"), wid) for wid in ids for i in range(vnodes))
        self._keys = [p for p, _ in points]
        self._owners = [w for _, w in points]

    def __len__(self) -> int:
        return len(self._keys) // max(self.vnodes, 1)

    def add(self, wid: str) -> None:
        for i in range(self.vnodes):
            point = _point(f"{wid}#{i}")
            at = bisect.bisect_left(self._keys, point)
            self._keys.insert(at, point)
            self._owners.insert(at, wid)

    def remove(self, wid: str) -> None:
        kept = [(k, w) for k, w in zip(self._keys, self._owners, strict=True) if w != wid]
        self._keys = [k for k, _ in kept]
        self._owners = [w for _, w in kept]

    def owner(self, key: str) -> str | None:
        if not self._keys:
            return None
        at = bisect.bisect_left(self._keys, _point(key))
        return self._owners[at if at < len(self._keys) else 0]


class Fleet:
    """The live workers of a pool, indexed for placement. The id order and the hash ring
    are built when first asked for after the set of workers changed; `put` of a known
    worker (new free cores, load or cache) keeps them. The workers in (load, id) order, and
    for each digest its holders in that order, are built when first asked for and kept in
    step by `put` and `remove` from then on."""

    __slots__ = ("_by_load", "_holders", "_ids", "_ring", "_workers", "vnodes")

    def __init__(self, workers: Iterable[WorkerView] = (), *, vnodes: int = DEFAULT_VNODES):
        self._workers: dict[str, WorkerView] = {w.id: w for w in workers}
        self._ids: tuple[str, ...] | None = None
        self._ring: HashRing | None = None
        self._by_load: list[tuple[float, str]] | None = None
        self._holders: dict[str, list[tuple[float, str]]] | None = None
        self.vnodes = vnodes

    def __len__(self) -> int:
        return len(self._workers)

    def __contains__(self, wid: object) -> bool:
        return wid in self._workers

    def __getitem__(self, wid: str) -> WorkerView:
        return self._workers[wid]

    def __iter__(self) -> Iterator[WorkerView]:
        return iter(self._workers.values())

    def put(self, worker: WorkerView) -> None:
        """Add a worker, or replace what is known of one."""
        old = self._workers.get(worker.id)
        self._workers[worker.id] = worker
        if old is None:
            self._ids = None
            if self._ring is not None:
                self._ring.add(worker.id)
        self._reindex(old, worker)

    def remove(self, wid: str) -> None:
        old = self._workers.pop(wid, None)
        if old is not None:
            self._ids = None
            if self._ring is not None:
                self._ring.remove(wid)
            self._reindex(old, None)

    def charge(self, wid: str, cores: int) -> None:
        """The worker now holds `cores` more cores (a run was placed on it)."""
        self.put(self._workers[wid].charged(cores))

    def _reindex(self, old: WorkerView | None, new: WorkerView | None) -> None:
        """Keep the orders, once built, in step with one worker's change."""
        if old is not None and new is not None and old.load == new.load:
            if old.cached == new.cached:
                return
            if self._holders is not None:  # only its cache changed
                for d in old.cached - new.cached:
                    _drop(self._holders, d, (old.load, old.id))
                for d in new.cached - old.cached:
                    bisect.insort(self._holders.setdefault(d, []), (new.load, new.id))
            return
        if self._by_load is not None:
            if old is not None:
                del self._by_load[bisect.bisect_left(self._by_load, (old.load, old.id))]
            if new is not None:
                bisect.insort(self._by_load, (new.load, new.id))
        if self._holders is not None:
            for d in old.cached if old is not None else ():
                _drop(self._holders, d, (old.load, old.id))  # type: ignore[union-attr]
            for d in new.cached if new is not None else ():
                bisect.insort(self._holders.setdefault(d, []), (new.load, new.id))  # type: ignore[union-attr]

    def holders(self, digest: str) -> list[tuple[float, str]]:
        """(load, id) of the workers whose cache holds `digest`, least loaded first."""
        if self._holders is None:
            self._holders = {}
            for w in self._workers.values():
                for d in w.cached:
                    self._holders.setdefault(d, []).append((w.load, w.id))
            for row in self._holders.values():
                row.sort()
        return self._holders.get(digest, [])

    @property
    def ids(self) -> tuple[str, ...]:
        """Worker ids in order (the round-robin order)."""
        if self._ids is None:
            self._ids = tuple(sorted(self._workers))
        return self._ids

    @property
    def ring(self) -> HashRing:
        if self._ring is None:
            self._ring = HashRing(self._workers, vnodes=self.vnodes)
        return self._ring

    def by_load(self) -> list[tuple[float, str]]:
        """(load, id) of every worker, least loaded first (ties by id)."""
        if self._by_load is None:
            self._by_load = sorted((w.load, w.id) for w in self._workers.values())
        return self._by_load

    def least_loaded(self, run: RunView) -> WorkerView | None:
        """The worker with room for `run` with the lowest load, ties by id."""
        for _, wid in self.by_load():
            w = self._workers[wid]
            if w.free_cores >= run.processes:
                return w
        return None


def _drop(index: dict[str, list[tuple[float, str]]], digest: str, key: tuple[float, str]) -> None:
    row = index.get(digest)
    if row:
        at = bisect.bisect_left(row, key)
        if at < len(row) and row[at] == key:
            del row[at]
        if not row:
            del index[digest]


class Placement(Protocol):
    """A placement policy: the worker `run` should go to, or None when none has room.

    `in_turn`: runs go out strictly in the order placed (round robin): a worker asking
    takes the runs placed on it only up to the first run placed on another worker."""

    name: ClassVar[str]
    in_turn: ClassVar[bool]

    def place(self, run: RunView, fleet: Fleet, state: PlacementState) -> str | None: ...


class RoundRobin:
    name: ClassVar[str] = "round_robin"
    in_turn: ClassVar[bool] = True

    def place(self, run: RunView, fleet: Fleet, state: PlacementState) -> str | None:
        ids = fleet.ids
        n = len(ids)
        for step in range(n):
            at = (state.cursor + step) % n
            if fleet[ids[at]].fits(run):
                state.cursor = (at + 1) % n
                return ids[at]
        return None


class RandomPlacement:
    name: ClassVar[str] = "random"
    in_turn: ClassVar[bool] = False
    TRIES = 8  # draws among all workers before drawing among those with room

    def place(self, run: RunView, fleet: Fleet, state: PlacementState) -> str | None:
        ids = fleet.ids
        if not ids:
            return None
        for _ in range(self.TRIES):
            wid = ids[state.rng.randrange(len(ids))]
            if fleet[wid].fits(run):
                return wid
        room = [wid for wid in ids if fleet[wid].fits(run)]
        return state.rng.choice(room) if room else None


class LeastLoaded:
    name: ClassVar[str] = "least_loaded"
    in_turn: ClassVar[bool] = False

    def place(self, run: RunView, fleet: Fleet, state: PlacementState) -> str | None:
        best = fleet.least_loaded(run)
        return best.id if best is not None else None


class ImageAware:
    """The package-aware scheduler of the OpenLambda work: the image's owner on the hash
    ring while its load is at most `threshold`, else the worker that holds most of the
    image under the threshold, else the least loaded (of equal loads one that holds the
    whole image)."""

    name: ClassVar[str] = "image_aware"
    in_turn: ClassVar[bool] = False

    def __init__(self, *, threshold: float = DEFAULT_THRESHOLD) -> None:
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be from 0 to 1, got {threshold}")
        self.threshold = threshold

    def place(self, run: RunView, fleet: Fleet, state: PlacementState) -> str | None:
        owner = fleet.ring.owner(run.image_digest)
        if owner is not None:
            w = fleet[owner]
            if w.fits(run) and w.load <= self.threshold:
                return owner
        # of the workers under the threshold with room, the one holding most of the image,
        # then the least loaded, then by id; else (spill) the least loaded with room, of
        # equal loads one that holds the whole image, else by id. The workers holding the
        # whole image are indexed by load: the least loaded of them with room is found
        # without a walk over the fleet
        whole_holders = fleet.holders(run.image_digest)
        for load, wid in whole_holders:
            if load > self.threshold:
                break
            if fleet[wid].free_cores >= run.processes:
                return wid
        best: tuple[int, float, str] | None = None  # (-held, load, id), under the threshold
        for load, wid in fleet.by_load():
            w = fleet[wid]
            if w.free_cores < run.processes:
                continue
            if load <= self.threshold:
                mine = (-w.holds(run), load, wid)  # none of these holds the whole image
                if best is None or mine < best:
                    best = mine
                continue
            if best is not None:
                break
            # spill: `load` is the least with room; a whole holder at it, else this one
            at = bisect.bisect_left(whole_holders, (load, ""))
            for hload, hid in whole_holders[at:]:
                if hload > load:
                    break
                if fleet[hid].free_cores >= run.processes:
                    return hid
            return wid
        return best[2] if best is not None else None


POLICIES: Mapping[str, Callable[[], Placement]] = {
    p.name: p for p in (LeastLoaded, RoundRobin, RandomPlacement, ImageAware)
}
"""The registered policies by name; the first is the default of a pool."""


class UnknownPolicy(ValueError):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"unknown placement {name!r}: use one of {', '.join(POLICIES)}")


def policy_named(name: str, *, threshold: float = DEFAULT_THRESHOLD) -> Placement:
    """The registered policy `name` (image_aware with `threshold`)."""
    if name == ImageAware.name:
        return ImageAware(threshold=threshold)
    make = POLICIES.get(name)
    if make is None:
        raise UnknownPolicy(name)
    return make()


def assign(
    runs: Sequence[RunView], fleet: Fleet, policy: Placement, state: PlacementState
) -> dict[str, str]:
    """Place `runs` in order (the oldest first), each charged to its worker before the next
    is placed: {run id: worker id} of the runs placed now (a run no worker has room for is
    left out). The fleet is changed in place."""
    out: dict[str, str] = {}
    for run in runs:
        wid = policy.place(run, fleet, state)
        if wid is not None:
            out[run.id] = wid
            fleet.charge(wid, run.processes)
    return out


def lease(
    asker: str,
    runs: Sequence[RunView],
    fleet: Fleet,
    policy: Placement,
    state: PlacementState,
    *,
    limit: int | None = None,
) -> list[str]:
    """What the worker `asker` takes when it asks for runs: the queue (`runs`, oldest
    first) is placed in order over the fleet as `assign` does, and the asker takes the runs
    placed on it (at most `limit`); runs placed on other workers are left for them to take
    when they ask. A policy that places `in_turn` (round robin) gives the asker only the runs
    placed on it before the first run placed on another worker, and the cursor is left
    where it stood after the asker's last run: the next worker's turn."""
    taken: list[str] = []
    cursor = state.cursor
    for run in runs:
        wid = policy.place(run, fleet, state)
        if wid is None:
            continue
        fleet.charge(wid, run.processes)
        if wid == asker:
            taken.append(run.id)
            cursor = state.cursor
            if limit is not None and len(taken) >= limit:
                break
        elif policy.in_turn:
            break
    state.cursor = cursor
    return taken
