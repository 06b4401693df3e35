"""The driver interface: one small Protocol every compute backend implements.

The backend (Django) builds frozen, keyword-only dataclasses and calls a driver; drivers
return dataclasses. No Django objects cross this line.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable


class DriverError(Exception):
    """A backend refused or failed an operation. `retryable` says whether to try again."""

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


@dataclasses.dataclass(frozen=True, kw_only=True)
class Step:
    name: str
    argv: tuple[str, ...]
    role: str = "solve"  # prepare | decompose | solve | reconstruct | other

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "argv": list(self.argv), "role": self.role}


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunSpec:
    """Everything a driver and the agent need to run one attempt of one run."""

    run_id: str
    attempt: int
    portal_url: str
    token: str
    case_dir: str
    work_dir: str
    context: Mapping[str, Any]
    steps: Sequence[Step]
    processes: int = 1
    nodes: int = 1
    memory_gb: float = 1.0
    decompose: Mapping[str, Any] | None = None
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    mounts: Mapping[str, str] = dataclasses.field(default_factory=dict)
    heartbeat_interval: float = 5.0
    telemetry_interval: float = 1.0
    archive_max_mb: int = 512
    image: str | None = None
    # the case's template files rendered by the portal (relative path → text); None: the
    # agent renders them itself
    rendered: Mapping[str, str] | None = None
    # "upload": the agent builds the result archive and uploads it; "portal": the portal reads
    # the run's directory itself (Driver.results_dir) and archives it when someone asks
    archive: str = "upload"
    # the case may run shell commands and compile code (OpenFOAM's allowSystemOperations):
    # only where the portal's users are trusted (orchestration/environment.py)
    allow_system_operations: bool = False

    def to_json(self) -> str:
        data: dict[str, Any] = {
            "version": 1,
            "run_id": self.run_id,
            "attempt": self.attempt,
            "portal_url": self.portal_url,
            "token": self.token,
            "case_dir": self.case_dir,
            "work_dir": self.work_dir,
            "context": dict(self.context),
            "steps": [s.to_dict() for s in self.steps],
            "processes": self.processes,
            "decompose": dict(self.decompose) if self.decompose else None,
            "env": dict(self.env),
            "mounts": dict(self.mounts),
            "heartbeat_interval": self.heartbeat_interval,
            "telemetry_interval": self.telemetry_interval,
            "archive_max_mb": self.archive_max_mb,
        }
        if self.rendered is not None:
            data["rendered"] = dict(self.rendered)
        if self.archive != "upload":
            data["archive"] = self.archive
        if self.allow_system_operations:
            data["allow_system_operations"] = True
        return json.dumps(data, indent=2)


class RunPhase(enum.StrEnum):
    """What a backend says of a handle (not the portal's run state)."""

    PENDING = "pending"  # accepted by the backend, not started (e.g. Slurm PENDING)
    RUNNING = "running"
    EXITED = "exited"  # the agent process is gone (its own reports tell how it ended)
    UNKNOWN = "unknown"  # the backend no longer knows the handle


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunStatus:
    phase: RunPhase
    exit_code: int | None = None
    reason: str = ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Capabilities:
    kind: str
    cores: int
    memory_gb: float
    max_nodes: int = 1
    mpi: bool = True
    remote: bool = False


@runtime_checkable
class Driver(Protocol):
    name: str

    def prepare(self, spec: RunSpec) -> None: ...

    def start(self, spec: RunSpec) -> str:
        """Start the agent for `spec`; return an opaque handle the backend will store."""
        ...

    def poll(self, handle: str) -> RunStatus: ...

    def cancel(self, handle: str, *, grace: float = 10.0) -> None: ...

    def collect(self, handle: str) -> None:
        """Release what the backend holds for a finished handle (results come via the agent)."""
        ...

    def capabilities(self) -> Capabilities: ...

    # Optional: `results_dir(spec) -> str | None`, the attempt's case directory where the
    # portal itself can read it once the run ended (the same machine or a shared filesystem),
    # or None. Where it is given, the agent uploads no archive (RunSpec.archive = "portal").


_REGISTRY: dict[str, Callable[..., Driver]] = {}


def register(kind: str) -> Callable[[Callable[..., Driver]], Callable[..., Driver]]:
    def wrap(factory: Callable[..., Driver]) -> Callable[..., Driver]:
        _REGISTRY[kind] = factory
        return factory

    return wrap


def get_driver(kind: str, settings: Mapping[str, Any]) -> Driver:
    """Build the driver registered as `kind` from a backend's settings."""
    from orchestration import drivers  # noqa: F401  (registers the built-in drivers)

    try:
        factory = _REGISTRY[kind]
    except KeyError:
        raise DriverError(
            f"unknown backend kind {kind!r}; known: {', '.join(sorted(_REGISTRY))}"
        ) from None
    return factory(**dict(settings))


def driver_kinds() -> list[str]:
    from orchestration import drivers  # noqa: F401

    return sorted(_REGISTRY)
