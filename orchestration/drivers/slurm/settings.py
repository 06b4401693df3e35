"""A Slurm backend's settings: what an admin may set, checked and normalised.

Every value that reaches a batch script passes a pattern here first: names, paths, module
names and sbatch options are refused when they hold spaces, quotes or shell syntax.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, TypedDict

from orchestration.drivers.base import SettingsError
from orchestration.drivers.slurm.elastic import validate_elastic

__all__ = [
    "ACCOUNTING_MODES",
    "CAPACITY_MODES",
    "SAFE_PATH",
    "SECRET_FIELDS",
    "TRANSPORTS",
    "SlurmSettings",
    "validate_settings",
]

SECRET_FIELDS = ("private_key", "passphrase", "known_hosts")
TRANSPORTS = ("local", "ssh")
CAPACITY_MODES = ("fixed", "ask")
ACCOUNTING_MODES = ("auto", "sacct", "jobcomp", "none")

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
_NAME_LIST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*(,[A-Za-z0-9][A-Za-z0-9_.\-]*)*$")
_HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9\-.]*[A-Za-z0-9])?$|^\[?[0-9A-Fa-f:.]+\]?$")
_USER = re.compile(r"^[a-z_][a-z0-9_.\-]{0,31}$")
# a path on the cluster, safe in a batch script without quoting (also checked on the paths
# the driver builds itself)
SAFE_PATH = re.compile(r"^[A-Za-z0-9_./+\-~@%=,]+$")
_TIME = re.compile(r"^(\d+(-\d+)?)(:\d{1,2}){0,2}$")
_DIRECTIVE = re.compile(r"^--[a-z][a-z0-9\-]*(=[A-Za-z0-9_.,:/@%+=\-\[\]]+)?$")
_MODULE = re.compile(r"^[A-Za-z0-9_.+/\-@:]+$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Directives the driver sets itself (resources, output, array) may not be overridden.
_RESERVED_DIRECTIVES = {
    "--array",
    "--chdir",
    "--error",
    "--export",
    "--job-name",
    "--mem",
    "--mem-per-cpu",
    "--nodes",
    "--ntasks",
    "--output",
    "--parsable",
    "--requeue",
    "--no-requeue",
    "--wrap",
    "--partition",
    "--account",
    "--qos",
    "--time",
}
# sbatch options an admin may add (full names): where and how jobs are placed. Output,
# identity (--uid), arrays, holds, test-only runs and exports stay the driver's.
_EXTRA_DIRECTIVES = {
    "--begin",
    "--clusters",
    "--comment",
    "--constraint",
    "--core-spec",
    "--cores-per-socket",
    "--cpu-freq",
    "--cpus-per-task",
    "--distribution",
    "--exclude",
    "--exclusive",
    "--gpus",
    "--gpus-per-node",
    "--gpus-per-task",
    "--gres",
    "--gres-flags",
    "--hint",
    "--licenses",
    "--mail-type",
    "--mail-user",
    "--mem-bind",
    "--network",
    "--nice",
    "--nodelist",
    "--ntasks-per-core",
    "--ntasks-per-node",
    "--ntasks-per-socket",
    "--oversubscribe",
    "--reservation",
    "--sockets-per-node",
    "--spread-job",
    "--switches",
    "--thread-spec",
    "--threads-per-core",
    "--time-min",
    "--tmp",
    "--use-min-nodes",
    "--wckey",
}
_SETTING_KEYS = {
    "transport",
    "host",
    "port",
    "user",
    "partition",
    "account",
    "qos",
    "time_limit",
    "extra_directives",
    "work_root",
    "python",
    "pythonpath",
    "agent_path",
    "modules",
    "env",
    "slurm_conf",
    "capacity",
    "cores",
    "memory_gb",
    "max_nodes",
    "stage_case",
    "array",
    "max_array_size",
    "accounting",
    "connect_timeout",
    "command_timeout",
    "retries",
    "submit_retry_seconds",
    "max_connections",
    "max_sessions",
    "job_name_prefix",
    "poll_cache_seconds",
    "mounts",  # the portal's, informational for the agent
    "elastic",  # an elastic partition of cloud nodes (elastic.py)
}


class SlurmSettings(TypedDict):
    """A Slurm backend's settings as `validate_settings` gives them: every key, checked, with
    its default filled in."""

    transport: str  # one of TRANSPORTS
    host: str  # the login node (ssh)
    port: int
    user: str  # the cluster user (ssh)
    partition: str  # comma-separated names, or "" for the cluster's default
    account: str
    qos: str
    time_limit: str  # a Slurm time, or "" for the partition's default
    extra_directives: list[str]  # whole sbatch options from _EXTRA_DIRECTIVES
    work_root: str  # "" when each run uses the work_dir it is given (local transport)
    python: str
    pythonpath: str
    modules: list[str]  # environment modules loaded before the agent starts
    env: dict[str, str]
    slurm_conf: str
    capacity: str  # one of CAPACITY_MODES
    cores: int
    memory_gb: float
    max_nodes: int
    stage_case: bool
    array: bool
    max_array_size: int  # 0: the cluster's MaxArraySize
    accounting: str  # one of ACCOUNTING_MODES
    connect_timeout: float
    command_timeout: float
    retries: int
    submit_retry_seconds: float
    max_connections: int
    max_sessions: int
    job_name_prefix: str
    poll_cache_seconds: float
    elastic: dict[str, Any] | None  # elastic.validate_elastic's, or None


def _str(raw: Mapping[str, Any], key: str, pattern: re.Pattern[str] | None, what: str) -> str:
    value = raw.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise SettingsError(key, f"must be a string ({what})")
    value = value.strip()
    if value and pattern is not None and not pattern.match(value):
        raise SettingsError(key, f"{value!r} is not a valid {what}")
    return value


def _int(raw: Mapping[str, Any], key: str, default: int, lo: int, hi: int) -> int:
    value = raw.get(key, default)
    if value in (None, ""):
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
        raise SettingsError(key, "must be a whole number")
    if not lo <= int(value) <= hi:
        raise SettingsError(key, f"must be between {lo} and {hi}")
    return int(value)


def _num(raw: Mapping[str, Any], key: str, default: float, lo: float, hi: float) -> float:
    value = raw.get(key, default)
    if value in (None, ""):
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SettingsError(key, "must be a number")
    if not lo <= float(value) <= hi:
        raise SettingsError(key, f"must be between {lo:g} and {hi:g}")
    return float(value)


def _list(raw: Mapping[str, Any], key: str) -> list[str]:
    value = raw.get(key) or []
    if isinstance(value, str):
        value = [line for line in value.splitlines() if line.strip()]
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise SettingsError(key, "must be a list of strings")
    return [v.strip() for v in value if v.strip()]


def _cluster_path(raw: Mapping[str, Any], key: str, what: str) -> str:
    """A path on the cluster: absolute, or relative to the cluster user's home; no '..'."""
    value = _str(raw, key, SAFE_PATH, f"{what} (no spaces or quotes)")
    if value and ".." in value.split("/"):
        raise SettingsError(
            key, f"{value!r}: give the {what} without '..' (absolute, or in the user's home)"
        )
    return value


def validate_settings(raw: Mapping[str, Any], *, strict: bool = False) -> SlurmSettings:
    """Check and normalise a Slurm backend's settings; SettingsError names what is wrong.

    `strict` (the admin API) also refuses keys this driver does not know.
    """
    if not isinstance(raw, Mapping):
        raise SettingsError("settings", "must be an object")
    if strict:
        unknown = sorted(set(raw) - _SETTING_KEYS - set(SECRET_FIELDS))
        if unknown:
            raise SettingsError(
                unknown[0], f"unknown setting; known: {', '.join(sorted(_SETTING_KEYS))}"
            )
        leaked = sorted(set(raw) & set(SECRET_FIELDS))
        if leaked:
            raise SettingsError(leaked[0], "is a secret: send it in `secrets`, not `settings`")
    transport = raw.get("transport") or "local"
    if transport not in TRANSPORTS:
        raise SettingsError(
            "transport", f"unknown transport {transport!r}; choose {' or '.join(TRANSPORTS)}"
        )
    host = _str(raw, "host", _HOST, "host name")
    port = _int(raw, "port", 22, 1, 65535)
    user = _str(raw, "user", _USER, "user name")
    if transport == "ssh":
        if not host:
            raise SettingsError("host", "the ssh transport needs the login node's host name")
        if not user:
            raise SettingsError("user", "the ssh transport needs the cluster user name")
    partition = _str(raw, "partition", _NAME_LIST, "partition name (letters, digits, _.-)")
    account = _str(raw, "account", _NAME, "account name (letters, digits, _.-)")
    qos = _str(raw, "qos", _NAME, "QOS name (letters, digits, _.-)")
    time_limit = _str(
        raw, "time_limit", _TIME, "Slurm time limit (minutes, MM:SS, HH:MM:SS or D-HH:MM:SS)"
    )
    directives = _list(raw, "extra_directives")
    for d in directives:
        if not _DIRECTIVE.match(d):
            raise SettingsError(
                "extra_directives",
                f"{d!r} is not a plain sbatch option (--name or --name=value, no spaces or quotes)",
            )
        option = d.split("=", 1)[0]
        if option in _RESERVED_DIRECTIVES:
            raise SettingsError(
                "extra_directives",
                f"{option} is set by the driver (use the matching setting instead)",
            )
        if option not in _EXTRA_DIRECTIVES:
            # sbatch takes any unambiguous prefix (--outp is --output): only full names of
            # options that shape placement, never output, identity, arrays or holds
            near = [o for o in sorted(_EXTRA_DIRECTIVES) if o.startswith(option)]
            hint = f" (write the full name: {', '.join(near)})" if near else ""
            raise SettingsError(
                "extra_directives",
                f"{option} is not an option the portal passes on{hint}; allowed: "
                + ", ".join(sorted(_EXTRA_DIRECTIVES)),
            )
    work_root = _cluster_path(raw, "work_root", "path of the runs' folder on the cluster")
    python = _str(raw, "python", SAFE_PATH, "path of a Python 3 interpreter")
    pythonpath = _str(raw, "pythonpath", SAFE_PATH, "path") or _str(
        raw, "agent_path", SAFE_PATH, "path"
    )
    modules = _list(raw, "modules")
    for m in modules:
        if not _MODULE.match(m):
            raise SettingsError("modules", f"{m!r} is not a module name (e.g. openfoam/2312)")
    env = raw.get("env") or {}
    if not isinstance(env, Mapping):
        raise SettingsError("env", "must be an object of NAME: value")
    for name, value in env.items():
        if not isinstance(name, str) or not _ENV_NAME.match(name):
            raise SettingsError("env", f"{name!r} is not an environment variable name")
        if not isinstance(value, str | int | float) or any(c in str(value) for c in "\0\n\r"):
            raise SettingsError("env", f"{name}: the value must be a one-line string")
    env_vars = {str(k): str(v) for k, v in env.items()}
    slurm_conf = _cluster_path(raw, "slurm_conf", "path of slurm.conf")
    capacity = raw.get("capacity") or "fixed"
    if capacity not in CAPACITY_MODES:
        raise SettingsError("capacity", "must be 'fixed' (cores/memory_gb below) or 'ask' (sinfo)")
    cores = _int(raw, "cores", 0, 0, 10_000_000)
    memory_gb = _num(raw, "memory_gb", 0.0, 0.0, 1e9)
    max_nodes = _int(raw, "max_nodes", 0, 0, 1_000_000)
    stage = raw.get("stage_case")
    if stage is not None and not isinstance(stage, bool):
        raise SettingsError("stage_case", "must be true or false")
    stage_case = (transport == "ssh") if stage is None else stage
    array = raw.get("array", True)
    if not isinstance(array, bool):
        raise SettingsError("array", "must be true or false")
    max_array_size = _int(raw, "max_array_size", 0, 0, 4_000_001)
    accounting = raw.get("accounting") or "auto"
    if accounting not in ACCOUNTING_MODES:
        raise SettingsError("accounting", f"must be one of {', '.join(ACCOUNTING_MODES)}")
    connect_timeout = _num(raw, "connect_timeout", 10.0, 0.5, 300.0)
    command_timeout = _num(raw, "command_timeout", 60.0, 1.0, 3600.0)
    retries = _int(raw, "retries", 5, 0, 20)
    submit_retry_seconds = _num(raw, "submit_retry_seconds", 60.0, 0.0, 3600.0)
    max_connections = _int(raw, "max_connections", 2, 1, 16)
    max_sessions = _int(raw, "max_sessions", 6, 1, 64)
    job_name_prefix = _str(raw, "job_name_prefix", _NAME, "job name prefix") or "wt"
    poll_cache_seconds = _num(raw, "poll_cache_seconds", 2.0, 0.0, 600.0)
    elastic = validate_elastic(raw["elastic"]) if raw.get("elastic") else None
    if elastic and partition and elastic["partition"] not in partition.split(","):
        raise SettingsError(
            "partition",
            f"the elastic partition {elastic['partition']!r} is not among the partitions runs "
            "go to: add it (a comma list is allowed)",
        )
    return SlurmSettings(
        transport=transport,
        host=host,
        port=port,
        user=user,
        partition=partition,
        account=account,
        qos=qos,
        time_limit=time_limit,
        extra_directives=directives,
        work_root=work_root,
        python=python,
        pythonpath=pythonpath,
        modules=modules,
        env=env_vars,
        slurm_conf=slurm_conf,
        capacity=capacity,
        cores=cores,
        memory_gb=memory_gb,
        max_nodes=max_nodes,
        stage_case=stage_case,
        array=array,
        max_array_size=max_array_size,
        accounting=accounting,
        connect_timeout=connect_timeout,
        command_timeout=command_timeout,
        retries=retries,
        submit_retry_seconds=submit_retry_seconds,
        max_connections=max_connections,
        max_sessions=max_sessions,
        job_name_prefix=job_name_prefix,
        poll_cache_seconds=poll_cache_seconds,
        elastic=elastic,
    )
