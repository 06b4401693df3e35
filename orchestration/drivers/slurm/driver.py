"""The Slurm driver: one batch job (or one job-array task) per run, the run agent inside it.

The driver submits with `sbatch` through a transport — the Slurm commands on this machine,
or over SSH on a login node — and reads states with `squeue` (jobs the controller still
holds) and `sacct` (finished jobs; `sacct -c` reads the job-completion log on clusters
without slurmdbd). Results never come back through here: the agent reports heartbeats,
telemetry, the archive and the final state to the portal over HTTP with its run token.

Handles are `"<jobid>"` for a single job and `"<jobid>_<taskid>"` for an array task.

The commands and their caches are in `cluster`, the batch script in `script`, the settings
in `settings`, and what Slurm's answers mean in `states`.
"""

from __future__ import annotations

import json
import os
import posixpath
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import orchestration
from orchestration.drivers.base import (
    Capabilities,
    DriverBase,
    DriverContext,
    DriverError,
    RunPhase,
    RunSpec,
    RunStatus,
    SettingsError,
    register,
)
from orchestration.drivers.slurm.cluster import SlurmCluster
from orchestration.drivers.slurm.elastic import (
    dump_config,
    programs_config,
    prolog_script,
    render_fragment,
    wrapper_script,
)
from orchestration.drivers.slurm.elastic_cloud import check_elastic
from orchestration.drivers.slurm.elastic_nodes import elastic_nodes, elastic_reap
from orchestration.drivers.slurm.script import batch_script, common_dir, job_shape
from orchestration.drivers.slurm.settings import SAFE_PATH, SECRET_FIELDS, validate_settings
from orchestration.drivers.slurm.states import (
    BACKEND_ENDS,
    COMPLETING_REASONS,
    FINAL_STATES,
    PENDING_STATES,
    job_status,
    parse_handle,
)
from orchestration.transports.base import FileSpec, Transport, TransportError
from orchestration.transports.ssh import load_private_key, parse_known_hosts

__all__ = ["SlurmDriver"]

REPO_ROOT = Path(orchestration.__file__).resolve().parent.parent


@register("slurm")
class SlurmDriver(DriverBase):
    """Runs on a Slurm cluster, through local commands or SSH to a login node."""

    holds_nodes = True
    queues_runs = True
    keeps_attempts = True
    prerenders_case = True
    secret_fields: ClassVar[tuple[str, ...]] = SECRET_FIELDS

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any], context: DriverContext) -> SlurmDriver:
        secrets = context.secrets or settings.get("secrets") or {}
        return cls(**{**settings, "secrets": secrets})

    @classmethod
    def validate_settings(
        cls, settings: Mapping[str, Any], *, secrets: Mapping[str, Any]
    ) -> dict[str, Any]:
        """An admin's settings, strictly (unknown keys refused); the ssh transport needs a
        private key that loads and the login node's known_hosts line."""
        clean = validate_settings(settings, strict=True)
        if clean["transport"] == "ssh":
            if not secrets.get("private_key"):
                raise SettingsError(
                    "secrets.private_key",
                    "the ssh transport needs a private key (secrets.private_key, OpenSSH format)",
                )
            if not secrets.get("known_hosts"):
                raise SettingsError(
                    "secrets.known_hosts",
                    "the ssh transport needs the login node's host key as a known_hosts line "
                    "(secrets.known_hosts, e.g. from `ssh-keyscan -p PORT HOST` checked against "
                    "the node's fingerprint); the portal never trusts an unknown host key",
                )
            try:
                load_private_key(secrets["private_key"], secrets.get("passphrase"))
            except TransportError as exc:
                raise SettingsError("secrets.private_key", str(exc)) from exc
            try:
                parse_known_hosts(secrets["known_hosts"])
            except TransportError as exc:
                raise SettingsError("secrets.known_hosts", str(exc)) from exc
        if clean["elastic"]:  # the flavor, image, network and node count, asked of the cloud
            check_elastic(clean["elastic"])
        # keep what the admin wrote (minus defaults) so a later default change applies
        return {k: v for k, v in settings.items() if v not in (None, "")}

    @classmethod
    def capacity_from_backend(cls, settings: Mapping[str, Any]) -> bool:
        return settings.get("capacity") == "ask"

    def __init__(self, *, secrets: Mapping[str, Any] | None = None, **settings: Any) -> None:
        try:
            self.settings = validate_settings(settings)
        except SettingsError as exc:
            raise DriverError(f"invalid Slurm backend settings: {exc}") from exc
        self.secrets = dict(secrets or {})
        self.cluster = SlurmCluster(self.settings, self.secrets)
        self._pending: dict[tuple[str, int], list[FileSpec]] = {}
        self._run_dirs: dict[tuple[str, int], str] = {}

    # -- transport ------------------------------------------------------------------------

    @property
    def transport(self) -> Transport:
        """The way to the cluster (this machine's commands, or SSH to the login node)."""
        return self.cluster.transport

    # -- paths ----------------------------------------------------------------------------

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
            root = self.cluster.work_root()
            if root:
                path = posixpath.join(root, "runs", run_id, f"attempt-{attempt}")
            else:
                path = work_dir
                if not path.startswith("/"):
                    raise DriverError(f"work_dir {work_dir!r} is relative and no work_root is set")
            if not SAFE_PATH.match(path):
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
            case_dir = self.cluster.stage_case(spec.case_dir)
        data = json.loads(spec.to_json(sandbox=self.sandbox))
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
            key = job_shape(spec) if self.settings["array"] else (i,)
            groups.setdefault(key, []).append(i)
        size = self.cluster.max_array_tasks()
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
                job_id = self.cluster.submit(self._script([specs[i] for i in part]))
                submitted.append(str(job_id))
                if len(part) == 1:
                    handles[part[0]] = str(job_id)
                else:
                    for task, i in enumerate(part):
                        handles[i] = f"{job_id}_{task}"
        except DriverError:
            for job in submitted:
                self.cluster.run(["scancel", job])
            raise
        return handles

    def poll(self, handle: str) -> RunStatus:
        if parse_handle(handle) is None:
            return RunStatus(phase=RunPhase.UNKNOWN, reason="not a Slurm handle")
        row = self.cluster.queue_row(handle, fresh=False)
        if row is None:
            row = self.cluster.accounting_row(handle)
        if row is None:
            return RunStatus(phase=RunPhase.UNKNOWN, reason="Slurm has no record of this job")
        return job_status(row)

    def ended_by_backend(self, handle: str) -> tuple[str, bool] | None:
        """Why Slurm itself ended (or is ending) this job: (message, worth a retry), or None.

        The portal asks this when an agent reports it was terminated without being told to
        stop, or when an agent went silent: a time limit fails the run with the reason, a
        node failure or preemption requeues it within the retry limit.
        """
        if parse_handle(handle) is None:
            return None
        row = self.cluster.queue_row(handle, fresh=True)
        state = row.state if row else ""
        if state not in FINAL_STATES:  # still completing (or already forgotten): ask accounting
            accounted = self.cluster.accounting_row(handle)
            if accounted is not None and accounted.state in FINAL_STATES:
                state = accounted.state
            elif row is not None and row.state == "COMPLETING":
                state = COMPLETING_REASONS.get(row.reason, "")
        if state in BACKEND_ENDS:
            text, retry = BACKEND_ENDS[state]
            return f"Slurm: {state} ({text})", retry
        return None

    def cancel(self, handle: str, *, grace: float = 10.0) -> None:
        """Pending: scancel. Running: SIGTERM to the agent (the batch shell), scancel after
        `grace` s if the job has not ended by then."""
        if parse_handle(handle) is None:
            return
        row = self.cluster.queue_row(handle, fresh=True)
        if row is None or row.state in FINAL_STATES:
            return
        if row.state in PENDING_STATES:
            self.cluster.scancel([handle])
            return
        result = self.cluster.run(["scancel", "--batch", "--signal=TERM", handle])
        if not result.ok and "Invalid job id" not in result.stderr:
            self.cluster.scancel([handle])
            return
        deadline = time.monotonic() + max(0.0, grace)
        while time.monotonic() < deadline:
            time.sleep(min(0.5, max(0.05, grace / 10)))
            row = self.cluster.queue_row(handle, fresh=True)
            if row is None or row.state in FINAL_STATES:
                return
        self.cluster.scancel([handle])

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
        return self.cluster.asked_capacity()

    # -- helpers ----------------------------------------------------------------------------

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

    def _common_dir(self, batch: Sequence[RunSpec]) -> str:
        return common_dir([self._run_dir(spec) for spec in batch])

    def _script(self, batch: Sequence[RunSpec]) -> str:
        """The batch script for one run or one array of same-shape runs."""
        run_dirs = [self._run_dir(spec) for spec in batch]
        return batch_script(
            self.settings, batch, run_dirs, python=self._python(), pythonpath=self._pythonpath()
        )

    # -- the elastic partition (elastic.py, elastic_nodes.py) --------------------------------

    def reap_leaks(
        self,
        *,
        tracked: set[tuple[str, int]],
        builders: frozenset[str] | set[str] = frozenset(),
        workers: frozenset[str] | set[str] | None = None,
    ) -> list[str]:
        """Delete the elastic partition's servers whose node Slurm powered down, marked DOWN
        or does not know (runs hold jobs, not servers, and a Slurm backend has no pool
        workers: `tracked` and `workers` do not matter here)."""
        if not self.settings["elastic"]:
            return []
        return elastic_reap(self.cluster, self.settings["elastic"])

    def elastic_nodes(self) -> list[dict[str, Any]]:
        """Each elastic node: Slurm's state and reason beside its server's status and uptime."""
        if not self.settings["elastic"]:
            return []
        return elastic_nodes(self.cluster, self.settings["elastic"])

    def elastic_files(self) -> dict[str, str]:
        """What the admin installs on the controller: the slurm.conf lines (CPUs and memory
        from the flavor, asked of the cloud), the programs' config and their wrappers."""
        elastic = self.settings["elastic"]
        if not elastic:
            raise DriverError("this backend has no elastic partition (settings.elastic)")
        try:
            size = check_elastic(elastic)
        except SettingsError as exc:
            raise DriverError(str(exc)) from exc
        d = elastic["programs_dir"]
        config = {**programs_config(elastic), "log_file": f"{d}/power.log"}
        return {
            "slurm.conf": render_fragment(elastic, cpus=size["cpus"], memory_mb=size["memory_mb"]),
            f"{d}/elastic.json": dump_config(config),
            **{
                f"{d}/{a}": wrapper_script(elastic, a) for a in ("resume", "suspend", "resume-fail")
            },
            f"{d}/prolog": prolog_script(elastic),
        }

    # -- for the admin API's check action -------------------------------------------------

    def check(self) -> dict[str, Any]:
        """Connect, and report the cluster's capacity and health (raises DriverError).

        Asked by an admin who waits for the answer: one try, no backoff."""
        return self.cluster.check()
