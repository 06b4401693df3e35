"""A Slurm cluster as the driver reaches it: Slurm commands through a transport (this
machine's, or SSH to a login node), retried while the controller is unreachable, and their
answers cached per process (the portal builds a new driver object per call)."""

from __future__ import annotations

import getpass
import hashlib
import os
import posixpath
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestration.backoff import backoff_delays
from orchestration.drivers.base import Capabilities, DriverError
from orchestration.drivers.slurm.settings import SlurmSettings
from orchestration.drivers.slurm.states import (
    SQUEUE_FORMAT,
    JobRow,
    parse_minutes,
    parse_sacct,
    parse_squeue,
)
from orchestration.transports.base import CommandResult, Transport
from orchestration.transports.local import LocalTransport
from orchestration.transports.ssh import SSHTransport

__all__ = ["SlurmCluster"]

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


class SlurmCluster:
    """The Slurm commands of one backend (validated settings, and its secrets for SSH)."""

    def __init__(self, settings: SlurmSettings, secrets: Mapping[str, Any]) -> None:
        self.settings = settings
        self.secrets = secrets
        self._transport: Transport | None = None

    @property
    def transport(self) -> Transport:
        """The way to the cluster, opened on first use."""
        if self._transport is None:
            s = self.settings
            if s["transport"] == "ssh":
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

    def run(
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
    def cache_key(self) -> str:
        """Names this cluster (and cluster user) in the per-process caches."""
        return f"{self.transport.key}|{self.settings['slurm_conf']}"

    # -- paths ----------------------------------------------------------------------------

    def work_root(self) -> str:
        """The runs' folder on the cluster ('' when each run uses the work_dir it is given)."""
        root = self.settings["work_root"]
        if self.settings["transport"] == "ssh" or root:
            home = self.transport.home() if self.transport.remote else os.path.expanduser("~")
            root = root or "windtunnel"
            if root.startswith("~"):
                root = home + root[1:]
            elif not root.startswith("/"):
                root = posixpath.join(home, root)
        return root.rstrip("/")

    def stage_case(self, case_dir: str) -> str:
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
        target = posixpath.join(self.work_root(), "cases", signature)
        key = f"{self.cache_key}|{target}"
        with _CACHE_LOCK:
            done = key in _STAGED
        if not done:
            self.transport.put_tree(case_dir, target)
            with _CACHE_LOCK:
                _STAGED.add(key)
        return target

    # -- jobs -----------------------------------------------------------------------------

    def submit(self, script: str) -> int:
        """sbatch a batch script; the job id."""
        # sbatch is not idempotent: it is tried again only while it could not reach the
        # controller at all (nothing was submitted), for up to submit_retry_seconds (a
        # slurmctld restart or fail-over), with backoff
        deadline = time.monotonic() + self.settings["submit_retry_seconds"]
        delays = iter(backoff_delays(8, base=0.5, cap=5))
        while True:
            result = self.run(["sbatch", "--parsable"], input=script.encode(), idempotent=False)
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

    def user(self) -> str:
        """The cluster user whose jobs these are."""
        if self.settings["transport"] == "ssh":
            return self.settings["user"]
        return getpass.getuser()

    def snapshot(self) -> dict[str, JobRow]:
        """Every job of the cluster user the controller holds, cached for a moment."""
        key = self.cache_key
        ttl = self.settings["poll_cache_seconds"]
        with _CACHE_LOCK:
            cached = _SNAPSHOTS.get(key)
        if cached and time.monotonic() - cached[0] < ttl:
            return cached[1]
        taken = time.monotonic()
        result = self.run(
            ["squeue", "-h", "-t", "all", "-r", "-u", self.user(), "-O", SQUEUE_FORMAT]
        )
        if not result.ok:
            raise DriverError(f"squeue failed: {result.error_text()}", retryable=True)
        rows = parse_squeue(result.stdout)
        with _CACHE_LOCK:
            _SNAPSHOTS[key] = (taken, rows)
        return rows

    def queue_row(self, handle: str, *, fresh: bool) -> JobRow | None:
        """The job as squeue lists it (None once the controller forgot it); `fresh` skips
        the cached snapshot."""
        if not fresh and self.settings["poll_cache_seconds"] > 0:
            row = self.snapshot().get(handle)
            if row is not None:
                return row
        result = self.run(["squeue", "-h", "-t", "all", "-r", "-j", handle, "-O", SQUEUE_FORMAT])
        if not result.ok:
            if "Invalid job id" in result.stderr:
                return None
            raise DriverError(f"squeue failed: {result.error_text()}", retryable=True)
        return parse_squeue(result.stdout).get(handle)

    def accounting_row(self, handle: str) -> JobRow | None:
        """The finished job as accounting (sacct, or the completion log) recorded it, or None."""
        mode = self.settings["accounting"]
        if mode == "none":
            return None
        fields = ["-n", "-P", "-X", "-j", handle, "-o", "JobID,State,ExitCode"]
        if mode in ("auto", "sacct"):
            result = self.run(["sacct", *fields])
            if result.ok:
                return parse_sacct(result.stdout, handle)
            if mode == "sacct" or "accounting storage is disabled" not in result.error_text():
                if _is_transient(result):
                    raise DriverError(f"sacct failed: {result.error_text()}", retryable=True)
                return None
        if "_" in handle:
            return None  # the completion log cannot select array tasks (sacct -c)
        result = self.run(["sacct", "-c", "-n", "-P", "-j", handle, "-o", "JobID,State,ExitCode"])
        return parse_sacct(result.stdout, handle) if result.ok else None

    def scancel(self, handles: Sequence[str]) -> None:
        """Cancel jobs; ones the controller no longer knows are already gone."""
        result = self.run(["scancel", *handles])
        if not result.ok and "Invalid job id" not in result.stderr:
            raise DriverError(
                f"scancel failed: {result.error_text()}", retryable=_is_transient(result)
            )

    # -- the cluster ----------------------------------------------------------------------

    def max_array_tasks(self) -> int:
        """How many tasks one job array may have: the setting, within MaxArraySize."""
        configured = self.settings["max_array_size"]
        try:
            cluster = int(self.config().get("MaxArraySize", "1001"))
        except ValueError:
            cluster = 1001
        limit = min(configured, cluster) if configured else cluster
        return max(1, limit)

    def config(self) -> dict[str, str]:
        """`scontrol show config` as a dict, cached for ten minutes."""
        key = self.cache_key
        with _CACHE_LOCK:
            cached = _CONFIG.get(key)
        if cached and time.monotonic() - cached[0] < 600:
            return cached[1]
        result = self.run(["scontrol", "show", "config"])
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

    def asked_capacity(self) -> Capabilities:
        """The partition's cores, memory and nodes as sinfo lists them, cached for a minute."""
        key = self.cache_key + "|" + self.settings["partition"]
        with _CACHE_LOCK:
            cached = _CAPACITY.get(key)
        if cached and time.monotonic() - cached[0] < 60:
            return cached[1]
        argv = ["sinfo", "-h", "-N", "-o", "%N|%c|%m"]
        if self.settings["partition"]:
            argv[1:1] = ["-p", self.settings["partition"]]
        result = self.run(argv)
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
        sinfo = self.run(["sinfo", "-h", "-o", "%P|%a|%D|%T|%c|%m|%l"], retries=0)
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
        asked = parse_minutes(self.settings["time_limit"])
        for p in chosen[:1]:
            limit = parse_minutes(p["time_limit"])
            if asked and limit is not None and asked > limit:
                raise DriverError(
                    f"time_limit {self.settings['time_limit']} is longer than partition "
                    f"{p['partition'].rstrip('*')}'s limit {p['time_limit']}: Slurm would hold "
                    "every run (PartitionTimeLimit); ask for at most that"
                )
        caps = self.asked_capacity()
        return {
            "ok": True,
            "transport": self.settings["transport"],
            "partitions": partitions,
            "capacity": {"cores": caps.cores, "memory_gb": caps.memory_gb, "nodes": caps.max_nodes},
            "max_array_size": self.max_array_tasks(),
            "seconds": round(time.monotonic() - started, 3),
        }
