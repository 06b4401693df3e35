"""Fair share across tenants on one backend: dominant-resource fairness (DRF) with weights
and usage decay, as Slurm's fair-share factor decays past use.

A tenant's *use* of a resource on the backend (cores, memory, nodes where runs hold nodes)
is the larger of what its runs hold now and its recent average: the exponentially weighted
average of what it held, a run's use counting half after `half_life` seconds (0: only what
is held now, plain DRF). Its *dominant share* is the largest fraction of the backend's
capacity it uses of any resource; its *fair share* is its weight over the weights of the
tenants with work on the backend (holding or waiting for capacity). The tenant whose
dominant share is furthest below its fair share (smallest share ÷ fair share) is served
first: what frees up is held for its oldest waiting run.

Pure: admission (scheduler.admission) and the simulator (bench/sim) bring the numbers.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

from compute.capacity import BackendCapacity
from quotas.fit import Usage


@dataclasses.dataclass(frozen=True, kw_only=True)
class Recent:
    """A tenant's decayed average use of a backend (resource units, not seconds)."""

    cores: float = 0.0
    memory_gb: float = 0.0
    nodes: float = 0.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class Standing:
    """Where a tenant stands on a backend: its dominant share, of which resource, its fair
    share, and their ratio (the order: lowest first)."""

    dominant: float
    resource: str
    fair: float

    @property
    def ratio(self) -> float:
        return self.dominant / self.fair if self.fair > 0 else math.inf

    def describe(self, tenant_name: str) -> str:
        """e.g. 'tenant acme is above its fair share: 62 % of cores for a 33 % share'."""
        return (
            f"tenant {tenant_name} is above its fair share: {self.dominant * 100:.0f} % of "
            f"{self.resource} for a {self.fair * 100:.0f} % share"
        )


def standing(
    *, holds: Usage, recent: Recent, backend: BackendCapacity, weight: float, weights: float
) -> Standing:
    """A tenant's standing: `holds` what its runs hold now, `recent` its decayed average,
    `weight` its weight and `weights` the sum of the weights of the tenants with work here."""
    parts = [
        ("cores", max(holds.cores, recent.cores), backend.cores),
        ("memory", max(holds.memory_gb, recent.memory_gb), backend.memory_gb),
    ]
    if backend.holds_nodes:
        parts.append(("nodes", max(holds.nodes, recent.nodes), backend.max_nodes))
    dominant, resource = 0.0, "cores"
    for name, used, capacity in parts:
        share = used / capacity if capacity > 0 else 0.0
        if share > dominant + 1e-12:
            dominant, resource = share, name
    return Standing(dominant=dominant, resource=resource, fair=weight / weights if weights else 1.0)


def first_served(standings: Mapping[int, Standing]) -> int | None:
    """The tenant to serve first (smallest share ÷ fair share; ties to the smallest id)."""
    if not standings:
        return None
    return min(standings, key=lambda t: (standings[t].ratio, t))


def decay_factor(*, start_age: float, end_age: float, half_life: float) -> float:
    """The weight of holding something from `start_age` to `end_age` seconds ago in the
    decayed average (its share of ∫ ln2/H · 2^(-age/H) d age): 1 for ever, 0 for nothing."""
    if half_life <= 0:
        return 1.0 if end_age <= 0 else 0.0
    return 2.0 ** (-max(end_age, 0.0) / half_life) - 2.0 ** (-max(start_age, 0.0) / half_life)
