"""Does a run fit? The one capacity check, used by submission, the preview, admission and
the quota panel (docs/architecture.md). And may more runs join the queue (`queue_problem`,
checked at submission and extension)? Has the tenant room left to store results
(`storage_problem`: submission, extension, the preview, admission and the quota panel)?

A run of a given `Shape` fits when, on top of what is in use, it stays within the tenant's
quota, its backend's capacity and the backend's cloud project limits. The check is pure:
callers bring the quota row, what is in use (derived from runs, studies.usage) and the
backend's capacity (compute.capacity). What does not fit comes back as a `Problem` that
names the limit; submission phrases it as what to change, admission as why a run waits.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any, Literal

from compute.capacity import BackendCapacity
from core.text import plural
from quotas.models import Quota

EPSILON = 1e-9  # memory sums are floats
GB = 1024**3  # the quota's GB, as the quota panel shows them


@dataclasses.dataclass(frozen=True, kw_only=True)
class Usage:
    """What runs hold (or a run needs): cores, memory, nodes (on node-holding backends), runs."""

    cores: int = 0
    memory_gb: float = 0.0
    nodes: int = 0
    runs: int = 0

    def plus(self, shape: Shape, *, holds_nodes: bool = True) -> Usage:
        return Usage(
            cores=self.cores + shape.cores,
            memory_gb=self.memory_gb + shape.memory_gb,
            nodes=self.nodes + (shape.nodes if holds_nodes else 0),
            runs=self.runs + 1,
        )

    def plus_usage(self, other: Usage) -> Usage:
        """What is in use when `other` (what some runs hold) is added."""
        return Usage(
            cores=self.cores + other.cores,
            memory_gb=self.memory_gb + other.memory_gb,
            nodes=self.nodes + other.nodes,
            runs=self.runs + other.runs,
        )

    def minus(self, other: Usage) -> Usage:
        """What is left in use when `other` (what some runs held) is given back."""
        return Usage(
            cores=self.cores - other.cores,
            memory_gb=self.memory_gb - other.memory_gb,
            nodes=self.nodes - other.nodes,
            runs=self.runs - other.runs,
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class Shape:
    """What one run needs."""

    cores: int
    memory_gb: float
    nodes: int = 1

    def describe(self, *, holds_nodes: bool) -> str:
        parts = [f"{self.cores} core{'s' if self.cores != 1 else ''}", f"{self.memory_gb:g} GB"]
        if holds_nodes:
            parts.append(f"{self.nodes} node{'s' if self.nodes != 1 else ''}")
        return ", ".join(parts)


Limit = Literal["quota", "backend", "cloud"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Problem:
    """A limit a run would pass: which (`limit`, `resource`), where, and the numbers."""

    limit: Limit
    resource: str  # runs | cores | memory | nodes | instances | disabled | storage
    where: str  # the backend's name, for backend and cloud limits
    need: float
    used: float
    allowed: float

    def __str__(self) -> str:
        """Why a queued run waits, in words, e.g. "3 cores in use + 2 for this run, over
        the tenant quota of 4 cores"."""
        n, u, a = self.need, self.used, self.allowed
        if self.resource == "disabled":
            return f"backend {self.where} is disabled"
        if self.resource == "storage" and n:
            return (
                f"{_gb(u)} GB stored + {_gb(n)} GB for this, over the storage quota of {a:g} "
                "GB: delete studies or uploads you no longer need, or ask an admin for more"
            )
        if self.resource == "storage":
            return (
                f"storage quota of {a:g} GB used up ({_gb(u)} GB stored): delete studies or "
                "uploads you no longer need, or ask an admin for more"
            )
        unit = {"memory": "GB", "runs": "runs"}.get(self.resource, self.resource)
        if self.resource == "memory" and self.limit == "cloud":
            unit = "GB of RAM"
        if self.limit == "quota":
            if self.resource == "runs":
                return f"{u:g} of the {a:g} concurrent runs of the tenant quota in use"
            return (
                f"{u:g} {unit} in use + {n:g} for this run, over the tenant quota of {a:g} {unit}"
            )
        if self.limit == "backend":
            if self.resource == "nodes":
                return (
                    f"backend {self.where} runs at most {plural(a, 'node')} per run; this run "
                    f"needs {n:g}"
                )
            return (
                f"{u:g} {unit} in use + {n:g} for this run, over the {a:g} {unit} "
                f"backend {self.where} has"
            )
        return (
            f"{u:g} {unit} in use + {n:g} for this run, over the {a:g} {unit} "
            f"the OpenStack project of backend {self.where} allows"
        )

    def limit_named(self) -> str:
        """The limit itself, in words, as the preview names what a single run does not fit:
        "your quota of 8 cores", "backend local's 2 cores", "the OpenStack project of
        backend os (6 cores)"."""
        a, where = self.allowed, self.where
        if self.resource == "disabled":
            return f"backend {where}, which is disabled"
        if self.resource == "storage":
            return f"your storage quota of {a:g} GB"
        amount = {
            "cores": plural(a, "core"),
            "memory": f"{a:g} GB" + (" of RAM" if self.limit == "cloud" else ""),
            "nodes": plural(a, "node"),
            "instances": plural(a, "server"),
            "runs": plural(a, "concurrent run"),
        }.get(self.resource, f"{a:g} {self.resource}")
        if self.limit == "quota":
            return f"your quota of {amount}"
        if self.limit == "backend":
            per_run = " per run" if self.resource == "nodes" else ""
            return f"backend {where}'s {amount}{per_run}"
        return f"the OpenStack project of backend {where} ({amount})"

    def for_one_run(self) -> str:
        """What a single run is refused with at submission, and what to change."""
        n, a = self.need, self.allowed
        if self.resource == "disabled":
            return f"backend {self.where} is disabled; choose another backend"
        if self.resource == "storage":
            return (
                f"your tenant's storage quota (storage_gb) of {a:g} GB is used up "
                f"({_gb(self.used)} GB stored: case uploads, result archives and run "
                "directories): delete studies or uploads you no longer need, or ask an admin "
                "to raise it; the study can be saved as a draft meanwhile"
            )
        if self.limit == "quota":
            return {
                "cores": f"one run needs {plural(n, 'core')} but your quota allows "
                f"{plural(a, 'core')}; lower resources.processes or ask an admin to raise the "
                "quota",
                "memory": f"one run needs {n:g} GB of memory but your quota allows {a:g} GB; "
                "lower resources.memory_gb",
                "nodes": f"one run needs {plural(n, 'node')} but your quota allows {a:g}; lower "
                "resources.nodes",
            }.get(self.resource, f"one run does not fit your quota: {self}")
        if self.limit == "backend":
            return {
                "cores": f"one run needs {plural(n, 'core')} but backend {self.where} has "
                f"{a:g}; lower resources.processes or choose another backend",
                "memory": f"one run needs {n:g} GB but backend {self.where} has {a:g} GB; lower "
                "resources.memory_gb",
                "nodes": f"one run needs {plural(n, 'node')} but backend {self.where} runs at "
                f"most {plural(a, 'node')} per run",
            }.get(self.resource, f"one run does not fit backend {self.where}: {self}")
        unit = {"cores": "cores", "memory": "GB", "instances": "instances"}[self.resource]
        needs = f"{n:g} GB of RAM" if self.resource == "memory" else f"{n:g} {unit}"
        return (
            f"one run needs {needs} but the OpenStack project of backend {self.where} allows "
            f"{a:g} {unit}; lower resources.{_FIELD[self.resource]} or ask the cloud's admin "
            "to raise the project's limits"
        )


_FIELD = {"cores": "processes", "memory": "memory_gb", "instances": "nodes"}
NOTHING = Usage()


def quota_problem(*, shape: Shape, quota: Quota, usage: Usage, holds_nodes: bool) -> Problem | None:
    """The tenant's quota: concurrent runs, cores, memory, and nodes where runs hold nodes."""
    checks: list[tuple[str, float, float, float]] = [
        ("runs", 1, usage.runs, quota.max_runs),
        ("cores", shape.cores, usage.cores, quota.cores),
        ("memory", shape.memory_gb, usage.memory_gb, quota.memory_gb),
    ]
    if holds_nodes:
        checks.append(("nodes", shape.nodes, usage.nodes, quota.max_nodes))
    return _first("quota", "", checks)


def backend_problem(*, shape: Shape, backend: BackendCapacity, usage: Usage) -> Problem | None:
    """The backend's capacity (what every tenant's runs hold there) and its nodes per run."""
    if not backend.enabled:
        return Problem(
            limit="backend", resource="disabled", where=backend.name, need=0, used=0, allowed=0
        )
    found = _first(
        "backend",
        backend.name,
        [
            ("cores", shape.cores, usage.cores, backend.cores),
            ("memory", shape.memory_gb, usage.memory_gb, backend.memory_gb),
        ],
    )
    if found is None and shape.nodes > backend.max_nodes:
        found = Problem(
            limit="backend",
            resource="nodes",
            where=backend.name,
            need=shape.nodes,
            used=0,
            allowed=backend.max_nodes,
        )
    return found


def cloud_problem(*, shape: Shape, backend: BackendCapacity, usage: Usage) -> Problem | None:
    """The backend's cloud project limits (the portal is the project's one user by design,
    docs/backends/openstack.md: its own runs are the project's usage)."""
    cloud = backend.cloud
    if cloud is None:
        return None
    checks: list[tuple[str, float, float, float]] = []
    if cloud.cores is not None:
        checks.append(("cores", shape.cores, usage.cores, cloud.cores))
    if cloud.ram_gb is not None:
        checks.append(("memory", shape.memory_gb, usage.memory_gb, cloud.ram_gb))
    if cloud.instances is not None:
        checks.append(("instances", max(shape.nodes, 1), usage.nodes, cloud.instances))
    return _first("cloud", backend.name, checks)


def run_fit_problem(
    *,
    shape: Shape,
    quota: Quota,
    backend: BackendCapacity,
    usage: Usage = NOTHING,
    backend_usage: Usage = NOTHING,
) -> Problem | None:
    """The first limit a run of `shape` passes, on top of the tenant's `usage` and what every
    tenant holds on the backend (`backend_usage`); None when it fits. With nothing in use
    (the defaults) it says whether a single run can ever fit."""
    return (
        quota_problem(shape=shape, quota=quota, usage=usage, holds_nodes=backend.holds_nodes)
        or backend_problem(shape=shape, backend=backend, usage=backend_usage)
        or cloud_problem(shape=shape, backend=backend, usage=backend_usage)
    )


def storage_problem(*, quota: Quota, stored_bytes: int, adding_bytes: int = 0) -> Problem | None:
    """The tenant's storage quota: what the portal stores for it (studies.usage.
    storage_used_bytes) at or above `storage_gb` leaves no room for another run's files, so
    nothing new is submitted or admitted until some is deleted (a quota of 0: nothing may
    be stored, so nothing runs). Runs already running keep going, each within its own disk
    budget (run_disk_gb). With `adding_bytes` (an upload, whose size is known before it is
    stored): whether the quota would be used up with it."""
    if stored_bytes + adding_bytes < quota.storage_gb * GB:
        return None
    return Problem(
        limit="quota",
        resource="storage",
        where="",
        need=adding_bytes / GB,
        used=stored_bytes / GB,
        allowed=quota.storage_gb,
    )


def budget_problem(*, budget: float | None, used: float, resets: datetime) -> str | None:
    """The tenant's monthly core-hour budget: once its runs have used it (studies.usage.
    core_hours_used, over the calendar month), nothing more is admitted until the month
    ends or an admin raises it; runs already running finish (a budget is checked when a
    run starts, so the month may end a little over it). None: no budget, or room left. The
    words name no figure that grows while runs run: admission rewrites a queue's reasons only
    when they change."""
    if budget is None or used < budget:
        return None
    return (
        f"monthly core-hour budget of {budget:g} core-hours used up: runs start again on"
        f" {resets:%-d %B %Y} (00:00 UTC), or when an admin raises the budget"
    )


def _gb(value: float) -> str:
    """A stored amount in GB as the messages say it: 0.21, 51.3, 1,234. Coarse on purpose:
    a held run's wait reason quotes it, and admission rewrites a queue's reasons only when
    what they say changes, not with every megabyte a running run writes."""
    if value < 1:
        return f"{round(value, 2):g}"
    if value < 100:
        return f"{round(value, 1):g}"
    return f"{value:,.0f}"


SMALLEST_DISK_GB = 0.001  # a run's disk budget when the tenant may store nothing


def run_disk_gb(*, quota: Quota, default_gb: float) -> float:
    """The disk budget of one run of the tenant (run.json's sandbox.limits.disk_gb, which its
    agent enforces): the deployment's per-run budget (WINDTUNNEL_RUN_DISK_GB; 0: none of its
    own), never more than the tenant's whole storage quota. Always > 0 (0 tells the agent
    "no budget"): a tenant whose quota is 0 gets the smallest."""
    budget = quota.storage_gb if default_gb <= 0 else min(default_gb, quota.storage_gb)
    return max(budget, SMALLEST_DISK_GB)


def queue_problem(*, quota: Quota, active: int, adding: int) -> str | None:
    """Why `adding` more runs cannot be submitted on top of the tenant's `active` ones (queued
    or running: submitted and not yet ended), or None: the quota's cap on runs in the queue."""
    limit = quota.max_queued_runs
    if adding <= 0 or active + adding <= limit:
        return None
    return (
        f"this adds {adding:,} run(s) to the {active:,} your tenant has queued or running, but "
        f"your quota allows {limit:,} queued or running runs at once; submit fewer points, "
        "wait for runs to end (or cancel some), or ask an admin to raise the quota's "
        "max_queued_runs"
    )


def runs_at_once(*, shape: Shape, quota: Quota, backend: BackendCapacity) -> int:
    """How many runs of `shape` fit at once with nothing else running (0: not even one)."""
    return runs_at_once_limited(shape=shape, quota=quota, backend=backend)[0]


def runs_at_once_limited(
    *, shape: Shape, quota: Quota, backend: BackendCapacity
) -> tuple[int, str]:
    """runs_at_once, and what sets that number, in words: the tenant's quota ("your quota of
    4 cores"), the backend's capacity ("backend local's 2 cores") or the cloud project's
    limits; "" when not even one run fits."""
    if run_fit_problem(shape=shape, quota=quota, backend=backend) is not None:
        return 0, ""
    n = backend.name
    bounds: list[tuple[int, str]] = [
        (quota.max_runs, f"your quota of {plural(quota.max_runs, 'concurrent run')}"),
        (quota.cores // shape.cores, f"your quota of {plural(quota.cores, 'core')}"),
        (backend.cores // shape.cores, f"backend {n}'s {plural(backend.cores, 'core')}"),
    ]
    if shape.memory_gb:
        bounds += [
            (int(quota.memory_gb // shape.memory_gb), f"your quota of {quota.memory_gb:g} GB"),
            (int(backend.memory_gb // shape.memory_gb), f"backend {n}'s {backend.memory_gb:g} GB"),
        ]
    if backend.holds_nodes:
        bounds.append(
            (quota.max_nodes // shape.nodes, f"your quota of {plural(quota.max_nodes, 'node')}")
        )
    cloud = backend.cloud
    project = f"the OpenStack project of backend {n}"
    if cloud is not None:
        if cloud.cores is not None:
            bounds.append(
                (cloud.cores // shape.cores, f"{project} ({plural(cloud.cores, 'core')})")
            )
        if cloud.ram_gb is not None and shape.memory_gb:
            bounds.append(
                (int(cloud.ram_gb // shape.memory_gb), f"{project} ({cloud.ram_gb:g} GB of RAM)")
            )
        if cloud.instances is not None:
            bounds.append(
                (
                    cloud.instances // max(shape.nodes, 1),
                    f"{project} ({plural(cloud.instances, 'server')})",
                )
            )
    count, why = min(bounds, key=lambda b: b[0])
    return max(count, 0), why


def effective_limits(*, quota: Quota, backends: list[BackendCapacity]) -> list[dict[str, Any]]:
    """Per backend the tenant may use: each limit's value and where it comes from."""
    out = []
    for backend in backends:
        cloud = backend.cloud
        rows = {}
        for key, portal, cap, cloud_value in (
            ("cores", quota.cores, backend.cores, cloud.cores if cloud else None),
            ("memory_gb", quota.memory_gb, backend.memory_gb, cloud.ram_gb if cloud else None),
            ("nodes", quota.max_nodes, backend.max_nodes, cloud.instances if cloud else None),
        ):
            candidates: list[tuple[float, str]] = [
                (portal, "portal quota"),
                (cap, "backend capacity"),
            ]
            if cloud_value is not None:
                candidates.append((cloud_value, "cloud project limit"))
            value, source = min(candidates, key=lambda c: c[0])
            rows[key] = {"value": value, "source": source}
        out.append({"backend": backend.name, "kind": backend.kind, "limits": rows})
    return out


def _first(
    limit: Limit, where: str, checks: list[tuple[str, float, float, float]]
) -> Problem | None:
    for resource, need, used, allowed in checks:
        if used + need > allowed + (EPSILON if resource == "memory" else 0):
            return Problem(
                limit=limit, resource=resource, where=where, need=need, used=used, allowed=allowed
            )
    return None
