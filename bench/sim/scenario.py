"""What a simulation is made of (images of layers, studies, the scenario's fleet and policies,
the model's workers and runs) and what it yields (a Result, Jain's index). Plain data: the
event loop that plays a scenario is bench.sim.model."""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections import OrderedDict
from datetime import UTC, datetime
from typing import Any

from scheduler.decide import Waiting
from scheduler.policies import Candidate

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
BACKEND_ID = 1


def digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


@dataclasses.dataclass(frozen=True)
class Image:
    """An image: its digest and its layers (digest, size in GB), base first."""

    digest: str
    layers: tuple[tuple[str, float], ...]

    @property
    def size_gb(self) -> float:
        return sum(size for _, size in self.layers)


def images(
    count: int, *, base_gb: float = 1.0, own_gb: tuple[float, ...] = (1.5, 1.5)
) -> list[Image]:
    """`count` images sharing one base layer, each with layers of its own."""
    base = (digest("layer:base"), base_gb)
    out = []
    for i in range(count):
        own = tuple((digest(f"layer:{i}:{j}"), gb) for j, gb in enumerate(own_gb))
        out.append(Image(digest=digest(f"image:{i}"), layers=(base, *own)))
    return out


@dataclasses.dataclass(frozen=True)
class Study:
    tenant: str
    submit_at: float
    runs: int
    image: int  # index into the scenario's images
    processes: int = 1
    duration_s: float = 60.0  # median run time
    spread: float = 0.0  # lognormal sigma of run times (0: all the same)
    priority: int = 1
    wall_limit: float | None = None


@dataclasses.dataclass
class Scenario:
    images: list[Image]
    studies: list[Study]
    tenants: dict[str, float]  # name → fair-share weight
    workers: int = 100  # the fleet (fixed), or the pool's max (autoscaled)
    worker_cores: int = 8
    worker_memory_gb: float = 32.0
    boot_s: float = 60.0
    link_gbps: float = 1.0  # a worker's pull bandwidth, Gbit/s
    cache_gb: float = 8.0
    admission: str = "fifo"
    placement: str = "least_loaded"
    autoscale: bool = False
    min_workers: int = 0
    idle_timeout_s: float = 300.0
    autoscale_every_s: float = 5.0
    quota_cores: int = 10**9
    half_life_s: float = 0.0
    until_s: float | None = None  # stop the clock here (None: when the work is done)
    seed: int = 1


@dataclasses.dataclass
class Worker:
    id: str
    cores: int
    booted_at: float
    ready_at: float
    free: int = 0
    ended_at: float | None = None
    idle_since: float | None = None
    cache: OrderedDict[str, float] = dataclasses.field(default_factory=OrderedDict)
    layer_ready: dict[str, float] = dataclasses.field(default_factory=dict)
    link_free_at: float = 0.0


@dataclasses.dataclass
class Run:
    id: str
    tenant: str
    study: int
    index: int
    processes: int
    image: Image
    duration: float
    submit_at: float
    priority: int
    wall_limit: float | None
    admitted_at: float | None = None
    start_at: float | None = None
    end_at: float | None = None
    worker: str | None = None
    # what the deciding code is handed of it, made once (it never changes)
    candidate: Candidate | None = None
    waiting: Waiting | None = None


@dataclasses.dataclass
class Result:
    scenario: str
    admission: str
    placement: str
    runs: int
    mean_start_s: float
    p95_start_s: float
    makespan_s: float
    worker_hours: float
    jain: float | None
    decisions: int
    decision_cpu_s: float
    shares: dict[str, float]

    @property
    def decisions_per_s(self) -> float:
        return self.decisions / self.decision_cpu_s if self.decision_cpu_s > 0 else math.inf

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"decisions_per_s": self.decisions_per_s}


def jain(values: list[float]) -> float:
    """Jain's fairness index: 1 when all are equal, 1/n when one has everything."""
    total, squares = sum(values), sum(v * v for v in values)
    return (total * total) / (len(values) * squares) if squares > 0 else 1.0
