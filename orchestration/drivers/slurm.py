"""The Slurm driver: one batch job (or one job-array task) per run, the run agent inside it.

The driver submits with `sbatch` through a transport — the Slurm commands on this machine,
or over SSH on a login node — and reads states with `squeue` (jobs the controller still
holds) and `sacct` (finished jobs; `sacct -c` reads the job-completion log on clusters
without slurmdbd). Results never come back through here: the agent reports heartbeats,
telemetry, the archive and the final state to the portal over HTTP with its run token.

Handles are `"<jobid>"` for a single job and `"<jobid>_<taskid>"` for an array task.

Batch scripts are built only from validated settings and paths the driver made itself,
every word quoted with `shlex.quote`; run parameters never reach a shell (they travel in
run.json, which only the agent reads).
"""

from __future__ import annotations

import dataclasses
import getpass
import hashlib
import json
import math
import os
import posixpath
import re
import shlex
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orchestration
from orchestration.drivers.base import (
    Capabilities,
    DriverError,
    RunPhase,
    RunSpec,
    RunStatus,
    register,
)
from orchestration.transports.base import (
    CommandResult,
    FileSpec,
    Transport,
    backoff_delays,
)
from orchestration.transports.local import LocalTransport

__all__ = [
    "SECRET_FIELDS",
    "SettingsError",
    "SlurmDriver",
    "explain_reason",
    "parse_handle",
    "validate_settings",
]

REPO_ROOT = Path(orchestration.__file__).resolve().parent.parent

# --- settings ------------------------------------------------------------------------------

SECRET_FIELDS = ("private_key", "passphrase", "known_hosts")
TRANSPORTS = ("local", "ssh")
CAPACITY_MODES = ("fixed", "ask")
ACCOUNTING_MODES = ("auto", "sacct", "jobcomp", "none")

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
_NAME_LIST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*(,[A-Za-z0-9][A-Za-z0-9_.\-]*)*$")
_HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9\-.]*[A-Za-z0-9])?$|^\[?[0-9A-Fa-f:.]+\]?$")
_USER = re.compile(r"^[a-z_][a-z0-9_.\-]{0,31}$")
_PATH = re.compile(r"^[A-Za-z0-9_./+\-~@%=,]+$")
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
}


class SettingsError(DriverError):
    """A backend setting is invalid; `field` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


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
    value = _str(raw, key, _PATH, f"{what} (no spaces or quotes)")
    if value and ".." in value.split("/"):
        raise SettingsError(
            key, f"{value!r}: give the {what} without '..' (absolute, or in the user's home)"
        )
    return value


def validate_settings(raw: Mapping[str, Any], *, strict: bool = False) -> dict[str, Any]:
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
    out: dict[str, Any] = {}
    transport = raw.get("transport") or "local"
    if transport not in TRANSPORTS:
        raise SettingsError(
            "transport", f"unknown transport {transport!r}; choose {' or '.join(TRANSPORTS)}"
        )
    out["transport"] = transport
    out["host"] = _str(raw, "host", _HOST, "host name")
    out["port"] = _int(raw, "port", 22, 1, 65535)
    out["user"] = _str(raw, "user", _USER, "user name")
    if transport == "ssh":
        if not out["host"]:
            raise SettingsError("host", "the ssh transport needs the login node's host name")
        if not out["user"]:
            raise SettingsError("user", "the ssh transport needs the cluster user name")
    out["partition"] = _str(raw, "partition", _NAME_LIST, "partition name (letters, digits, _.-)")
    out["account"] = _str(raw, "account", _NAME, "account name (letters, digits, _.-)")
    out["qos"] = _str(raw, "qos", _NAME, "QOS name (letters, digits, _.-)")
    out["time_limit"] = _str(
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
    out["extra_directives"] = directives
    out["work_root"] = _cluster_path(raw, "work_root", "path of the runs' folder on the cluster")
    out["python"] = _str(raw, "python", _PATH, "path of a Python 3 interpreter")
    pythonpath = _str(raw, "pythonpath", _PATH, "path") or _str(raw, "agent_path", _PATH, "path")
    out["pythonpath"] = pythonpath
    modules = _list(raw, "modules")
    for m in modules:
        if not _MODULE.match(m):
            raise SettingsError("modules", f"{m!r} is not a module name (e.g. openfoam/2312)")
    out["modules"] = modules
    env = raw.get("env") or {}
    if not isinstance(env, Mapping):
        raise SettingsError("env", "must be an object of NAME: value")
    for name, value in env.items():
        if not isinstance(name, str) or not _ENV_NAME.match(name):
            raise SettingsError("env", f"{name!r} is not an environment variable name")
        if not isinstance(value, str | int | float) or any(c in str(value) for c in "\0\n\r"):
            raise SettingsError("env", f"{name}: the value must be a one-line string")
    out["env"] = {str(k): str(v) for k, v in env.items()}
    out["slurm_conf"] = _cluster_path(raw, "slurm_conf", "path of slurm.conf")
    capacity = raw.get("capacity") or "fixed"
    if capacity not in CAPACITY_MODES:
        raise SettingsError("capacity", "must be 'fixed' (cores/memory_gb below) or 'ask' (sinfo)")
    out["capacity"] = capacity
    out["cores"] = _int(raw, "cores", 0, 0, 10_000_000)
    out["memory_gb"] = _num(raw, "memory_gb", 0.0, 0.0, 1e9)
    out["max_nodes"] = _int(raw, "max_nodes", 0, 0, 1_000_000)
    stage = raw.get("stage_case")
    if stage is not None and not isinstance(stage, bool):
        raise SettingsError("stage_case", "must be true or false")
    out["stage_case"] = (transport == "ssh") if stage is None else stage
    array = raw.get("array", True)
    if not isinstance(array, bool):
        raise SettingsError("array", "must be true or false")
    out["array"] = array
    out["max_array_size"] = _int(raw, "max_array_size", 0, 0, 4_000_001)
    accounting = raw.get("accounting") or "auto"
    if accounting not in ACCOUNTING_MODES:
        raise SettingsError("accounting", f"must be one of {', '.join(ACCOUNTING_MODES)}")
    out["accounting"] = accounting
    out["connect_timeout"] = _num(raw, "connect_timeout", 10.0, 0.5, 300.0)
    out["command_timeout"] = _num(raw, "command_timeout", 60.0, 1.0, 3600.0)
    out["retries"] = _int(raw, "retries", 5, 0, 20)
    out["submit_retry_seconds"] = _num(raw, "submit_retry_seconds", 60.0, 0.0, 3600.0)
    out["max_connections"] = _int(raw, "max_connections", 2, 1, 16)
    out["max_sessions"] = _int(raw, "max_sessions", 6, 1, 64)
    out["job_name_prefix"] = _str(raw, "job_name_prefix", _NAME, "job name prefix") or "wt"
    out["poll_cache_seconds"] = _num(raw, "poll_cache_seconds", 2.0, 0.0, 600.0)
    return out


def _minutes(text: str) -> float | None:
    """A Slurm time (MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS) in minutes; None for
    no limit ('infinite', 'UNLIMITED', '0' or nothing)."""
    text = (text or "").strip()
    if not text or text.lower() in ("infinite", "unlimited", "0", "n/a"):
        return None
    days, _, rest = text.rpartition("-")
    try:
        parts = [int(p) for p in rest.split(":")]
        d = int(days) if days else 0
    except ValueError:
        return None
    if days:  # D-HH[:MM[:SS]]
        hours, minutes, seconds = (parts + [0, 0])[:3]
    elif len(parts) == 1:
        hours, minutes, seconds = 0, parts[0], 0
    elif len(parts) == 2:
        hours, minutes, seconds = 0, parts[0], parts[1]
    else:
        hours, minutes, seconds = parts[:3]
    return d * 1440 + hours * 60 + minutes + seconds / 60


# --- handles, states and reasons -----------------------------------------------------------

_HANDLE = re.compile(r"^(\d+)(?:_(\d+))?$")


def parse_handle(handle: str) -> tuple[int, int | None] | None:
    """(job id, array task id or None), or None when the handle is not a Slurm handle."""
    match = _HANDLE.match(str(handle or ""))
    if not match:
        return None
    return int(match.group(1)), (int(match.group(2)) if match.group(2) is not None else None)


PENDING_STATES = {
    "PENDING",
    "REQUEUED",
    "REQUEUE_HOLD",
    "REQUEUE_FED",
    "RESV_DEL_HOLD",
    "CONFIGURING",
    "POWER_UP_NODE",
}
RUNNING_STATES = {
    "RUNNING",
    "COMPLETING",
    "SUSPENDED",
    "STOPPED",
    "SIGNALING",
    "STAGE_OUT",
    "RESIZING",
}
FINAL_STATES = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
    "OUT_OF_MEMORY",
    "SPECIAL_EXIT",
    "REVOKED",
}
# Final states in which Slurm, not the run, ended the job: (explanation, worth a retry).
BACKEND_ENDS = {
    "TIMEOUT": ("time limit", False),
    "NODE_FAIL": ("node failure", True),
    "PREEMPTED": ("preempted by a higher-priority job", True),
    "BOOT_FAIL": ("node failed to boot", True),
    "DEADLINE": ("deadline passed", False),
    "OUT_OF_MEMORY": ("out of memory", False),
    "CANCELLED": ("cancelled with scancel", False),
}
# While a killed job completes, squeue shows COMPLETING and the reason tells why.
_COMPLETING_REASONS = {
    "TimeLimit": "TIMEOUT",
    "NodeDown": "NODE_FAIL",
    "NodeFail": "NODE_FAIL",
    "OutOfMemory": "OUT_OF_MEMORY",
    "DeadLine": "DEADLINE",
    "Preempted": "PREEMPTED",
}
_PENDING_REASONS = {
    "Resources": "waiting for free CPUs, memory or nodes",
    "Priority": "other jobs go first",
    "Dependency": "waiting for another job",
    "BeginTime": "start time not reached",
    "JobHeldUser": "held by the user",
    "JobHeldAdmin": "held by an administrator",
    "PartitionDown": "the partition is down",
    "PartitionInactive": "the partition is inactive",
    "PartitionNodeLimit": "more nodes than the partition allows",
    "PartitionTimeLimit": "longer time limit than the partition allows",
    "ReqNodeNotAvail": "the requested nodes are not available",
    "Reservation": "waiting for a reservation",
    "QOSMaxCpuPerUserLimit": "the QOS limit on CPUs per user is reached",
    "QOSMaxJobsPerUserLimit": "the QOS limit on running jobs per user is reached",
    "QOSMaxSubmitJobPerUserLimit": "the QOS limit on submitted jobs per user is reached",
    "QOSMaxNodePerUserLimit": "the QOS limit on nodes per user is reached",
    "QOSMaxMemoryPerUser": "the QOS limit on memory per user is reached",
    "QOSGrpCpuLimit": "the QOS's total CPU limit is reached",
    "QOSGrpNodeLimit": "the QOS's total node limit is reached",
    "QOSGrpJobsLimit": "the QOS's running-jobs limit is reached",
    "AssocGrpCpuLimit": "the account's CPU limit is reached",
    "AssocGrpJobsLimit": "the account's running-jobs limit is reached",
    "AssocGrpNodeLimit": "the account's node limit is reached",
    "AssocGrpMemLimit": "the account's memory limit is reached",
    "AssocMaxJobsLimit": "the account's per-user job limit is reached",
    "AssocGrpCPUMinutesLimit": "the account's CPU-minutes budget is spent",
    "MaxCpuPerAccount": "the account's CPU limit is reached",
    "NodeDown": "a node the job needs is down",
    "BadConstraints": "the constraints cannot be met",
    "InvalidAccount": "the account is invalid",
    "InvalidQOS": "the QOS is invalid",
    "None": "being scheduled",
}


def explain_reason(reason: str) -> str:
    """A Slurm pending reason with a short explanation: 'Resources (waiting for …)'."""
    reason = (reason or "").strip()
    code = reason.split(",", 1)[0].strip("() ")
    text = _PENDING_REASONS.get(code)
    if not reason:
        return "waiting"
    return f"{reason} ({text})" if text else reason


def _final_reason(state: str, exit_code: int | None) -> str:
    if state == "COMPLETED":
        return ""
    if state in BACKEND_ENDS:
        return f"Slurm: {state} ({BACKEND_ENDS[state][0]})"
    if state == "FAILED" and exit_code is not None:
        return f"Slurm: FAILED (exit code {exit_code})"
    return f"Slurm: {state}"


def _exit_code(raw: str) -> int | None:
    """squeue's exit_code is a wait status; sacct's ExitCode is 'code:signal'."""
    raw = (raw or "").strip()
    try:
        if ":" in raw:
            code, sig = (int(x) for x in raw.split(":", 1))
            return -sig if sig else code
        status = int(raw)
    except ValueError:
        return None
    return os.waitstatus_to_exitcode(status) if 0 <= status < 65536 else None


@dataclasses.dataclass(frozen=True)
class JobRow:
    handle: str
    state: str
    reason: str = ""
    exit_code: int | None = None


_SQUEUE_FORMAT = "JobArrayID:|,State:|,Reason:|,exit_code:|"
_TRANSIENT = (
    "Unable to contact slurm controller",
    "Socket timed out",
    "Connection refused",
    "Connection timed out",
    "Zero Bytes were transmitted",
    "Resource temporarily unavailable",
    "Transport endpoint is not connected",
    "slurm_persist_conn_open",
)

# Shared by every driver object of a process (the portal builds a new one per call).
_CACHE_LOCK = threading.Lock()
_SNAPSHOTS: dict[str, tuple[float, dict[str, JobRow]]] = {}
_CONFIG: dict[str, tuple[float, dict[str, str]]] = {}
_CAPACITY: dict[str, tuple[float, Capabilities]] = {}
_STAGED: set[str] = set()
_CASE_SIGNATURES: dict[tuple[str, float], str] = {}


def _is_transient(result: CommandResult) -> bool:
    text = result.stderr + result.stdout
    return any(marker in text for marker in _TRANSIENT)


# what sbatch says when it never reached the controller: nothing was submitted
_NOT_SUBMITTED = ("Unable to contact slurm controller (connect failure)", "Connection refused")


def _not_submitted(result: CommandResult) -> bool:
    text = result.stderr + result.stdout
    return any(marker in text for marker in _NOT_SUBMITTED)


def _case_signature(case_dir: str) -> str:
    """A digest of a case tree's names, sizes and mtimes (its staged copy is named by it)."""
    root = Path(case_dir)
    entries = []
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        entries.append(f"{path.relative_to(root)}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_mode}")
    return hashlib.sha256("\n".join(entries).encode()).hexdigest()[:20]


# --- the driver ----------------------------------------------------------------------------


@register("slurm")
class SlurmDriver:
    """Runs on a Slurm cluster, through local commands or SSH to a login node."""

    name = "slurm"

    def __init__(self, *, secrets: Mapping[str, Any] | None = None, **settings: Any) -> None:
        try:
            self.settings = validate_settings(settings)
        except SettingsError as exc:
            raise DriverError(f"invalid Slurm backend settings: {exc}") from exc
        self.secrets = dict(secrets or {})
        self._transport: Transport | None = None
        self._pending: dict[tuple[str, int], list[FileSpec]] = {}
        self._run_dirs: dict[tuple[str, int], str] = {}

    # -- transport ------------------------------------------------------------------------

    @property
    def transport(self) -> Transport:
        if self._transport is None:
            s = self.settings
            if s["transport"] == "ssh":
                from orchestration.transports.ssh import SSHTransport

                self._transport = SSHTransport(
                    host=s["host"],
                    port=s["port"],
                    user=s["user"],
                    private_key=str(self.secrets.get("private_key") or ""),
                    passphrase=self.secrets.get("passphrase") or None,
                    known_hosts=str(self.secrets.get("known_hosts") or ""),
                    connect_timeout=s["connect_timeout"],
                    command_timeout=s["command_timeout"],
                    retries=s["retries"],
                    max_connections=s["max_connections"],
                    max_sessions=s["max_sessions"],
                )
            else:
                self._transport = LocalTransport(command_timeout=s["command_timeout"])
        return self._transport

    def _slurm_env(self) -> dict[str, str]:
        conf = self.settings["slurm_conf"]
        return {"SLURM_CONF": conf} if conf else {}

    def _run(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        idempotent: bool = True,
        retries: int | None = None,
    ) -> CommandResult:
        """A Slurm command; while the controller is unreachable, idempotent ones are retried."""
        tries = self.settings["retries"] if retries is None else retries
        delays = backoff_delays(tries if idempotent else 0, base=0.5, cap=5)
        while True:
            result = self.transport.run(argv, input=input, env=self._slurm_env())
            if result.ok or not _is_transient(result) or not delays:
                return result
            time.sleep(delays.pop(0))

    @property
    def _cache_key(self) -> str:
        return f"{self.transport.key}|{self.settings['slurm_conf']}"

    # -- paths ----------------------------------------------------------------------------

    def _work_root(self) -> str:
        root = self.settings["work_root"]
        if self.settings["transport"] == "ssh" or root:
            home = self.transport.home() if self.transport.remote else os.path.expanduser("~")
            root = root or "windtunnel"
            if root.startswith("~"):
                root = home + root[1:]
            elif not root.startswith("/"):
                root = posixpath.join(home, root)
        return root.rstrip("/")

    def results_dir(self, spec: RunSpec) -> str | None:
        """With the local transport the run directory is on this machine's filesystem (shared
        with the compute nodes): the portal reads results there. Over SSH it cannot."""
        if self.settings["transport"] != "local":
            return None
        return posixpath.join(self._run_dir(spec), "case")

    def _run_dir(self, spec: RunSpec) -> str:
        return self._run_dir_of(spec.run_id, spec.attempt, spec.work_dir)

    def _run_dir_of(self, run_id: str, attempt: int, work_dir: str) -> str:
        key = (run_id, attempt)
        if key not in self._run_dirs:
            root = self._work_root()
            if root:
                path = posixpath.join(root, "runs", run_id, f"attempt-{attempt}")
            else:
                path = work_dir
                if not path.startswith("/"):
                    raise DriverError(f"work_dir {work_dir!r} is relative and no work_root is set")
            if not _PATH.match(path):
                raise DriverError(f"unsafe run directory {path!r}")
            self._run_dirs[key] = path
        return self._run_dirs[key]

    def startup_log(self, *, run_id: str, attempt: int, work_dir: str, lines: int = 12) -> str:
        """The last lines of a run's agent.log on the cluster ('' when there is none): why a
        job ended before its agent could report (no Python, no agent on the nodes, …)."""
        path = posixpath.join(self._run_dir_of(run_id, attempt, work_dir), "agent.log")
        try:
            if not self.transport.remote:
                with open(path, "rb") as fh:
                    fh.seek(0, os.SEEK_END)
                    fh.seek(max(0, fh.tell() - 8192))
                    text = fh.read().decode("utf-8", "replace")
            else:
                result = self.transport.run(["tail", "-n", str(lines), path], timeout=20)
                text = result.stdout if result.ok else ""
        except (OSError, DriverError):
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])

    def _python(self) -> str:
        if self.settings["python"]:
            return self.settings["python"]
        return sys.executable if self.settings["transport"] == "local" else "python3"

    def _pythonpath(self) -> str:
        if self.settings["pythonpath"]:
            return self.settings["pythonpath"]
        return str(REPO_ROOT) if self.settings["transport"] == "local" else ""

    # -- Driver ---------------------------------------------------------------------------

    def prepare(self, spec: RunSpec) -> None:
        """Validate the run's shape, stage its case (when needed) and queue its run.json."""
        self._check_shape(spec)
        run_dir = self._run_dir(spec)
        case_dir = spec.case_dir
        if self.settings["stage_case"]:
            case_dir = self._stage_case(spec.case_dir)
        data = json.loads(spec.to_json())
        data["work_dir"] = run_dir
        data["case_dir"] = case_dir
        body = json.dumps(data, indent=2).encode()
        self._pending[(spec.run_id, spec.attempt)] = [
            FileSpec(posixpath.join(run_dir, "run.json"), body, 0o600)
        ]

    def start(self, spec: RunSpec) -> str:
        return self.start_batch([spec])[0]

    def start_batch(self, specs: Sequence[RunSpec]) -> list[str]:
        """Submit runs: one job array per group of identical shape, split below MaxArraySize.

        Returns one handle per spec, in order. When a submission fails, the jobs already
        submitted by this call are cancelled and a DriverError is raised.
        """
        if not specs:
            return []
        for spec in specs:
            if (spec.run_id, spec.attempt) not in self._pending:
                self.prepare(spec)
        groups: dict[tuple[Any, ...], list[int]] = {}
        for i, spec in enumerate(specs):
            key = self._shape(spec) if self.settings["array"] else (i,)
            groups.setdefault(key, []).append(i)
        size = self._max_array_tasks()
        chunks = [
            indices[start : start + size]
            for indices in groups.values()
            for start in range(0, len(indices), size)
        ]
        files = [f for spec in specs for f in self._pending[(spec.run_id, spec.attempt)]]
        for part in chunks:
            if len(part) > 1:  # the array's output directory must exist before it starts
                logs = posixpath.join(self._common_dir([specs[i] for i in part]), "slurm-logs")
                files.append(FileSpec(posixpath.join(logs, ".keep"), b"", 0o600))
        self.transport.write_files(files)
        for spec in specs:
            self._pending.pop((spec.run_id, spec.attempt), None)

        handles: list[str] = [""] * len(specs)
        submitted: list[str] = []
        try:
            for part in chunks:
                job_id = self._submit([specs[i] for i in part])
                submitted.append(str(job_id))
                if len(part) == 1:
                    handles[part[0]] = str(job_id)
                else:
                    for task, i in enumerate(part):
                        handles[i] = f"{job_id}_{task}"
        except DriverError:
            for job in submitted:
                self._run(["scancel", job])
            raise
        return handles

    def poll(self, handle: str) -> RunStatus:
        if parse_handle(handle) is None:
            return RunStatus(phase=RunPhase.UNKNOWN, reason="not a Slurm handle")
        row = self._queue_row(handle, fresh=False)
        if row is None:
            row = self._accounting_row(handle)
        if row is None:
            return RunStatus(phase=RunPhase.UNKNOWN, reason="Slurm has no record of this job")
        return self._status(row)

    def ended_by_backend(self, handle: str) -> tuple[str, bool] | None:
        """Why Slurm itself ended (or is ending) this job: (message, worth a retry), or None.

        The portal asks this when an agent reports it was terminated without being told to
        stop, or when an agent went silent: a time limit fails the run with the reason, a
        node failure or preemption requeues it within the retry limit.
        """
        if parse_handle(handle) is None:
            return None
        row = self._queue_row(handle, fresh=True)
        state = row.state if row else ""
        if state not in FINAL_STATES:  # still completing (or already forgotten): ask accounting
            accounted = self._accounting_row(handle)
            if accounted is not None and accounted.state in FINAL_STATES:
                state = accounted.state
            elif row is not None and row.state == "COMPLETING":
                state = _COMPLETING_REASONS.get(row.reason, "")
        if state in BACKEND_ENDS:
            text, retry = BACKEND_ENDS[state]
            return f"Slurm: {state} ({text})", retry
        return None

    def cancel(self, handle: str, *, grace: float = 10.0) -> None:
        """Pending: scancel. Running: SIGTERM to the agent (the batch shell), scancel after
        `grace` s if the job has not ended by then."""
        if parse_handle(handle) is None:
            return
        row = self._queue_row(handle, fresh=True)
        if row is None or row.state in FINAL_STATES:
            return
        if row.state in PENDING_STATES:
            self._scancel([handle])
            return
        result = self._run(["scancel", "--batch", "--signal=TERM", handle])
        if not result.ok and "Invalid job id" not in result.stderr:
            self._scancel([handle])
            return
        deadline = time.monotonic() + max(0.0, grace)
        while time.monotonic() < deadline:
            time.sleep(min(0.5, max(0.05, grace / 10)))
            row = self._queue_row(handle, fresh=True)
            if row is None or row.state in FINAL_STATES:
                return
        self._scancel([handle])

    def collect(self, handle: str) -> None:
        """Nothing to release: Slurm frees the allocation; results came through the agent."""
        return None

    def capabilities(self) -> Capabilities:
        s = self.settings
        remote = s["transport"] == "ssh"
        if s["capacity"] == "fixed" and s["cores"] > 0:
            return Capabilities(
                kind="slurm",
                cores=s["cores"],
                memory_gb=s["memory_gb"] or float(s["cores"]),
                max_nodes=max(1, s["max_nodes"]),
                mpi=True,
                remote=remote,
            )
        return self._asked_capacity()

    # -- helpers: resources and scripts ---------------------------------------------------

    @staticmethod
    def _shape(spec: RunSpec) -> tuple[int, int, int]:
        nodes = max(1, spec.nodes)
        mem_mb = max(1, math.ceil(spec.memory_gb * 1024 / nodes))
        return (spec.processes, nodes, mem_mb)

    def _check_shape(self, spec: RunSpec) -> None:
        if spec.processes < 1 or spec.nodes < 1:
            raise DriverError("a run needs at least one process and one node")
        if spec.nodes > spec.processes:
            raise DriverError(
                f"the run asks for {spec.nodes} nodes but only {spec.processes} processes; "
                "Slurm needs at least one task per node"
            )
        s = self.settings
        if s["capacity"] == "fixed" and s["cores"] and spec.processes > s["cores"]:
            raise DriverError(f"the run needs {spec.processes} cores; the cluster has {s['cores']}")

    def _directives(self, spec: RunSpec, *, name: str, output: str, chdir: str) -> list[str]:
        s = self.settings
        processes, nodes, mem_mb = self._shape(spec)
        lines = [
            f"--job-name={name}",
            f"--ntasks={processes}",
            f"--nodes={nodes}",
            f"--mem={mem_mb}M",
            f"--output={output}",
            f"--chdir={chdir}",
            "--no-requeue",  # the portal requeues, as a new attempt (fenced)
            "--export=ALL",
        ]
        if s["time_limit"]:
            lines.append(f"--time={s['time_limit']}")
        for key in ("partition", "account", "qos"):
            if s[key]:
                lines.append(f"--{key}={s[key]}")
        lines.extend(s["extra_directives"])
        return lines

    def _common_dir(self, batch: Sequence[RunSpec]) -> str:
        run_dirs = [self._run_dir(spec) for spec in batch]
        return posixpath.commonpath(run_dirs) if len(run_dirs) > 1 else run_dirs[0]

    def _script(self, batch: Sequence[RunSpec]) -> str:
        """The batch script for one run or one array of same-shape runs."""
        s = self.settings
        run_dirs = [self._run_dir(spec) for spec in batch]
        common = self._common_dir(batch)
        if len(batch) == 1:
            spec = batch[0]
            name = f"{s['job_name_prefix']}-{spec.run_id[:8]}-{spec.attempt}"
            output = posixpath.join(run_dirs[0], "slurm-%j.out")
        else:
            name = f"{s['job_name_prefix']}-array"
            output = posixpath.join(common, "slurm-logs", "%A_%a.out")
        for path in (output, common):
            if not _PATH.match(path):
                raise DriverError(f"unsafe path {path!r}")
        directives = self._directives(batch[0], name=name, output=output, chdir=common)
        if len(batch) > 1:
            directives.append(f"--array=0-{len(batch) - 1}")
        q = shlex.quote
        lines = ["#!/bin/bash"]
        lines += [f"#SBATCH {d}" for d in directives]
        lines += [
            "# Windtunnel: starts the run agent, which reports to the portal over HTTP.",
            "set -o pipefail",
        ]
        for key, value in s["env"].items():
            lines.append(f"export {key}={q(value)}")
        if s["slurm_conf"]:
            lines.append(f"export SLURM_CONF={q(s['slurm_conf'])}")
        if self._pythonpath():
            lines.append(
                f'export PYTHONPATH={q(self._pythonpath())}"${{PYTHONPATH:+:$PYTHONPATH}}"'
            )
        lines += [
            "export PYTHONUNBUFFERED=1",
            'if [ "$EUID" = 0 ]; then',  # bash's own variables: no process to start
            "  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
            "fi",
        ]
        if s["modules"]:
            lines += [
                "if ! type module >/dev/null 2>&1; then",
                "  for f in /etc/profile.d/modules.sh /etc/profile.d/lmod.sh "
                "/usr/share/lmod/lmod/init/bash; do",
                '    if [ -r "$f" ]; then . "$f"; break; fi',
                "  done",
                "fi",
            ]
            lines += [f"module load {q(m)} || exit 97" for m in s["modules"]]
        if len(batch) == 1:
            lines.append(f"RUN_DIR={q(run_dirs[0])}")
        else:
            lines.append("RUN_DIRS=(")
            lines += [f"  {q(d)}" for d in run_dirs]
            lines.append(")")
            lines.append('RUN_DIR="${RUN_DIRS[$SLURM_ARRAY_TASK_ID]}"')
        lines += [
            'cd "$RUN_DIR" || exit 98',
            'exec >>"$RUN_DIR/agent.log" 2>&1',
            'echo "== slurm job ${SLURM_JOB_ID}${SLURM_ARRAY_TASK_ID:+ (array task '
            '$SLURM_ARRAY_JOB_ID"_"$SLURM_ARRAY_TASK_ID)} on ${SLURMD_NODENAME:-$HOSTNAME} =="',
            # exec: the agent is the batch shell, so `scancel --batch --signal=TERM` reaches it
            f"exec {q(self._python())} -m orchestration.agent run.json",
        ]
        return "\n".join(lines) + "\n"

    def _submit(self, batch: Sequence[RunSpec]) -> int:
        script = self._script(batch)
        # sbatch is not idempotent: it is tried again only while it could not reach the
        # controller at all (nothing was submitted), for up to submit_retry_seconds (a
        # slurmctld restart or fail-over), with backoff
        deadline = time.monotonic() + self.settings["submit_retry_seconds"]
        delays = iter(backoff_delays(8, base=0.5, cap=5))
        while True:
            result = self._run(["sbatch", "--parsable"], input=script.encode(), idempotent=False)
            if result.ok or not _not_submitted(result):
                break
            delay = next(delays, 5.0)
            if time.monotonic() + delay > deadline:
                break
            time.sleep(delay)
        if not result.ok:
            transient = _is_transient(result)
            raise DriverError(f"sbatch refused the job: {result.error_text()}", retryable=transient)
        text = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
        try:
            return int(text.split(";", 1)[0])
        except ValueError:
            raise DriverError(f"sbatch answered {text!r}, not a job id", retryable=True) from None

    def _max_array_tasks(self) -> int:
        configured = self.settings["max_array_size"]
        try:
            cluster = int(self._config().get("MaxArraySize", "1001"))
        except ValueError:
            cluster = 1001
        limit = min(configured, cluster) if configured else cluster
        return max(1, limit)

    def _config(self) -> dict[str, str]:
        key = self._cache_key
        with _CACHE_LOCK:
            cached = _CONFIG.get(key)
        if cached and time.monotonic() - cached[0] < 600:
            return cached[1]
        result = self._run(["scontrol", "show", "config"])
        if not result.ok:
            raise DriverError(
                f"scontrol show config failed: {result.error_text()}",
                retryable=_is_transient(result),
            )
        config = {}
        for line in result.stdout.splitlines():
            name, sep, value = line.partition("=")
            if sep:
                config[name.strip()] = value.strip()
        with _CACHE_LOCK:
            _CONFIG[key] = (time.monotonic(), config)
        return config

    def _stage_case(self, case_dir: str) -> str:
        """Copy the case to `<work_root>/cases/<signature>` once; return the cluster path."""
        if not os.path.isdir(case_dir):
            raise DriverError(f"case directory {case_dir} does not exist")
        mtime = os.stat(case_dir).st_mtime
        with _CACHE_LOCK:
            signature = _CASE_SIGNATURES.get((case_dir, mtime))
        if signature is None:
            signature = _case_signature(case_dir)
            with _CACHE_LOCK:
                _CASE_SIGNATURES[(case_dir, mtime)] = signature
        target = posixpath.join(self._work_root(), "cases", signature)
        key = f"{self._cache_key}|{target}"
        with _CACHE_LOCK:
            done = key in _STAGED
        if not done:
            self.transport.put_tree(case_dir, target)
            with _CACHE_LOCK:
                _STAGED.add(key)
        return target

    # -- helpers: states ------------------------------------------------------------------

    def _user(self) -> str:
        if self.settings["transport"] == "ssh":
            return self.settings["user"]
        return getpass.getuser()

    @staticmethod
    def _parse_squeue(text: str) -> dict[str, JobRow]:
        rows = {}
        for line in text.splitlines():
            parts = [p.strip() for p in line.split("|")]
            if len(parts) < 4 or not parts[0]:
                continue
            handle, state, reason, code = parts[:4]
            state = state.split()[0] if state else ""
            rows[handle] = JobRow(handle, state, reason, _exit_code(code))
        return rows

    def _snapshot(self) -> dict[str, JobRow]:
        """Every job of the cluster user the controller holds, cached for a moment."""
        key = self._cache_key
        ttl = self.settings["poll_cache_seconds"]
        with _CACHE_LOCK:
            cached = _SNAPSHOTS.get(key)
        if cached and time.monotonic() - cached[0] < ttl:
            return cached[1]
        taken = time.monotonic()
        result = self._run(
            ["squeue", "-h", "-t", "all", "-r", "-u", self._user(), "-O", _SQUEUE_FORMAT]
        )
        if not result.ok:
            raise DriverError(f"squeue failed: {result.error_text()}", retryable=True)
        rows = self._parse_squeue(result.stdout)
        with _CACHE_LOCK:
            _SNAPSHOTS[key] = (taken, rows)
        return rows

    def _queue_row(self, handle: str, *, fresh: bool) -> JobRow | None:
        if not fresh and self.settings["poll_cache_seconds"] > 0:
            row = self._snapshot().get(handle)
            if row is not None:
                return row
        result = self._run(["squeue", "-h", "-t", "all", "-r", "-j", handle, "-O", _SQUEUE_FORMAT])
        if not result.ok:
            if "Invalid job id" in result.stderr:
                return None
            raise DriverError(f"squeue failed: {result.error_text()}", retryable=True)
        return self._parse_squeue(result.stdout).get(handle)

    def _accounting_row(self, handle: str) -> JobRow | None:
        mode = self.settings["accounting"]
        if mode == "none":
            return None
        fields = ["-n", "-P", "-X", "-j", handle, "-o", "JobID,State,ExitCode"]
        if mode in ("auto", "sacct"):
            result = self._run(["sacct", *fields])
            if result.ok:
                return self._parse_sacct(result.stdout, handle)
            if mode == "sacct" or "accounting storage is disabled" not in result.error_text():
                if _is_transient(result):
                    raise DriverError(f"sacct failed: {result.error_text()}", retryable=True)
                return None
        if "_" in handle:
            return None  # the completion log cannot select array tasks (sacct -c)
        result = self._run(["sacct", "-c", "-n", "-P", "-j", handle, "-o", "JobID,State,ExitCode"])
        return self._parse_sacct(result.stdout, handle) if result.ok else None

    @staticmethod
    def _parse_sacct(text: str, handle: str) -> JobRow | None:
        for line in text.splitlines():
            parts = line.strip().split("|")
            if len(parts) >= 3 and parts[0] == handle:
                state = parts[1].split()[0] if parts[1] else ""
                return JobRow(handle, state, "", _exit_code(parts[2]))
        return None

    @staticmethod
    def _status(row: JobRow) -> RunStatus:
        if row.state in PENDING_STATES:
            return RunStatus(phase=RunPhase.PENDING, reason=explain_reason(row.reason))
        if row.state in RUNNING_STATES:
            reason = "" if row.state == "RUNNING" else f"Slurm: {row.state} ({row.reason})"
            return RunStatus(phase=RunPhase.RUNNING, reason=reason)
        if row.state in FINAL_STATES:
            return RunStatus(
                phase=RunPhase.EXITED,
                exit_code=row.exit_code,
                reason=_final_reason(row.state, row.exit_code),
            )
        return RunStatus(phase=RunPhase.UNKNOWN, reason=f"Slurm state {row.state!r}")

    def _scancel(self, handles: Sequence[str]) -> None:
        result = self._run(["scancel", *handles])
        if not result.ok and "Invalid job id" not in result.stderr:
            raise DriverError(
                f"scancel failed: {result.error_text()}", retryable=_is_transient(result)
            )

    def _asked_capacity(self) -> Capabilities:
        key = self._cache_key + "|" + self.settings["partition"]
        with _CACHE_LOCK:
            cached = _CAPACITY.get(key)
        if cached and time.monotonic() - cached[0] < 60:
            return cached[1]
        argv = ["sinfo", "-h", "-N", "-o", "%N|%c|%m"]
        if self.settings["partition"]:
            argv[1:1] = ["-p", self.settings["partition"]]
        result = self._run(argv)
        if not result.ok:
            raise DriverError(f"sinfo failed: {result.error_text()}", retryable=True)
        nodes: dict[str, tuple[int, int]] = {}
        for line in result.stdout.splitlines():
            parts = line.strip().split("|")
            if len(parts) == 3:
                try:
                    nodes[parts[0]] = (int(parts[1]), int(parts[2].rstrip("+")))
                except ValueError:
                    continue
        if not nodes:
            raise DriverError("sinfo lists no nodes for this partition")
        caps = Capabilities(
            kind="slurm",
            cores=sum(c for c, _ in nodes.values()),
            memory_gb=round(sum(m for _, m in nodes.values()) / 1024, 2),
            max_nodes=len(nodes),
            mpi=True,
            remote=self.settings["transport"] == "ssh",
        )
        with _CACHE_LOCK:
            _CAPACITY[key] = (time.monotonic(), caps)
        return caps

    # -- for the admin API's check action -------------------------------------------------

    def check(self) -> dict[str, Any]:
        """Connect, and report the cluster's capacity and health (raises DriverError).

        Asked by an admin who waits for the answer: one try, no backoff."""
        started = time.monotonic()
        sinfo = self._run(["sinfo", "-h", "-o", "%P|%a|%D|%T|%c|%m|%l"], retries=0)
        if not sinfo.ok:
            raise DriverError(f"sinfo failed: {sinfo.error_text()}", retryable=True)
        partitions = []
        for line in sinfo.stdout.splitlines():
            parts = line.strip().split("|")
            if len(parts) == 7:
                partitions.append(
                    {
                        "partition": parts[0],
                        "available": parts[1],
                        "nodes": parts[2],
                        "state": parts[3],
                        "cpus_per_node": parts[4],
                        "memory_mb_per_node": parts[5],
                        "time_limit": parts[6],
                    }
                )
        wanted = self.settings["partition"].split(",")[0] if self.settings["partition"] else ""
        if wanted and not any(p["partition"].rstrip("*") == wanted for p in partitions):
            raise DriverError(f"partition {wanted!r} does not exist on the cluster")
        chosen = [
            p
            for p in partitions
            if (p["partition"].rstrip("*") == wanted if wanted else p["partition"].endswith("*"))
        ]
        asked = _minutes(self.settings["time_limit"])
        for p in chosen[:1]:
            limit = _minutes(p["time_limit"])
            if asked and limit is not None and asked > limit:
                raise DriverError(
                    f"time_limit {self.settings['time_limit']} is longer than partition "
                    f"{p['partition'].rstrip('*')}'s limit {p['time_limit']}: Slurm would hold "
                    "every run (PartitionTimeLimit); ask for at most that"
                )
        caps = self._asked_capacity()
        return {
            "ok": True,
            "transport": self.settings["transport"],
            "partitions": partitions,
            "capacity": {"cores": caps.cores, "memory_gb": caps.memory_gb, "nodes": caps.max_nodes},
            "max_array_size": self._max_array_tasks(),
            "seconds": round(time.monotonic() - started, 3),
        }
