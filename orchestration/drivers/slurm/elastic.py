"""A Slurm backend's elastic partition: cloud nodes that Slurm's power saving brings up and
down (ResumeProgram / SuspendProgram), checked settings and what an admin installs.

Slurm decides when nodes come and go: a job waiting for an elastic partition makes
slurmctld run the ResumeProgram with a hostlist (`power.py resume elastic-[1-2]`), a node
idle for `SuspendTime` makes it run the SuspendProgram. Windtunnel only writes the node
definitions (`State=CLOUD`, CPUs and memory from the flavor), the power-saving lines and the
programs' config file (the cloud by its clouds.yaml name: no secret in slurm.conf).

Pure: no cloud and no Slurm here (`elastic_cloud` talks to the cloud, `power` is the CLI).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from typing import Any

from orchestration.drivers.base import SettingsError

__all__ = [
    "ELASTIC_KEYS",
    "dump_config",
    "node_range",
    "META_CLUSTER",
    "META_KIND_ELASTIC",
    "META_NODE",
    "expand_hostlist",
    "node_names",
    "programs_config",
    "prolog_script",
    "render_fragment",
    "server_name",
    "user_data",
    "validate_elastic",
    "wrapper_script",
]

META_KIND_ELASTIC = "elastic"  # windtunnel_kind of an elastic node's server
META_NODE = "windtunnel_node"  # the Slurm node name the server plays
META_CLUSTER = "windtunnel_cluster"  # the partition's cluster tag (several clusters, one project)

_NAME = re.compile(r"^[a-z][a-z0-9\-]{0,30}$")  # a partition or node prefix: a DNS label
_CLOUD_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@ -]{0,254}$")
_PATH = re.compile(r"^/[A-Za-z0-9._/+\-]{0,250}$")
_HOSTPORT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.\-]*(:\d{1,5})?$")
_NFS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.\-]*:/[A-Za-z0-9._/+\-]*$")

ELASTIC_KEYS = {
    "partition",
    "node_prefix",
    "nodes",
    "cloud",
    "clouds_yaml",
    "flavor",
    "image",
    "network",
    "security_groups",
    "key_name",
    "suspend_time",
    "resume_timeout",
    "suspend_timeout",
    "controller",
    "shared_source",
    "shared_path",
    "programs_dir",
    "python",
    "pythonpath",
    "cluster_tag",
}
# (default, lowest, highest) seconds; Slurm needs a resume timeout longer than a boot
_TIMES = {
    "suspend_time": (600, 10, 604_800),
    "resume_timeout": (900, 30, 86_400),
    "suspend_timeout": (120, 5, 3_600),
}


def _str(raw: Mapping[str, Any], key: str, pattern: re.Pattern[str], what: str) -> str:
    value = raw.get(key)
    if value in (None, ""):
        return ""
    if not isinstance(value, str) or not pattern.match(value.strip()):
        raise SettingsError(f"elastic.{key}", f"{value!r} is not a valid {what}")
    return value.strip()


def validate_elastic(raw: Any) -> dict[str, Any]:
    """The `elastic` block of a Slurm backend's settings, checked, defaults filled in;
    SettingsError names the field as `elastic.<key>`. The cloud-side checks (flavor, image,
    node count against the project's limits) are `elastic_cloud.check_elastic`."""
    if not isinstance(raw, Mapping):
        raise SettingsError("elastic", "must be an object (the elastic partition's settings)")
    unknown = sorted(set(raw) - ELASTIC_KEYS)
    if unknown:
        raise SettingsError(
            f"elastic.{unknown[0]}", f"unknown setting; known: {', '.join(sorted(ELASTIC_KEYS))}"
        )
    partition = _str(raw, "partition", _NAME, "partition name (lower-case letters, digits, -)")
    prefix = _str(raw, "node_prefix", _NAME, "node name prefix (lower-case letters, digits, -)")
    nodes = raw.get("nodes")
    if isinstance(nodes, bool) or not isinstance(nodes, int) or not 1 <= nodes <= 10_000:
        raise SettingsError("elastic.nodes", "must be a whole number of nodes from 1 to 10000")
    out: dict[str, Any] = {
        "partition": partition or "cloud",
        "node_prefix": prefix or (partition or "cloud"),
        "nodes": nodes,
        "cloud": _str(raw, "cloud", _CLOUD_REF, "clouds.yaml entry name"),
        "clouds_yaml": _str(raw, "clouds_yaml", _PATH, "absolute path of a clouds.yaml"),
        "flavor": _str(raw, "flavor", _CLOUD_REF, "flavor name or id"),
        "image": _str(raw, "image", _CLOUD_REF, "image name or id"),
        "network": _str(raw, "network", _CLOUD_REF, "network name or id"),
        "key_name": _str(raw, "key_name", _CLOUD_REF, "key pair name"),
        "controller": _str(raw, "controller", _HOSTPORT, "controller host[:port]"),
        "shared_source": _str(raw, "shared_source", _NFS, "NFS export (host:/path)"),
        "shared_path": _str(raw, "shared_path", _PATH, "absolute mount point"),
        "programs_dir": _str(raw, "programs_dir", _PATH, "absolute directory")
        or "/etc/slurm/windtunnel",
        "python": _str(raw, "python", _PATH, "absolute path of a Python 3") or "/usr/bin/python3",
        "pythonpath": _str(raw, "pythonpath", _PATH, "absolute path"),
        "cluster_tag": _str(raw, "cluster_tag", _NAME, "cluster tag (lower-case letters, -)"),
    }
    for key in ("cloud", "flavor", "image", "network"):
        if not out[key]:
            raise SettingsError(f"elastic.{key}", "is required for an elastic partition")
    groups = raw.get("security_groups") or []
    if not isinstance(groups, list) or not all(
        isinstance(g, str) and _CLOUD_REF.match(g) for g in groups
    ):
        raise SettingsError("elastic.security_groups", "must be a list of security group names")
    out["security_groups"] = list(groups)
    for key, (default, lo, hi) in _TIMES.items():
        value = raw.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise SettingsError(f"elastic.{key}", f"must be whole seconds from {lo} to {hi}")
        out[key] = value
    if out["shared_source"] and not out["shared_path"]:
        raise SettingsError("elastic.shared_path", "give the mount point of shared_source")
    out["cluster_tag"] = out["cluster_tag"] or out["node_prefix"]
    return out


# -- hostlists ----------------------------------------------------------------------------

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def expand_hostlist(hostlist: str) -> list[str]:
    """Slurm's hostlist syntax expanded: `a-[1-3,5],b7` → a-1 a-2 a-3 a-5 b7 (zero padding
    kept: `n[01-02]` → n01 n02). ValueError on what is not a hostlist."""
    names: list[str] = []
    depth, start = 0, 0
    parts: list[str] = []
    for i, ch in enumerate(hostlist):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ']' in {hostlist!r}")
        elif ch == "," and depth == 0:
            parts.append(hostlist[start:i])
            start = i + 1
    if depth:
        raise ValueError(f"unbalanced '[' in {hostlist!r}")
    parts.append(hostlist[start:])
    for part in (p.strip() for p in parts):
        if not part:
            continue
        names.extend(_expand_one(part))
    return names


def _expand_one(part: str) -> list[str]:
    open_at = part.find("[")
    if open_at < 0:
        if not re.match(r"^[A-Za-z0-9._\-]+$", part):
            raise ValueError(f"{part!r} is not a host name")
        return [part]
    close_at = part.index("]", open_at)
    head, body, tail = part[:open_at], part[open_at + 1 : close_at], part[close_at + 1 :]
    out = []
    for item in body.split(","):
        m = _RANGE.match(item.strip())
        if not m:
            raise ValueError(f"{item!r} is not a range in {part!r}")
        lo, hi = m.group(1), m.group(2) or m.group(1)
        if int(hi) < int(lo) or int(hi) - int(lo) > 100_000:
            raise ValueError(f"bad range {item!r} in {part!r}")
        width = len(lo) if lo.startswith("0") else 0
        for n in range(int(lo), int(hi) + 1):
            out.extend(_expand_one(f"{head}{str(n).zfill(width)}{tail}"))
    return out


def node_names(elastic: Mapping[str, Any]) -> list[str]:
    """The partition's node names: `<prefix>-1` … `<prefix>-<nodes>`."""
    return [f"{elastic['node_prefix']}-{i}" for i in range(1, elastic["nodes"] + 1)]


def node_range(elastic: Mapping[str, Any]) -> str:
    """The partition's nodes as a Slurm hostlist."""
    n = elastic["nodes"]
    return f"{elastic['node_prefix']}-{'1' if n == 1 else f'[1-{n}]'}"


def server_name(elastic: Mapping[str, Any], node: str) -> str:
    """The cloud server that plays `node` (`wt-` like every server the portal makes)."""
    return f"wt-{elastic['cluster_tag']}-{node}"


# -- what the admin installs ----------------------------------------------------------------


def render_fragment(
    elastic: Mapping[str, Any], *, cpus: int, memory_mb: int, slurmd_port: int | None = None
) -> str:
    """The slurm.conf lines of the elastic partition: the programs, the power-saving times,
    the nodes (`State=CLOUD`, CPUs and RealMemory of the flavor) and the partition (its own
    SuspendTime, ResumeTimeout, SuspendTimeout: the site's other partitions keep theirs)."""
    d = elastic["programs_dir"]
    port = f" Port={slurmd_port}" if slurmd_port else ""
    return "\n".join(
        [
            f"# Elastic partition {elastic['partition']}: written by Windtunnel "
            "(manage.py elastic_slurm_conf); Slurm's power saving grows and shrinks it",
            f"ResumeProgram={d}/resume",
            f"SuspendProgram={d}/suspend",
            f"ResumeFailProgram={d}/resume-fail",
            "# Slurm 22.05 starts a job on a powered-up node only on its 30 s periodic pass; this",
            "# prolog ends when the job's nodes have registered, and Slurm starts the job then",
            "# (one PrologSlurmctld per cluster: call it from the site's own if it has one)",
            f"PrologSlurmctld={d}/prolog",
            f"ResumeTimeout={elastic['resume_timeout']}",
            f"SuspendTimeout={elastic['suspend_timeout']}",
            "ResumeRate=0",
            "SuspendRate=0",
            "TreeWidth=65533",
            "# sinfo and scontrol list powered-down cloud nodes only with this (merge it into an",
            "# existing PrivateData line): the admin page shows them",
            "PrivateData=cloud",
            f"NodeName={node_range(elastic)} State=CLOUD Feature=cloud CPUs={cpus} "
            f"RealMemory={memory_mb}{port}",
            f"PartitionName={elastic['partition']} Nodes={node_range(elastic)} "
            f"MaxTime=INFINITE State=UP SuspendTime={elastic['suspend_time']} "
            f"ResumeTimeout={elastic['resume_timeout']} "
            f"SuspendTimeout={elastic['suspend_timeout']}",
            "",
        ]
    )


def programs_config(elastic: Mapping[str, Any], *, slurm_conf: str = "") -> dict[str, Any]:
    """The programs' config file (JSON, mode 0600 on the controller): the cloud by its
    clouds.yaml entry, what a node's server is made of, and its boot script's inputs."""
    keys = (
        "partition",
        "node_prefix",
        "cluster_tag",
        "cloud",
        "clouds_yaml",
        "flavor",
        "image",
        "network",
        "security_groups",
        "key_name",
        "controller",
        "shared_source",
        "shared_path",
        "resume_timeout",
    )
    return {**{k: elastic[k] for k in keys}, "slurm_conf": slurm_conf}


def wrapper_script(elastic: Mapping[str, Any], action: str) -> str:
    """`<programs_dir>/<action>`: what slurm.conf names; Slurm runs it with one hostlist."""
    assert action in ("resume", "suspend", "resume-fail")
    env = f"PYTHONPATH={shlex.quote(elastic['pythonpath'])} " if elastic["pythonpath"] else ""
    config = shlex.quote(f"{elastic['programs_dir']}/elastic.json")
    return (
        "#!/bin/sh\n# Written by Windtunnel: Slurm's power saving runs this with a hostlist\n"
        f"exec env {env}{shlex.quote(elastic['python'])} -m orchestration.drivers.slurm.power "
        f'{action} --config {config} "$@"\n'
    )


def prolog_script(elastic: Mapping[str, Any], *, slurm_conf: str = "") -> str:
    """`<programs_dir>/prolog`, slurm.conf's PrologSlurmctld: it waits while one of the job's
    nodes is powering up (`#`) or still powered down (`~`), at most ResumeTimeout, and always
    exits 0. Slurm 22.05 finishes a job's configuration when its PrologSlurmctld ends (and
    otherwise only on a periodic pass every 30 s), so the job starts as soon as its nodes'
    slurmd have registered. A job on nodes that are up passes straight through. Shell, not
    Python: it runs for every job of the cluster."""
    conf = f"SLURM_CONF={shlex.quote(slurm_conf)}; export SLURM_CONF\n" if slurm_conf else ""
    return (
        "#!/bin/sh\n"
        "# Written by Windtunnel: slurm.conf's PrologSlurmctld (docs/backends/slurm.md)\n"
        f"{conf}"
        "PATH=$PATH:/usr/bin:/bin:/usr/local/bin\n"
        '[ -n "$SLURM_JOB_NODELIST" ] || exit 0\n'
        f"end=$(( $(date +%s) + {int(elastic['resume_timeout'])} ))\n"
        'while [ "$(date +%s)" -lt "$end" ]; do\n'
        '  states=$(sinfo -h -N -n "$SLURM_JOB_NODELIST" -o %T 2>/dev/null) || exit 0\n'
        '  case "$states" in *"#"*|*"~"*) ;; *) exit 0 ;; esac\n'
        '  state=$(squeue -h -j "$SLURM_JOB_ID" -o %T 2>/dev/null)\n'
        '  [ "$state" = CONFIGURING ] || exit 0\n'
        "  sleep 0.5\n"
        "done\n"
        "exit 0\n"
    )


def user_data(config: Mapping[str, Any], node: str) -> str:
    """The cloud-init user data of `node`'s server: its host name, the shared run directory,
    and slurmd joining the controller as `node` (configless: slurm.conf comes from it)."""
    lines = ["#cloud-config", f"hostname: {node}", "runcmd:"]
    if config.get("shared_source"):
        path = shlex.quote(config["shared_path"])
        src = shlex.quote(config["shared_source"])
        lines.append(f"  - [sh, -c, 'mkdir -p {path} && mount -t nfs {src} {path}']")
    server = f" --conf-server {shlex.quote(config['controller'])}" if config["controller"] else ""
    lines.append(f"  - [sh, -c, 'slurmd -N {shlex.quote(node)}{server}']")
    return "\n".join(lines) + "\n"


def dump_config(config: Mapping[str, Any]) -> str:
    return json.dumps(config, indent=2, sort_keys=True) + "\n"
