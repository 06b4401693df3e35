"""Optional driver capabilities: runtime-checkable protocols a driver class may implement.

The portal asks `isinstance(driver, ResultsReader)` (or, without a driver,
`driver_supports(kind, CloudLimited)`) instead of probing for method names. Every capability
a built-in driver declares is covered by the conformance suite
(orchestration/tests/test_driver_conformance.py). `VmImageHost` (a cloud that keeps VM
images: what a bake, an upload and a registration ask of it) is declared by the composer,
which bakes on it (orchestration/composer/vm_host.py), and listed here with the others.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from orchestration.composer.vm_host import VmImageHost
from orchestration.drivers.base import CloudLimits, RunSpec

__all__ = [
    "BatchStart",
    "CloudLimited",
    "EndExplainer",
    "HealthCheck",
    "LeakReaper",
    "LimitsProbe",
    "PoolHost",
    "ResultsReader",
    "RunEvents",
    "StartupLog",
    "VmImageHost",
    "WorkerSpec",
]


@runtime_checkable
class BatchStart(Protocol):
    """Starts many runs in one call (a Slurm job array): one handle per spec, in order."""

    def start_batch(self, specs: Sequence[RunSpec]) -> list[str]: ...


@runtime_checkable
class ResultsReader(Protocol):
    """The portal reads a run's directory itself (the same host, a shared filesystem): the
    attempt's case directory, or None where it cannot. Its agent then uploads no archive."""

    def results_dir(self, spec: RunSpec) -> str | None: ...


@runtime_checkable
class StartupLog(Protocol):
    """The last lines of an attempt's agent.log, for a job that ended before its agent
    reported anything."""

    def startup_log(self, *, run_id: str, attempt: int, work_dir: str, lines: int = 12) -> str: ...


@runtime_checkable
class EndExplainer(Protocol):
    """Did the backend itself end a job (a time limit, a node failure)? (message, retry)."""

    def ended_by_backend(self, handle: str) -> tuple[str, bool] | None: ...


@runtime_checkable
class HealthCheck(Protocol):
    """Connect and report capacity and health for an admin (raises DriverError)."""

    def check(self) -> dict[str, Any]: ...


@runtime_checkable
class LimitsProbe(Protocol):
    """Whether the kernel will hold runs here to their memory, cores and processes (their
    cgroups): '' when it will, else why not, for the backend's health."""

    def limits_problem(self) -> str: ...


@runtime_checkable
class CloudLimited(Protocol):
    """The backend sits in a cloud project whose own limits cap what the portal may start."""

    def cloud_limits(self) -> CloudLimits: ...


@runtime_checkable
class LeakReaper(Protocol):
    """Deletes what the portal made on the backend that no live run attempt holds (servers,
    stacks), sparing image builders in progress; the names of what it deleted."""

    def reap_leaks(
        self,
        *,
        tracked: set[tuple[str, int]],
        builders: frozenset[str] | set[str] = frozenset(),
        workers: frozenset[str] | set[str] | None = None,
    ) -> list[str]: ...


@dataclasses.dataclass(frozen=True, kw_only=True)
class WorkerSpec:
    """A warm pool's worker to boot: a server of the pool's flavor and image whose pilot
    (orchestration/agent/pilot.py) registers with the portal and leases runs."""

    worker_id: str
    pool: str
    flavor: str
    image: str  # the cloud's image name or id
    portal_url: str
    token: str  # the worker's bearer token
    cores: int
    heartbeat_interval: float = 5.0
    grace: float = 120.0  # the pilot exits when the portal is unreachable this long
    cache: tuple[str, ...] = ()  # digests of the boot image and its layers (placement)

    def pilot_config(self, *, work_root: str) -> dict[str, Any]:
        """pilot.json: what the pilot reads at start."""
        return {
            "version": 1,
            "worker_id": self.worker_id,
            "pool": self.pool,
            "portal_url": self.portal_url,
            "token": self.token,
            "cores": self.cores,
            "heartbeat_interval": self.heartbeat_interval,
            "grace": self.grace,
            "work_root": work_root,
            "cache": list(self.cache),
        }


@runtime_checkable
class PoolHost(Protocol):
    """Keeps warm pools of workers (docs/pools.md): checks a pool's shape, boots a worker,
    says how its server is, deletes it."""

    def pool_shape(self, *, flavor: str, image: str) -> tuple[int, float]: ...

    def boot_worker(self, worker: WorkerSpec) -> tuple[str, str]: ...

    def worker_server(self, server_id: str) -> str: ...

    def delete_worker(self, server_id: str) -> None: ...


@runtime_checkable
class RunEvents(Protocol):
    """The backend's own events of a run (a Heat stack coming up) after the event `since`, as
    log lines, and the newest event id."""

    def run_events(self, handle: str, *, since: str | None) -> tuple[list[str], str | None]: ...


@runtime_checkable
class ElasticPartitions(Protocol):
    """A cluster that grows into a cloud with its scheduler's power saving (Slurm's elastic
    partition): its nodes as the scheduler and the cloud see them, and the files an admin
    installs on the controller."""

    def elastic_nodes(self) -> list[dict[str, Any]]: ...

    def elastic_files(self) -> dict[str, str]: ...
