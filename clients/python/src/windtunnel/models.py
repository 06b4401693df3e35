"""The portal's answers as typed records, one per component of its OpenAPI schema.

Each record names its component (`SCHEMA`); a test checks that every field here exists in the
portal's schema (frontend/src/generated/openapi.yaml) with a compatible type, that a field the
schema may leave out has a default here, and that a field the schema may answer null is
optional here, so the client cannot drift from the API. Fields the portal adds later are
ignored; the raw answer stays in `raw`.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar, Union

from .errors import ApiError

#: study states after which nothing changes any more
STUDY_TERMINAL_STATES = frozenset({"completed", "completed_with_failures", "cancelled"})
#: run states after which nothing changes any more
RUN_TERMINAL_STATES = frozenset({"completed", "failed", "cancelled"})
#: run states in the order a run goes through them (the progress bar's order)
RUN_STATES = ("pending", "admitted", "provisioning", "running", "completed", "failed", "cancelled")
#: schema enum name -> the values the client relies on (checked against the schema)
ENUMS: dict[str, frozenset[str]] = {
    "StudyStateEnum": STUDY_TERMINAL_STATES | {"draft", "submitted", "running"},
    "RunStateEnum": frozenset(RUN_STATES),
}


def _raw() -> Any:
    return dataclasses.field(default_factory=dict, repr=False, compare=False)


@dataclasses.dataclass(frozen=True)
class Progress:
    """How far a study is: runs done of total, and its runs counted by state."""

    SCHEMA: ClassVar[str] = "Progress"
    total: int
    done: int
    percent: float
    by_state: dict[str, int]


@dataclasses.dataclass(frozen=True)
class StudyRecord:
    """A study as `GET /api/v1/studies/{id}/` answers it."""

    SCHEMA: ClassVar[str] = "Study"
    id: str
    name: str
    template: str | None
    case: str | None
    solver: str
    backend: str
    resources: dict[str, Any]
    progress: Progress
    spec: dict[str, Any]
    owner: str
    created_at: str
    last_seq: int
    state: str = "draft"
    description: str = ""
    run_count: int = 0
    objectives: dict[str, Any] | None = None
    submitted_at: str | None = None
    finished_at: str | None = None
    raw: dict[str, Any] = _raw()


@dataclasses.dataclass(frozen=True)
class RunRecord:
    """A run as `GET /api/v1/runs/{id}/` (and a study's runs list) answers it."""

    SCHEMA: ClassVar[str] = "Run"
    id: str
    study: str
    index: int
    parameters: dict[str, Any]
    backend: str
    queued_at: str
    queue_position: int | None
    wall_seconds: float | None
    archive_available: bool
    last_seq: int
    state: str = "pending"
    attempt: int = 0
    processes: int = 1
    phase: str = ""
    wait_reason: str = ""
    wait_detail: str = ""
    started_at: str | None = None
    finished_at: str | None = None
    end_reason: str = ""
    message: str = ""
    objectives: dict[str, Any] | None = None
    iterations: int | None = None
    last_time: float | None = None
    trust: str = ""
    raw: dict[str, Any] = _raw()


@dataclasses.dataclass(frozen=True)
class ResultRow:
    """One row of a study's results: a run's parameters, state, trust and objectives."""

    SCHEMA: ClassVar[str] = "ResultRow"
    run: str
    index: int
    parameters: dict[str, Any]
    state: str
    objectives: dict[str, Any]
    iterations: int | None
    wall_seconds: float | None
    end_reason: str
    attempts: int
    trust: str


@dataclasses.dataclass(frozen=True)
class Results:
    """A study's results: its parameter and objective names, and one row per run."""

    SCHEMA: ClassVar[str] = "Results"
    study: str
    parameters: list[str]
    objectives: list[str]
    rows: list[ResultRow]
    last_seq: int


@dataclasses.dataclass(frozen=True)
class Template:
    """A case template: its parameters (type, unit, default, bounds), objectives, solver."""

    SCHEMA: ClassVar[str] = "Template"
    name: str
    title: str
    solver: str
    solvers: list[str]
    parameters: dict[str, Any]
    derived: dict[str, Any]
    objectives: dict[str, Any]
    resources: dict[str, Any]
    demo: dict[str, Any]
    description: str = ""
    raw: dict[str, Any] = _raw()


@dataclasses.dataclass(frozen=True)
class Upload:
    """An uploaded case: its id (a spec's `case`) and the placeholders found in its files."""

    SCHEMA: ClassVar[str] = "Upload"
    id: str
    filename: str
    size_bytes: int
    created_at: str
    files_count: int = 0
    placeholders: dict[str, Any] | None = None
    has_mesh: bool = False
    raw: dict[str, Any] = _raw()


@dataclasses.dataclass(frozen=True)
class Telemetry:
    """A run's series (`series[name]` holds x, y, points, returned) and the names available."""

    SCHEMA: ClassVar[str] = "Telemetry"
    run: str
    attempt: int
    last_seq: int
    available: list[str]
    series: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class LogTail:
    """The last lines of a run's log."""

    SCHEMA: ClassVar[str] = "Log"
    run: str
    attempt: int
    lines: list[str]


@dataclasses.dataclass(frozen=True)
class Token:
    """An API token (shown once) and the tenant it acts for."""

    SCHEMA: ClassVar[str] = "Token"
    token: str
    tenant: str


@dataclasses.dataclass(frozen=True)
class ApiTokenRecord:
    """One of your API tokens as `GET /api/v1/tokens/` lists it (never its key)."""

    SCHEMA: ClassVar[str] = "ApiToken"
    id: int
    name: str
    prefix: str
    created_at: str
    last_used_at: str | None
    expires_at: str | None
    expired: bool
    raw: dict[str, Any] = _raw()


@dataclasses.dataclass(frozen=True)
class NewApiToken:
    """A token just made: its record and its key, shown this once."""

    SCHEMA: ClassVar[str] = "NewApiToken"
    id: int
    name: str
    prefix: str
    key: str
    created_at: str
    expires_at: str | None
    raw: dict[str, Any] = _raw()


@dataclasses.dataclass(frozen=True)
class Me:
    """Who a token signs in."""

    SCHEMA: ClassVar[str] = "Me"
    username: str
    tenant: str
    is_admin: bool
    is_staff: bool


@dataclasses.dataclass(frozen=True)
class Preview:
    """What a spec would make: run count, first rows, steps, quota impact."""

    SCHEMA: ClassVar[str] = "Preview"
    run_count: int
    parameters: list[str]
    rows: list[dict[str, Any]]
    solver: str
    backend: str
    quota: dict[str, Any]
    #: what the study will cost, from earlier runs of its case (ranges; `summary` in words)
    estimate: dict[str, Any] = dataclasses.field(default_factory=dict)
    raw: dict[str, Any] = _raw()


#: every record, for the schema test
MODELS: tuple[type[Any], ...] = (
    Progress,
    StudyRecord,
    RunRecord,
    ResultRow,
    Results,
    Template,
    Upload,
    Telemetry,
    LogTail,
    Token,
    ApiTokenRecord,
    NewApiToken,
    Me,
    Preview,
)

#: every (method, path) the client calls, for the schema test
ENDPOINTS: tuple[tuple[str, str], ...] = (
    ("post", "/api/v1/auth/token/"),
    ("get", "/api/v1/me/"),
    ("get", "/api/v1/tokens/"),
    ("post", "/api/v1/tokens/"),
    ("delete", "/api/v1/tokens/{id}/"),
    ("get", "/api/v1/templates/"),
    ("get", "/api/v1/templates/{id}/"),
    ("post", "/api/v1/uploads/"),
    ("post", "/api/v1/studies/"),
    ("post", "/api/v1/studies/preview/"),
    ("get", "/api/v1/studies/{id}/"),
    ("post", "/api/v1/studies/{id}/cancel/"),
    ("post", "/api/v1/studies/{id}/runs/continue/"),
    ("get", "/api/v1/studies/{id}/runs/"),
    ("get", "/api/v1/studies/{id}/results/"),
    ("get", "/api/v1/studies/{id}/results.csv"),
    ("get", "/api/v1/studies/{id}/sensitivity/"),
    ("get", "/api/v1/studies/{id}/pareto/"),
    ("get", "/api/v1/studies/{id}/mesh-independence/"),
    ("get", "/api/v1/studies/{id}/mesh-independence.csv"),
    ("get", "/api/v1/runs/{id}/"),
    ("post", "/api/v1/runs/{id}/cancel/"),
    ("post", "/api/v1/runs/{id}/continue/"),
    ("get", "/api/v1/runs/{id}/telemetry/"),
    ("get", "/api/v1/runs/{id}/log/"),
    ("get", "/api/v1/runs/{id}/archive/"),
)

M = TypeVar("M")


def build(cls: type[M], data: Any) -> M:
    """A record of `cls` from the portal's JSON: fields it lacks take their defaults, fields
    it adds are ignored (and kept in `raw` where the record has one)."""
    if not isinstance(data, Mapping):
        raise ApiError(
            f"the portal answered {type(data).__name__} where a {cls.__name__} was expected",
            status=200,
            code="unexpected_answer",
        )
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]
        if field.name == "raw":
            values["raw"] = dict(data)
        elif field.name in data:
            values[field.name] = _convert(hints[field.name], data[field.name])
    try:
        return cls(**values)
    except TypeError as exc:
        missing = [
            f.name
            for f in dataclasses.fields(cls)  # type: ignore[arg-type]
            if f.name not in values
            and f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING
        ]
        raise ApiError(
            f"the portal's {cls.__name__} lacks {', '.join(missing) or 'fields'} ({exc}): is "
            "this client older than the portal? pip install the client from the portal's "
            "repository (clients/python)",
            status=200,
            code="unexpected_answer",
        ) from None


def _convert(tp: Any, value: Any) -> Any:
    """Nested records (and lists of them) built from their JSON."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return None if value is None else _convert(inner[0], value) if len(inner) == 1 else value
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return build(tp, value)
    if origin is list and isinstance(value, list):
        (item,) = typing.get_args(tp) or (Any,)
        if isinstance(item, type) and dataclasses.is_dataclass(item):
            return [build(item, v) for v in value]
    return value


def as_json(record: Any) -> Any:
    """A record as JSON-ready data: its `raw` answer where it has one (every field the
    portal sent), else its fields."""
    raw = getattr(record, "raw", None)
    if raw:
        return raw
    if dataclasses.is_dataclass(record) and not isinstance(record, type):
        return dataclasses.asdict(record)
    return record
