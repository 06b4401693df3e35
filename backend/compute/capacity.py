"""What a backend can hold at once, as plain values for the capacity check (quotas.fit)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from catalog.models import Backend
from compute.drivers import supports, traits_of
from orchestration.drivers.capabilities import CloudLimited


@dataclasses.dataclass(frozen=True, kw_only=True)
class CloudCaps:
    """A cloud project's limits as last read (None: unlimited)."""

    cores: int | None = None
    ram_gb: float | None = None
    instances: int | None = None

    @classmethod
    def of(cls, limits: Mapping[str, Any] | None) -> CloudCaps | None:
        if not limits:
            return None
        return cls(
            cores=limits.get("cores"),
            ram_gb=limits.get("ram_gb"),
            instances=limits.get("instances"),
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class BackendCapacity:
    """A backend's limits: the admin's capacity row, and its cloud project's limits."""

    name: str
    kind: str
    cores: int
    memory_gb: float
    max_nodes: int
    enabled: bool = True
    holds_nodes: bool = False
    cloud: CloudCaps | None = None


def capacity_of(backend: Backend) -> BackendCapacity:
    cloud = CloudCaps.of(backend.cloud_limits) if supports(backend, CloudLimited) else None
    return BackendCapacity(
        name=backend.name,
        kind=backend.kind,
        cores=backend.cores,
        memory_gb=backend.memory_gb,
        max_nodes=backend.max_nodes,
        enabled=backend.enabled,
        holds_nodes=traits_of(backend).holds_nodes,
        cloud=cloud,
    )
