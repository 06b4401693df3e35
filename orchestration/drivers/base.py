"""The driver interface: one small Protocol every compute backend implements.

The backend (Django) builds frozen, keyword-only dataclasses and calls a driver; drivers
return dataclasses. No Django objects cross this line. DriverError and SettingsError are
defined in orchestration.errors (the composer's bake raises them too) and importable from here.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable

from orchestration.errors import DriverError as DriverError
from orchestration.errors import SettingsError as SettingsError

D = TypeVar("D", bound="DriverBase")


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
    # how the agent confines the case's steps: {"mode": "bwrap" | "uid" | "off", "network":
    # bool, "limits": {...}} (orchestration/agent/sandbox.py); None: the agent's default
    sandbox: Mapping[str, Any] | None = None
    # extra fields (besides p and U) of the flow-field artifact the agent writes after a
    # completed run (the study spec's `fields`; orchestration/results/fields.py)
    fields: Sequence[str] = ()
    # what the portal knows of the run (identity, image, versions): the agent adds its own
    # facts and writes both to windtunnel-provenance.json in the case (docs/provenance.md)
    provenance: Mapping[str, Any] | None = None
    # when the agent stops a run that makes no progress or runs too long: {"stall_seconds",
    # "stall_factor", "startup_seconds", "wall_seconds"} (orchestration/agent/watchdog.py);
    # None: the agent's defaults
    watchdog: Mapping[str, Any] | None = None
    # on a backend that hands cores over (trait `hands_over`): the agent hands this run's
    # cores over this many seconds before its last step is foreseen to end (0: never), and
    # `after` names the runs (their work_dir) whose cores this run took, whose last step
    # must be over before its first
    handover: float = 0.0
    after: Sequence[str] = ()
    # start from an earlier attempt's write (continued, restarted, or requeued after a loss):
    # {"attempt", "time", "iterations", "settings", "required"} (orchestration/agent/resume.py)
    resume: Mapping[str, Any] | None = None

    def to_json(self, *, sandbox: str = "bwrap") -> str:
        """run.json; `sandbox`: the driver's way of confining steps, where the portal has
        not said (its `sandbox` trait)."""
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
        if self.fields:
            data["fields"] = list(self.fields)
        if self.provenance is not None:
            data["provenance"] = dict(self.provenance)
        if self.watchdog is not None:
            data["watchdog"] = dict(self.watchdog)
        if self.resume is not None:
            data["resume"] = dict(self.resume)
        data["sandbox"] = dict(self.sandbox) if self.sandbox is not None else {"mode": sandbox}
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
    # the backend is ending the job, or requeueing it (Slurm's COMPLETING): it will say which
    settling: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class Capabilities:
    kind: str
    cores: int
    memory_gb: float
    max_nodes: int = 1
    mpi: bool = True
    remote: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class CloudLimits:
    """A cloud project's compute limits (None: unlimited) and what is in use now."""

    cores: int | None
    ram_gb: float | None
    instances: int | None
    cores_used: int
    ram_gb_used: float
    instances_used: int

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DriverContext:
    """What the portal knows of a backend beside its settings: its capacity row, where runs
    keep their files on the portal's host, and its decrypted secrets (only for drivers that
    declare `secret_fields`). Each driver takes what it needs of it."""

    cores: int | None = None
    memory_gb: float | None = None
    max_nodes: int = 1
    work_root: str = ""
    secrets: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    # where runs' cgroups go on the portal's host ("": beside the agent's own)
    cgroup_parent: str = ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class DriverTraits:
    """What a kind of backend is, read from its driver class without building one.

    The portal asks these instead of keeping lists of backend kinds:

    - `holds_nodes`: a run holds whole nodes or instances (counts against `max_nodes`).
    - `queues_runs`: a started run may wait in the backend's own queue (a Slurm job waiting
      for nodes); the reaper asks why at every pass.
    - `releases_early`: runs use the portal's own cores, which go back to the queue as soon as
      the solver has exited (the agent only archives results then).
    - `hands_over`: a run's cores go to the next run shortly before its last step is expected
      to end, and the next run's agent waits on the host for that step to be over before
      its first (orchestration/agent/handover.py): no gap between runs, never two at once.
    - `prerenders_case`: the agent takes the case's rendered templates in run.json (backends
      whose run.json travels through size-limited user data render on the node instead).
    - `frees_on_end`: `collect()` deletes what a run held (a cloud server): call it as soon as
      a run ends, not later.
    - `on_portal_host`: runs execute on the portal's own machine.
    - `image_kind`: "container" or "vm" when the backend runs composed images, else None (it
      runs the OpenFOAM installed on its hosts).
    - `secret_fields`: the secrets its settings may carry (stored encrypted, write-only).
    - `sandbox`: how the agent confines a case's steps (orchestration/agent/sandbox.py):
      "bwrap" (namespaces: the host out of sight), or "uid" where the backend's runtime or
      VM already gives each run a filesystem of its own (an unprivileged uid and limits).
    - `keeps_attempts`: an attempt's agent sees the folders of its run's earlier attempts
      (beside its own, on the portal's disk or the cluster's shared one): a run may continue
      or restart from an earlier attempt's write (orchestration/agent/resume.py).
    """

    kind: str
    holds_nodes: bool = False
    queues_runs: bool = False
    releases_early: bool = False
    hands_over: bool = False
    prerenders_case: bool = False
    frees_on_end: bool = False
    on_portal_host: bool = False
    image_kind: str | None = None
    secret_fields: tuple[str, ...] = ()
    sandbox: str = "bwrap"
    keeps_attempts: bool = False


TRAIT_NAMES = tuple(f.name for f in dataclasses.fields(DriverTraits) if f.name != "kind")


@runtime_checkable
class Driver(Protocol):
    """The one interface of a compute backend. Traits (see DriverTraits) are class
    attributes; optional capabilities are the sub-protocols of `capabilities.py`."""

    name: str
    holds_nodes: ClassVar[bool]
    queues_runs: ClassVar[bool]
    releases_early: ClassVar[bool]
    hands_over: ClassVar[bool]
    prerenders_case: ClassVar[bool]
    frees_on_end: ClassVar[bool]
    on_portal_host: ClassVar[bool]
    image_kind: ClassVar[str | None]
    secret_fields: ClassVar[tuple[str, ...]]
    sandbox: ClassVar[str]
    keeps_attempts: ClassVar[bool]

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


class DriverBase:
    """Defaults of the traits and of the class-level hooks; drivers override what differs."""

    name: str = ""
    holds_nodes: ClassVar[bool] = False
    queues_runs: ClassVar[bool] = False
    releases_early: ClassVar[bool] = False
    hands_over: ClassVar[bool] = False
    prerenders_case: ClassVar[bool] = False
    frees_on_end: ClassVar[bool] = False
    on_portal_host: ClassVar[bool] = False
    image_kind: ClassVar[str | None] = None
    secret_fields: ClassVar[tuple[str, ...]] = ()
    keeps_attempts: ClassVar[bool] = False
    sandbox: ClassVar[str] = "bwrap"

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any], context: DriverContext) -> Any:
        """Build the driver from a backend's settings and the portal's context."""
        return cls(**dict(settings))

    @classmethod
    def validate_settings(
        cls, settings: Mapping[str, Any], *, secrets: Mapping[str, Any]
    ) -> dict[str, Any]:
        """An admin's settings for a backend of this kind, normalised to what is stored;
        SettingsError names the field and the fix."""
        return dict(settings)

    @classmethod
    def capacity_from_backend(cls, settings: Mapping[str, Any]) -> bool:
        """Whether the backend itself says its capacity (the check's report), not the admin."""
        return False

    @classmethod
    def warm_up(cls, *, work_root: str) -> None:
        """Prepare this process to start runs of this kind quickly (called once when a worker
        starts, for every kind of enabled backend)."""
        return None


_REGISTRY: dict[str, type[DriverBase]] = {}

# the built-in drivers, loaded by name the first time the registry is asked (they import
# this module, so it cannot import them; a plug-in driver registers itself on import)
BUILTIN_DRIVER_MODULES = (
    "orchestration.drivers.local",
    "orchestration.drivers.container",
    "orchestration.drivers.noop",
    "orchestration.drivers.slurm",
    "orchestration.drivers.openstack",
)


def _load_builtin_drivers() -> None:
    for module in BUILTIN_DRIVER_MODULES:
        if module not in sys.modules:
            importlib.import_module(module)


def register(kind: str) -> Callable[[type[D]], type[D]]:
    def wrap(cls: type[D]) -> type[D]:
        cls.name = kind
        _REGISTRY[kind] = cls
        return cls

    return wrap


def driver_class(kind: str) -> type[DriverBase]:
    """The driver class registered as `kind` (DriverError when there is none)."""
    _load_builtin_drivers()
    try:
        return _REGISTRY[kind]
    except KeyError:
        raise DriverError(
            f"unknown backend kind {kind!r}; known: {', '.join(sorted(_REGISTRY))}"
        ) from None


def build_driver(
    kind: str, settings: Mapping[str, Any], *, context: DriverContext | None = None
) -> Any:
    """The one way to build a driver: its class from the registry, its settings, and what the
    portal knows of the backend (capacity, work root, secrets)."""
    cls = driver_class(kind)
    driver = cls.from_settings(dict(settings or {}), context or DriverContext())
    assert isinstance(driver, Driver)
    return driver


def driver_traits(kind: str) -> DriverTraits:
    cls = driver_class(kind)
    return DriverTraits(kind=kind, **{name: getattr(cls, name) for name in TRAIT_NAMES})


def driver_supports(kind: str, capability: type) -> bool:
    """Whether drivers of `kind` implement an optional capability (a protocol of
    orchestration.drivers.capabilities), read from the class."""
    return issubclass(driver_class(kind), capability)


def driver_kinds() -> list[str]:
    _load_builtin_drivers()
    return sorted(_REGISTRY)


def write_private_json(path: Path, data: Any) -> None:
    """Write `data` as JSON to `path`, readable by its owner only (a run's run.json holds
    its agent's token), also when the file was there before with a wider mode."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        os.fchmod(fh.fileno(), 0o600)
        json.dump(data, fh, indent=2)
