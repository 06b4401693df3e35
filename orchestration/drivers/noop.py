"""The no-op driver: accepts runs and starts nothing (dispatch benchmarks, conformance)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from typing import Any

from orchestration.drivers.base import (
    Capabilities,
    DriverBase,
    DriverContext,
    RunPhase,
    RunSpec,
    RunStatus,
    register,
)

__all__ = ["NoopDriver"]

_PREFIX = "noop:"


@register("noop")
class NoopDriver(DriverBase):
    """Every start() returns at once; every handle it issued polls as EXITED (exit code 0)."""

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any], context: DriverContext) -> NoopDriver:
        return cls(**{"cores": context.cores, "memory_gb": context.memory_gb, **settings})

    def __init__(
        self, *, cores: int | None = None, memory_gb: float | None = None, **ignored: object
    ) -> None:
        self.cores = int(cores or os.cpu_count() or 1)
        self.memory_gb = float(memory_gb or 1.0)

    def prepare(self, spec: RunSpec) -> None:
        return None

    def start(self, spec: RunSpec) -> str:
        return f"{_PREFIX}{spec.run_id}:{spec.attempt}:{uuid.uuid4().hex[:8]}"

    def poll(self, handle: str) -> RunStatus:
        if not str(handle).startswith(_PREFIX):
            return RunStatus(phase=RunPhase.UNKNOWN, reason="not a noop handle")
        return RunStatus(phase=RunPhase.EXITED, exit_code=0)

    def cancel(self, handle: str, *, grace: float = 10.0) -> None:
        return None

    def collect(self, handle: str) -> None:
        return None

    def capabilities(self) -> Capabilities:
        return Capabilities(kind="noop", cores=self.cores, memory_gb=self.memory_gb, mpi=False)
