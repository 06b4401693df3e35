"""The chaos benchmark's sampler: which runs are solving, on this machine (step processes
mapped to their run and attempt) and on Slurm (RUNNING jobs mapped to runs), to catch a run
solving twice at once and a tenant using more cores than its quota."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from bench.chaos_services import resume_duplicate_jobid_drains
from bench.common import progress

STEP_NAMES = frozenset({"blockMesh", "icoFoam"})


@dataclass
class Sampler:
    """Every 0.2 s: the step processes on this machine mapped to (run, attempt); every 1 s,
    the RUNNING Slurm jobs mapped to runs through `handles`."""

    runs_dir: Path
    run_tenant: dict[str, int]
    quota: dict[int, int]
    slurm_conf: str
    handles: dict[str, tuple[str, int]] = field(default_factory=dict)
    doubles: dict[str, dict[str, Any]] = field(default_factory=dict)
    slurm_doubles: dict[str, dict[str, Any]] = field(default_factory=dict)
    overshoot: int = 0
    overshoot_at: list[dict[str, Any]] = field(default_factory=list)
    peak: dict[int, int] = field(default_factory=dict)
    samples: int = 0
    solving: set[str] = field(default_factory=set)  # runs with a step process, last sample
    stopping: threading.Event = field(default_factory=threading.Event)
    owners: dict[tuple[int, float], tuple[str, int] | None] = field(default_factory=dict)
    drains: list[str] = field(default_factory=list)  # nodes resumed (resume_duplicate_jobid_drains)

    def __post_init__(self) -> None:
        self.pattern = re.compile(re.escape(str(self.runs_dir)) + r"/([0-9a-f-]{36})/attempt-(\d+)")
        # two threads: a Slurm command hangs for seconds while slurmctld is down
        self.threads = [
            threading.Thread(target=self._loop, args=(0.2, self._sample_processes), daemon=True),
            threading.Thread(target=self._loop, args=(1.0, self._sample_jobs), daemon=True),
        ]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=30)

    def _loop(self, interval: float, sample: Callable[[], None]) -> None:
        while not self.stopping.wait(interval):
            try:
                sample()
            except Exception as exc:  # noqa: BLE001 -- a sampler must not die mid-benchmark
                progress(f"sampler: {exc!r}")

    def _owner(self, proc: psutil.Process) -> tuple[str, int] | None:
        key = (proc.pid, proc.info["create_time"])
        if key not in self.owners:
            owner = None
            with contextlib.suppress(psutil.Error):
                for ancestor in [proc, *proc.parents()]:
                    match = self.pattern.search(" ".join(ancestor.cmdline()))
                    if match:
                        owner = (match.group(1), int(match.group(2)))
                        break
            self.owners[key] = owner
        return self.owners[key]

    def _sample_processes(self) -> None:
        live: dict[str, set[tuple[int, int]]] = {}
        for proc in psutil.process_iter(["name", "create_time", "status"]):
            if proc.info["name"] not in STEP_NAMES or proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            owner = self._owner(proc)
            if owner is not None and owner[0] in self.run_tenant:
                live.setdefault(owner[0], set()).add((owner[1], proc.pid))
        self.samples += 1
        self.solving = set(live)
        now = time.time()
        for run, procs in live.items():
            if len(procs) > 1 and run not in self.doubles:
                self.doubles[run] = {"at": now, "attempts_pids": sorted(procs)}
                progress(f"DOUBLE: run {run} solving twice at once: (attempt, pid) {sorted(procs)}")
        per_tenant: dict[int, int] = {}
        for run in live:
            tenant = self.run_tenant[run]
            per_tenant[tenant] = per_tenant.get(tenant, 0) + 1
        for tenant, cores in per_tenant.items():
            self.peak[tenant] = max(self.peak.get(tenant, 0), cores)
            over = cores - self.quota[tenant]
            if over > 0:
                self.overshoot = max(self.overshoot, over)
                if len(self.overshoot_at) < 50:
                    runs = sorted(r for r in live if self.run_tenant[r] == tenant)
                    self.overshoot_at.append({"at": now, "tenant": tenant, "runs": runs})
                    progress(f"OVERSHOOT: tenant {tenant}: {cores} cores in use: {runs}")

    def _sample_jobs(self) -> None:
        done = subprocess.run(
            ["squeue", "-h", "-t", "R", "-o", "%i"],
            env={**os.environ, "SLURM_CONF": self.slurm_conf},
            capture_output=True,
            text=True,
            timeout=30,
        )
        if done.returncode != 0:
            return  # slurmctld is down
        self.drains += resume_duplicate_jobid_drains(self.slurm_conf)
        by_run: dict[str, set[tuple[int, str]]] = {}
        for job in done.stdout.split():
            if job in self.handles:
                run, attempt = self.handles[job]
                by_run.setdefault(run, set()).add((attempt, job))
        for run, jobs in by_run.items():
            if len({a for a, _ in jobs}) > 1 and run not in self.slurm_doubles:
                self.slurm_doubles[run] = {"at": time.time(), "attempts_jobs": sorted(jobs)}
                progress(f"DOUBLE (squeue): run {run} has two jobs RUNNING: {sorted(jobs)}")
