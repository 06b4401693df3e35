"""Multi-node MPI runs on OpenStack: one Heat stack per attempt (orchestration/heat/mpi-cluster.yaml).

The stack is a head server and `nodes - 1` workers of one flavor (one node's share of the
run's cores and memory). The head's boot script writes run.json and a hostfile, makes an SSH
key for the run user, exports the attempt's work directory over NFS to the workers, waits for
them, and starts the run agent; the agent fetches, prepares and decomposes the case on the
head, and its mpirun steps get `--hostfile <work_dir>/hostfile -np <processes>`, so the ranks
spread over the nodes. Workers mount the directory at the same path and accept the head's key.

Values reach the boot scripts only as Heat parameters with constraints (paths, numbers,
names) or from the cloud (addresses, the volume id); run.json travels base64-encoded and is
decoded into a file, so nothing the user wrote is ever read by a shell.

Handles are "stack:<name>/<id>"; stacks are tagged `windtunnel`, `run=<id>`, `attempt=<n>`
so that `stack_leaks` can find the ones the portal no longer tracks. The functions take the
driver as its ServerClient (servers.py): flavors, images, networks and the calls of `client`.
See docs/backends/openstack-heat.md.
"""

from __future__ import annotations

import base64
import functools
import json
import math
import posixpath
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from orchestration.drivers.base import DriverError, RunPhase, RunSpec, RunStatus
from orchestration.drivers.openstack.boot import vm_run_json
from orchestration.drivers.openstack.servers import ServerClient
from orchestration.drivers.openstack.timestamps import created_at

__all__ = [
    "STACK_TAG",
    "TEMPLATE_PATH",
    "delete_stack",
    "head_run_json",
    "load_template",
    "mpi_argv",
    "poll_stack",
    "stack_events",
    "stack_leaks",
    "stack_name",
    "stack_parameters",
    "stack_tags",
    "start_stack",
]

TEMPLATE_PATH = Path(__file__).resolve().parents[2] / "heat" / "mpi-cluster.yaml"
STACK_TAG = "windtunnel"
MPI_LAUNCHERS = ("mpirun", "mpiexec", "orterun")
# mpirun options that the stack decides (they are dropped from a step's argv), with the
# number of values each takes
_PLACEMENT_OPTIONS = {
    "-np": 1,
    "--np": 1,
    "-n": 1,
    "-c": 1,
    "-hostfile": 1,
    "--hostfile": 1,
    "-machinefile": 1,
    "--machinefile": 1,
    "-host": 1,
    "--host": 1,
    "-H": 1,
    "--default-hostfile": 1,
}
# other mpirun options that take values: the argv is scanned up to the program's name
_VALUE_OPTIONS = {
    "-x": 1,
    "--mca": 2,
    "-mca": 2,
    "--gmca": 2,
    "-gmca": 2,
    "--bind-to": 1,
    "-bind-to": 1,
    "--map-by": 1,
    "-map-by": 1,
    "--rank-by": 1,
    "-rank-by": 1,
    "-npernode": 1,
    "--npernode": 1,
    "-N": 1,
    "--prefix": 1,
    "-wdir": 1,
    "--wdir": 1,
    "-wd": 1,
    "--output-filename": 1,
    "-output-filename": 1,
    "--tune": 1,
    "-tune": 1,
    "--timeout": 1,
    "--report-bindings": 0,
}
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_ENV_NAMES = 4000  # the template's constraint
MAX_RUN_JSON_B64 = 40_000  # Nova takes 64 KiB of user data (base64); the script needs ~10 KiB
_FAILED = ("CREATE_FAILED", "UPDATE_FAILED", "RESUME_FAILED", "SUSPEND_FAILED", "CHECK_FAILED")


@functools.lru_cache(maxsize=1)
def load_template() -> dict[str, Any]:
    """The HOT template as a mapping (Heat takes it as JSON)."""
    import yaml

    doc: dict[str, Any] = yaml.safe_load(TEMPLATE_PATH.read_text(encoding="utf-8"))
    # YAML reads 2018-08-31 as a date; Heat wants the string
    doc["heat_template_version"] = str(doc["heat_template_version"])
    return doc


def stack_name(spec: RunSpec) -> str:
    """The attempt's stack name (a retried dispatch finds the stack by it)."""
    return f"wt-{spec.run_id}-a{spec.attempt}"


def stack_tags(spec: RunSpec) -> list[str]:
    """The stack's tags: `windtunnel`, `run=<id>`, `attempt=<n>` (what the reaper reads)."""
    return [STACK_TAG, f"run={spec.run_id}", f"attempt={spec.attempt}"]


def _tagged_key(tags: Sequence[str] | None) -> tuple[str, int] | None:
    """(run id, attempt) from a stack's tags; None for a stack that is not a run's."""
    found = {}
    for tag in tags or ():
        key, sep, value = str(tag).partition("=")
        if sep:
            found[key] = value
    if STACK_TAG not in (tags or ()) or "run" not in found:
        return None
    try:
        return found["run"], int(found.get("attempt", ""))
    except ValueError:
        return None


# -- the run.json of the head --------------------------------------------------------------


def mpi_argv(argv: Sequence[str], *, hostfile: str, processes: int) -> tuple[str, ...]:
    """A step's argv with mpirun spread over the stack: `--hostfile <hostfile> -np <processes>`
    after the launcher, and the step's own process count and host options dropped. Steps
    that are not mpirun come back as they are."""
    if not argv or posixpath.basename(argv[0]) not in MPI_LAUNCHERS:
        return tuple(argv)
    out = [argv[0], "--hostfile", hostfile, "-np", str(processes)]
    i = 1
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("-"):  # the program: the rest is its own
            out.extend(argv[i:])
            break
        name = arg.split("=", 1)[0]
        if name in _PLACEMENT_OPTIONS:
            i += 1 if "=" in arg else 1 + _PLACEMENT_OPTIONS[name]
            continue
        takes = 0 if "=" in arg else _VALUE_OPTIONS.get(name, 0)
        out.extend(argv[i : i + 1 + takes])
        i += 1 + takes
    return tuple(out)


def head_run_json(spec: RunSpec, *, work_dir: str) -> str:
    """run.json for the head's agent: like a single server's, with mpirun over the hostfile."""
    hostfile = f"{work_dir}/hostfile"
    data = vm_run_json(spec, work_dir=work_dir)
    data["steps"] = [
        {
            "name": step.name,
            "argv": list(mpi_argv(step.argv, hostfile=hostfile, processes=spec.processes)),
            "role": step.role,
        }
        for step in spec.steps
    ]
    return json.dumps(data, separators=(",", ":"))


# -- create ---------------------------------------------------------------------------------


def stack_parameters(client: ServerClient, spec: RunSpec) -> dict[str, Any]:
    """The template's parameters for this run's topology (looks up flavor, image, network)."""
    if not _RUN_ID.match(spec.run_id):
        raise DriverError(f"run id {spec.run_id!r} cannot name a stack")
    nodes = max(int(spec.nodes), 2)
    per_node = max(1, math.ceil(spec.processes / nodes))
    flavor = client.flavor_for(cores=per_node, memory_gb=spec.memory_gb / nodes)
    image_id = client.image_id(spec)
    network = ""
    if client.settings["network"] != "none":
        network = client.network_args()["networks"][0]["uuid"]
    work_dir = client.vm_work_dir(spec)
    run_json = base64.b64encode(head_run_json(spec, work_dir=work_dir).encode()).decode()
    if len(run_json) > MAX_RUN_JSON_B64:
        raise DriverError(
            f"run.json is {len(run_json)} bytes in base64; the head's user data takes at most "
            f"{MAX_RUN_JSON_B64}: shorten the study's parameters or context"
        )
    env_names = ""
    for key in sorted(k for k in spec.env if _ENV_NAME.match(k)):
        if len(env_names) + len(key) + 1 > MAX_ENV_NAMES:
            break  # forwarded by name only: a rank misses it, the head's steps still have it
        env_names = f"{env_names} {key}".lstrip()
    groups = client.settings.get("security_groups") or ["default"]
    return {
        "run_id": spec.run_id,
        "attempt": int(spec.attempt),
        "image": image_id,
        "flavor": flavor.id,
        "worker_count": nodes - 1,
        "processes_per_node": per_node,
        "network": network,
        "security_groups": ",".join(groups),
        "key_name": client.settings.get("key_name") or "",
        "availability_zone": client.settings.get("availability_zone") or "",
        "volume_size_gb": int(client.settings.get("volume_size_gb") or 0),
        "work_root": client.settings["vm_work_root"],
        "work_dir": work_dir,
        "python": client.settings["vm_python"],
        "env_names": env_names,
        "worker_wait": int(client.settings.get("worker_wait") or 900),
        "run_json_b64": run_json,
    }


def start_stack(client: ServerClient, spec: RunSpec) -> str:
    """Create the attempt's stack (or find the one a retried dispatch already made)."""
    conn = client.conn
    name = stack_name(spec)
    existing = client.call(
        "find stack",
        lambda: conn.orchestration.find_stack(name, ignore_missing=True, resolve_outputs=False),
    )
    if existing is not None and not str(existing.status or "").startswith("DELETE"):
        return f"stack:{name}/{existing.id}"
    parameters = stack_parameters(client, spec)
    template = load_template()
    timeout_mins = max(10, math.ceil(client.settings["boot_timeout"] / 60))
    stack = client.call(
        "create stack",
        lambda: conn.orchestration.create_stack(
            name=name,
            template=template,
            parameters=parameters,
            timeout_mins=timeout_mins,
            tags=",".join(stack_tags(spec)),  # Heat's API takes the tags comma-separated
            is_rollback_disabled=True,  # keep a failed stack's resources and reason to show
        ),
        retries=(),  # a lost answer is found by name on the next dispatch
    )
    return f"stack:{name}/{stack.id}"


# -- poll, events, delete -------------------------------------------------------------------


def _split(ident: str) -> tuple[str, str]:
    name, _, stack_id = ident.partition("/")
    return name, stack_id or name


def _stack_ref(name: str, stack_id: str) -> Any:
    from openstack.orchestration.v1 import stack as _stack

    return _stack.Stack.existing(id=stack_id, name=name)


def _event_line(event: Any) -> str:
    reason = " ".join(str(event.resource_status_reason or "").split())
    return f"{event.event_time} {event.resource_name} {event.resource_status} {reason}".rstrip()


def _latest_event(client: ServerClient, name: str, stack_id: str) -> str:
    ref = _stack_ref(name, stack_id)

    def first() -> Any:
        events = client.conn.orchestration.stack_events(ref, sort_dir="desc", limit=1)
        return next(iter(events), None)

    from openstack import exceptions as os_exc

    try:
        event = client.call("stack events", first)
    except (DriverError, os_exc.SDKException):  # the status is worth more than its detail
        return ""
    return _event_line(event) if event is not None else ""


def poll_stack(client: ServerClient, ident: str) -> RunStatus:
    """What the stack says of the run (the agent's own reports say the rest)."""
    from openstack import exceptions as os_exc

    name, stack_id = _split(ident)
    if not stack_id:
        return RunStatus(phase=RunPhase.UNKNOWN, reason="not a stack handle")
    try:
        stack = client.call(
            "get stack",
            lambda: client.conn.orchestration.get_stack(stack_id, resolve_outputs=False),
        )
    except os_exc.ResourceNotFound:
        return RunStatus(phase=RunPhase.UNKNOWN, reason="the stack is gone")
    status = str(stack.status or "").upper()
    reason = " ".join(str(stack.status_reason or "").split())[:1000]
    if status.startswith("DELETE"):
        return RunStatus(phase=RunPhase.UNKNOWN, reason=f"the stack is {status.lower()}")
    if status in _FAILED or status.startswith("ROLLBACK"):
        return RunStatus(phase=RunPhase.EXITED, reason=f"stack {status}: {reason or 'no detail'}")
    if status.endswith("IN_PROGRESS") or status.startswith("INIT"):
        latest = _latest_event(client, name, stack_id)
        return RunStatus(
            phase=RunPhase.PENDING,
            reason=f"stack creating: {latest}" if latest else f"stack {status.lower()}",
        )
    if status in ("SUSPEND_COMPLETE",):
        return RunStatus(phase=RunPhase.EXITED, reason="stack suspended")
    # CREATE_COMPLETE (or a completed update, check, resume): the head server decides
    head = client.list_servers({"name": f"^{re.escape(name)}-head$"})
    if not head:
        return RunStatus(phase=RunPhase.EXITED, reason="the stack's head server is gone")
    server = client.server_status(head[0])
    return RunStatus(
        phase=server.phase,
        exit_code=server.exit_code,
        reason=f"stack complete; head {server.reason}",
    )


def stack_events(
    client: ServerClient, ident: str, *, since: str | None
) -> tuple[list[str], str | None]:
    """The stack's events after the event `since` (all when None or no longer known) as run
    log lines "<time> <resource> <status> <reason>", oldest first, and the newest event id."""
    from openstack import exceptions as os_exc

    name, stack_id = _split(ident)
    ref = _stack_ref(name, stack_id)
    try:
        events = client.call(
            "stack events",
            lambda: list(client.conn.orchestration.stack_events(ref, sort_dir="asc")),
        )
    except os_exc.ResourceNotFound:
        return [], since
    ids = [e.id for e in events]
    if since is not None and since in ids:
        events = events[ids.index(since) + 1 :]
    newest = events[-1].id if events else since
    return [_event_line(e) for e in events], newest


def delete_stack(client: ServerClient, ident: str) -> None:
    """Delete the stack and so every server, port and volume in it; gone already is fine."""
    name, stack_id = _split(ident)
    if not stack_id:
        return
    client.call(
        "delete stack",
        lambda: client.conn.orchestration.delete_stack(
            _stack_ref(name, stack_id), ignore_missing=True
        ),
    )


def stack_leaks(client: ServerClient, *, tracked: set[tuple[str, int]]) -> list[str]:
    """Delete the run stacks whose (run, attempt) the portal does not track, once older than
    leak_grace (a stack being created has no handle stored yet); the names of the deleted."""
    stacks = client.call(
        "list stacks", lambda: list(client.conn.orchestration.stacks(tags=[STACK_TAG]))
    )
    deleted = []
    now = client.clock()
    for stack in stacks:
        key = _tagged_key(getattr(stack, "tags", None))
        status = str(stack.status or "")
        if key is None or key in tracked or status in ("DELETE_IN_PROGRESS", "DELETE_COMPLETE"):
            continue
        created = created_at(stack)
        if created is not None and now - created < client.settings["leak_grace"]:
            continue
        delete_stack(client, f"{stack.name}/{stack.id}")
        deleted.append(stack.name)
    return deleted
