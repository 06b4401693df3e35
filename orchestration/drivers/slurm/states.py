"""What Slurm says about jobs: handles, job states, pending reasons, exit codes, and the
parsing of `squeue`, `sacct` and Slurm's time limits."""

from __future__ import annotations

import dataclasses
import os
import re

from orchestration.drivers.base import RunPhase, RunStatus

__all__ = [
    "BACKEND_ENDS",
    "COMPLETING_REASONS",
    "FINAL_STATES",
    "PENDING_STATES",
    "RUNNING_STATES",
    "SQUEUE_FORMAT",
    "JobRow",
    "explain_reason",
    "job_status",
    "parse_exit_code",
    "parse_handle",
    "parse_minutes",
    "parse_sacct",
    "parse_squeue",
]

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
COMPLETING_REASONS = {
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


def parse_exit_code(raw: str) -> int | None:
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
    """One job (or array task) as squeue or sacct lists it."""

    handle: str
    state: str
    reason: str = ""
    exit_code: int | None = None


# squeue -O: the fields parse_squeue reads, "|"-separated
SQUEUE_FORMAT = "JobArrayID:|,State:|,Reason:|,exit_code:|"


def parse_squeue(text: str) -> dict[str, JobRow]:
    """squeue's rows (SQUEUE_FORMAT) by handle."""
    rows = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) < 4 or not parts[0]:
            continue
        handle, state, reason, code = parts[:4]
        state = state.split()[0] if state else ""
        rows[handle] = JobRow(handle, state, reason, parse_exit_code(code))
    return rows


def parse_sacct(text: str, handle: str) -> JobRow | None:
    """The row of `handle` in sacct's parsable output (JobID,State,ExitCode), or None."""
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) >= 3 and parts[0] == handle:
            state = parts[1].split()[0] if parts[1] else ""
            return JobRow(handle, state, "", parse_exit_code(parts[2]))
    return None


def job_status(row: JobRow) -> RunStatus:
    """The run status a job's row means."""
    if row.state in PENDING_STATES:
        return RunStatus(phase=RunPhase.PENDING, reason=explain_reason(row.reason))
    if row.state in RUNNING_STATES:
        reason = "" if row.state == "RUNNING" else f"Slurm: {row.state} ({row.reason})"
        return RunStatus(phase=RunPhase.RUNNING, reason=reason, settling=row.state == "COMPLETING")
    if row.state in FINAL_STATES:
        return RunStatus(
            phase=RunPhase.EXITED,
            exit_code=row.exit_code,
            reason=_final_reason(row.state, row.exit_code),
        )
    return RunStatus(phase=RunPhase.UNKNOWN, reason=f"Slurm state {row.state!r}")


def parse_minutes(text: str) -> float | None:
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
