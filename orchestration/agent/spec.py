"""The agent's view of `run.json` (validated, typed).

Every Slurm job starts an agent, so the agent's modules keep their imports few: records are
named tuples from `collections` (dataclasses imports inspect, typing.NamedTuple typing) and
paths are strings (pathlib): together ~25 ms of every job's start-up.
"""

from __future__ import annotations

import collections
import json
import math
import os
from collections.abc import Mapping
from types import MappingProxyType

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NamedTuple

__all__ = ["AgentSpec", "AgentStep", "SpecError", "load_spec"]

ROLES = ("prepare", "decompose", "solve", "reconstruct", "other")


class SpecError(ValueError):
    """`run.json` is missing, unreadable or invalid."""


_NO_ENV: Mapping[str, str] = MappingProxyType({})


if TYPE_CHECKING:
    # what the named tuples below hold, for the type checker (at run time they are made by
    # collections.namedtuple: typing.NamedTuple would import typing into every agent)

    class _StepFields(NamedTuple):
        name: str
        argv: tuple[str, ...]
        role: str = "solve"

    class _SpecFields(NamedTuple):
        run_id: str
        attempt: int
        portal_url: str
        token: str
        case_dir: str
        work_dir: str
        context: Mapping[str, Any]
        steps: tuple[AgentStep, ...]
        decompose: Mapping[str, Any] | None = None
        env: Mapping[str, str] = _NO_ENV
        heartbeat_interval: float = 5.0
        telemetry_interval: float = 1.0
        archive_max_mb: float = 512.0
        kill_grace: float = 10.0
        final_timeout: float = 300.0
        fetch_case: bool = False
        rendered: Mapping[str, str] | None = None
        archive: str = "upload"
        allow_system_operations: bool = False
        sandbox: Mapping[str, Any] | None = None
        mounts: Mapping[str, str] = _NO_ENV
        fields: tuple[str, ...] = ()
        post_process: bool = True
        provenance: Mapping[str, Any] | None = None
        watchdog: Mapping[str, Any] | None = None
        handover: float = 0.0
        after: tuple[str, ...] = ()
        resume: Mapping[str, Any] | None = None

else:
    _StepFields = collections.namedtuple("AgentStep", "name argv role", defaults=("solve",))


class AgentStep(_StepFields):
    """name: str, argv: tuple of str, role: one of ROLES."""

    __slots__ = ()


_SPEC_DEFAULTS = {
    "decompose": None,  # Mapping, or None for a serial run
    "env": _NO_ENV,
    "heartbeat_interval": 5.0,
    "telemetry_interval": 1.0,
    "archive_max_mb": 512.0,
    "kill_grace": 10.0,  # SIGTERM → SIGKILL of the solver group on `stop: true`
    "final_timeout": 300.0,  # retry window for the final reports
    "fetch_case": False,  # download the case source from the portal first (VMs)
    "rendered": None,  # Mapping: the portal's rendering of the case's templates
    "archive": "upload",  # "portal": the portal reads the results here, nothing to upload
    "allow_system_operations": False,  # the case may run commands and compile code
    "sandbox": None,  # Mapping: how the steps are confined (orchestration/agent/sandbox.py)
    "mounts": _NO_ENV,  # {path the run sees: host path[:ro]}: the backend's own mounts
    "fields": (),  # extra fields (besides p and U) the flow-field artifact carries
    "post_process": True,  # after a completed run: the flow-field artifact and VTK
    "provenance": None,  # Mapping: the portal's facts of the run, for the provenance file
    # Mapping: when a run that makes no progress or runs too long is stopped (watchdog.py)
    "watchdog": None,
    # seconds before its last step's foreseen end the run hands its cores to the next run on
    # this host (0: never); it holds its handover lock until the step is over
    # (orchestration/agent/handover.py)
    "handover": 0.0,
    # the handover locks of the runs whose cores this run took: its first step waits for them
    "after": (),
    # Mapping: start from an earlier attempt's write (orchestration/agent/resume.py)
    "resume": None,
}


if not TYPE_CHECKING:
    _SpecFields = collections.namedtuple(
        "AgentSpec",
        ["run_id", "attempt", "portal_url", "token", "case_dir", "work_dir", "context", "steps"]
        + list(_SPEC_DEFAULTS),
        defaults=tuple(_SPEC_DEFAULTS.values()),
    )


class AgentSpec(_SpecFields):
    """run.json, checked: case_dir and work_dir are str paths, steps a tuple of AgentStep."""

    __slots__ = ()

    @property
    def case_path(self) -> str:
        return os.path.join(self.work_dir, "case")


def _require(data: Mapping[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    if key not in data:
        raise SpecError(f"run.json: missing {key!r}")
    value = data[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise SpecError(f"run.json: {key!r} has the wrong type ({type(value).__name__})")
    return value


def _interval(data: Mapping[str, Any], key: str, default: float) -> float:
    value = data.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SpecError(f"run.json: {key!r} must be a number")
    if not math.isfinite(value) or value <= 0:
        raise SpecError(f"run.json: {key!r} must be positive")
    return float(value)


def _step(raw: Any, index: int) -> AgentStep:
    if not isinstance(raw, Mapping):
        raise SpecError(f"run.json: steps[{index}] must be an object")
    name = raw.get("name")
    argv = raw.get("argv")
    role = raw.get("role", "solve")
    if not isinstance(name, str) or not name or "/" in name or name.startswith("."):
        raise SpecError(f"run.json: steps[{index}].name must be a plain non-empty string")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise SpecError(f"run.json: steps[{index}].argv must be a non-empty list of strings")
    if role not in ROLES:
        raise SpecError(f"run.json: steps[{index}].role must be one of {', '.join(ROLES)}")
    return AgentStep(name=name, argv=tuple(argv), role=role)


def _decompose(raw: Any) -> Mapping[str, Any] | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise SpecError("run.json: 'decompose' must be an object or null")
    method = raw.get("method", "hierarchical")
    subdomains = raw.get("subdomains")
    if not isinstance(method, str) or not method.isidentifier():
        raise SpecError("run.json: decompose.method must be a word")
    if isinstance(subdomains, bool) or not isinstance(subdomains, int) or subdomains < 1:
        raise SpecError("run.json: decompose.subdomains must be a positive integer")
    n = raw.get("n")
    if n is not None and (
        not isinstance(n, list)
        or len(n) != 3
        or not all(isinstance(v, int) and v > 0 for v in n)
        or n[0] * n[1] * n[2] != subdomains
    ):
        raise SpecError(
            "run.json: decompose.n must be 3 positive integers whose product is subdomains"
        )
    return {"method": method, "subdomains": subdomains, "n": n}


def _archive(raw: Any) -> str:
    if raw not in ("upload", "portal"):
        raise SpecError('run.json: \'archive\' must be "upload" or "portal"')
    return str(raw)


def _rendered(raw: Any) -> dict[str, str] | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in raw.items()
    ):
        raise SpecError("run.json: 'rendered' must map relative paths to texts")
    return dict(raw)


def parse_spec(data: Any) -> AgentSpec:
    if not isinstance(data, Mapping):
        raise SpecError("run.json: must be a JSON object")
    if data.get("version", 1) != 1:
        raise SpecError(f"run.json: unsupported version {data.get('version')!r}")
    steps_raw = _require(data, "steps", list)
    if not steps_raw:
        raise SpecError("run.json: 'steps' is empty")
    env = data.get("env") or {}
    if not isinstance(env, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        raise SpecError("run.json: 'env' must map strings to strings")
    context = data.get("context") or {}
    if not isinstance(context, Mapping):
        raise SpecError("run.json: 'context' must be an object")
    attempt = _require(data, "attempt", int)
    if attempt < 1:
        raise SpecError("run.json: 'attempt' must be >= 1")
    portal_url = _require(data, "portal_url", str).rstrip("/")
    if not portal_url.startswith(("http://", "https://")):
        raise SpecError("run.json: 'portal_url' must be an http(s) URL")
    return AgentSpec(
        run_id=_require(data, "run_id", str),
        attempt=attempt,
        portal_url=portal_url,
        token=_require(data, "token", str),
        case_dir=_require(data, "case_dir", str),
        work_dir=_require(data, "work_dir", str),
        context=dict(context),
        steps=tuple(_step(raw, i) for i, raw in enumerate(steps_raw)),
        decompose=_decompose(data.get("decompose")),
        env=dict(env),
        heartbeat_interval=_interval(data, "heartbeat_interval", 5.0),
        telemetry_interval=_interval(data, "telemetry_interval", 1.0),
        archive_max_mb=_interval(data, "archive_max_mb", 512.0),
        kill_grace=_interval(data, "kill_grace", 10.0),
        final_timeout=_interval(data, "final_timeout", 300.0),
        fetch_case=bool(data.get("fetch_case", False)),
        rendered=_rendered(data.get("rendered")),
        archive=_archive(data.get("archive", "upload")),
        allow_system_operations=data.get("allow_system_operations") is True,
        sandbox=_sandbox(data.get("sandbox")),
        mounts=_mounts(data.get("mounts")),
        fields=_fields(data.get("fields")),
        post_process=data.get("post_process", True) is not False,
        provenance=_provenance(data.get("provenance")),
        watchdog=_watchdog(data.get("watchdog")),
        handover=_lead(data.get("handover")),
        after=_after(data.get("after")),
        resume=_resume(data.get("resume")),
    )


def _resume(raw: Any) -> Mapping[str, Any] | None:
    """run.json's resume: an object (checked where it is used: orchestration/agent/resume.py,
    which only the portal's own hosts' agents carry)."""
    if raw is not None and not isinstance(raw, Mapping):
        raise SpecError("run.json: 'resume' must be an object or null")
    return dict(raw) if raw is not None else None


def _lead(raw: Any) -> float:
    if raw is None:
        return 0.0
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not 0 <= raw < math.inf:
        raise SpecError("run.json: 'handover' must be a number of seconds (0: no handover)")
    return float(raw)


def _after(raw: Any) -> tuple[str, ...]:
    if not raw:
        return ()
    if not isinstance(raw, list) or not all(isinstance(p, str) and os.path.isabs(p) for p in raw):
        raise SpecError("run.json: 'after' must be a list of absolute paths")
    return tuple(raw)


def _watchdog(raw: Any) -> Mapping[str, Any] | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise SpecError("run.json: 'watchdog' must be an object")
    for key, value in raw.items():
        if value is not None and (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value <= 0
        ):
            raise SpecError(f"run.json: watchdog.{key} must be a positive number or null")
    return dict(raw)


def _provenance(raw: Any) -> Mapping[str, Any] | None:
    if raw is not None and not isinstance(raw, Mapping):
        raise SpecError("run.json: 'provenance' must be an object")
    return raw


def _fields(raw: Any) -> tuple[str, ...]:
    if not raw:
        return ()
    if not isinstance(raw, list) or not all(isinstance(f, str) and f.isidentifier() for f in raw):
        raise SpecError("run.json: 'fields' must be a list of field names")
    return tuple(raw)


def _mounts(raw: Any) -> Mapping[str, str]:
    if not raw:
        return _NO_ENV
    if not isinstance(raw, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in raw.items()
    ):
        raise SpecError("run.json: 'mounts' must map paths to paths")
    return dict(raw)


def _sandbox(raw: Any) -> Mapping[str, Any] | None:
    if raw is not None and not isinstance(raw, Mapping):
        raise SpecError("run.json: 'sandbox' must be an object")
    return raw


def load_spec(path: str | os.PathLike[str]) -> tuple[AgentSpec | None, dict[str, Any], str]:
    """Read `path`: (spec or None, the raw JSON object (possibly empty), error message)."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:
        return None, {}, f"cannot read run spec {path}: {exc}"
    try:
        return parse_spec(data), data if isinstance(data, dict) else {}, ""
    except SpecError as exc:
        return None, data if isinstance(data, dict) else {}, str(exc)
