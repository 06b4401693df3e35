"""The reaper: runs whose agent went silent, whose start was lost, or whose job ended
before its agent said a word; requeued (up to the retry limit) or failed.

A started run whose heartbeat is older than WINDTUNNEL_HEARTBEAT_TIMEOUT is polled on its
backend. Queued there (a Slurm job waiting for nodes): it waits and its message says why.
Alive but silent: up to 3× the timeout. Otherwise whatever is left of it is killed and it is
requeued while retries remain. Runs admitted longer than WINDTUNNEL_DISPATCH_TIMEOUT ago
are dispatched again.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from compute.drivers import (
    DriverError,
    RunPhase,
    RunStatus,
    StartupLog,
    driver_for,
    run_work_dir,
    traits_of,
)
from core import jobs
from core.jobs import Job
from pools.selectors import pooled_run_ids
from runs.services import ended_by_backend, run_dispatch_later, run_kill, run_requeue_or_fail
from studies.choices import STARTED_STATES, EndReason, RunState
from studies.models import Run
from studies.state import studies_settle

log = logging.getLogger(__name__)


def runs_reap() -> dict[str, int]:
    """Find runs whose agent went silent or whose start was lost; requeue or fail them."""
    now = timezone.now()
    timeout = settings.WINDTUNNEL["HEARTBEAT_TIMEOUT"]
    dispatch_timeout = settings.WINDTUNNEL["DISPATCH_TIMEOUT"]
    stats = {"requeued": 0, "failed": 0, "redispatched": 0}
    candidates = Run.objects.select_related("backend").filter(state__in=STARTED_STATES)
    unreachable: set[int] = set()
    for run in candidates:
        # a run that waited in its backend's queue is timed from when its job started there
        # (marked "started" below), not from its dispatch: a Slurm job on a cloud node that
        # takes minutes to power up has not kept its agent silent meanwhile
        started = run.updated_at if run.phase == "started" else None
        last = run.heartbeat_at or started or run.provisioning_at or run.updated_at
        limit = timeout if run.heartbeat_at else max(timeout, dispatch_timeout)
        stale = not (last and last > now - timedelta(seconds=limit))
        # a run still waiting in its backend's own queue (a Slurm job) says why at every
        # pass, not only once it is late: one cached squeue a backend and pass
        waiting = (
            run.state == RunState.PROVISIONING
            and run.heartbeat_at is None
            and bool(run.handle)
            and traits_of(run.backend).queues_runs
        )
        if not (stale or waiting):
            continue
        phase, reason, driver = RunPhase.UNKNOWN, "", None
        status = RunStatus(phase=RunPhase.UNKNOWN)
        if run.backend_id in unreachable:
            continue  # one slow failure per backend and pass: do not starve the other tasks
        if run.handle:
            try:
                driver = driver_for(run.backend)
                status = driver.poll(run.handle)
            except DriverError as exc:
                unreachable.add(run.backend_id)
                log.warning("poll of run %s failed: %s", run.pk, exc)
                continue
            phase, reason = status.phase, status.reason
        if phase == RunPhase.PENDING:
            # queued on the backend (e.g. a Slurm job waiting for nodes): waiting, not lost
            message = queued_message(run, f"queued on {run.backend.name}: {reason or 'waiting'}")
            Run.objects.filter(pk=run.pk, attempt=run.attempt, state=RunState.PROVISIONING).exclude(
                phase="queued", message=message
            ).update(phase="queued", message=message)
            continue
        if waiting and phase == RunPhase.RUNNING and run.phase == "queued":
            # out of its backend's queue since the last look: its agent has from now on
            message = run.message.partition("\n")[2]  # the status line goes, as at start
            Run.objects.filter(
                pk=run.pk, attempt=run.attempt, state=RunState.PROVISIONING, phase="queued"
            ).update(phase="started", message=message, updated_at=now)
            continue
        if waiting and status.settling and last and last > now - timedelta(seconds=10 * limit):
            # its job ends or is requeued before its agent said a word (Slurm requeues a job
            # whose node failed at launch, then waits for another node): Slurm's verdict
            # comes, a lost agent is not yet the reason (up to 10 × the allowance)
            continue
        if waiting and phase == RunPhase.EXITED:
            # the job ended before its agent said a word: at once, with what its log says
            outcome = run_ended_before_its_agent(run=run, driver=driver, reason=reason)
            stats["failed" if outcome == RunState.FAILED else "requeued"] += bool(outcome)
            continue
        if not stale:
            continue  # started on its backend, and not late
        if not run.handle and run.state == RunState.PROVISIONING:
            # its backend never took it (a dispatch that hung, or a worker that stopped in
            # the middle): dispatched again, without using up a retry
            seconds = int((now - last).total_seconds()) if last else 0
            if run_dispatch_later(
                run=run,
                message=f"{run.backend.name} did not take the run within {seconds} s",
            ):
                stats["requeued"] += 1
            continue
        if phase == RunPhase.RUNNING and last and last > now - timedelta(seconds=3 * limit):
            continue  # alive on the backend: give it up to 3 × the timeout to report
        if run.handle:  # whatever the agent left behind must not run on beside a retry
            run_kill(run_id=run.pk, attempt=run.attempt, handle=run.handle)
        seconds = int((now - last).total_seconds()) if last else 0
        message = f"agent lost: no heartbeat for {seconds} s (backend says {phase})"
        if reason:
            message += f": {reason}"
        end, retry = EndReason.AGENT_LOST, True
        ended = ended_by_backend(driver, run.handle) if phase == RunPhase.EXITED else None
        if ended:  # e.g. "Slurm: TIMEOUT (time limit)" fails; NODE_FAIL / PREEMPTED retry
            message, retry = f"{ended[0]}; the agent sent no final report", ended[1]
            end = EndReason.TERMINATED
        # as seen: another pass, or the agent, may have acted while this one polled and
        # killed (a requeued run admitted again keeps its attempt until it starts)
        outcome = run_requeue_or_fail(
            run=run, reason=end, message=message, retry=retry, as_seen=True
        )
        if outcome == RunState.PENDING:
            stats["requeued"] += 1
        elif outcome == RunState.FAILED:
            stats["failed"] += 1
    lost = Run.objects.filter(
        state=RunState.ADMITTED, admitted_at__lt=now - timedelta(seconds=dispatch_timeout)
    )
    pooled = pooled_run_ids(runs_qs=lost)  # they wait for a pool worker, not a dispatch
    ids = [str(x) for x in lost.values_list("id", flat=True) if x not in pooled]
    if ids:
        jobs.send(Job.DISPATCH_RUNS, ids)
        stats["redispatched"] = len(ids)
    stats["settled"] = studies_settle()
    return stats


def queued_message(run: Run, status: str) -> str:
    """A run waiting in its backend's queue: the status on the first line, and below it what
    the message said before (how an earlier attempt ended), kept across the reaper's passes
    and dropped with the status line when the run starts (studies.transitions.run_report_running)."""
    earlier = run.message
    if run.phase == "queued":  # the first line is an older status
        earlier = earlier.partition("\n")[2]
    elif earlier and run.attempt > 1 and not earlier.startswith("attempt "):
        earlier = f"attempt {run.attempt - 1} ended: {earlier}"
    return f"{status}\n{earlier}"[:5000] if earlier else status[:5000]


def run_ended_before_its_agent(*, run: Run, driver: Any, reason: str) -> str:
    """A job that ended before its agent reported anything: Python or the agent missing on
    the nodes, a node that failed at start. Failed with the job's own words; retried where
    the backend says it ended the job itself for a reason worth a retry (a node failure), or
    ended it (e.g. Slurm cancelling a job it could not launch for a duplicate job id after a
    controller lost its state) before the agent wrote a line: nothing of the run ran then."""
    ended = ended_by_backend(driver, run.handle)
    text = ended[0] if ended else (reason or "it exited")
    message = f"the job on {run.backend.name} ended before its agent reported: {text}"
    tail = ""
    if isinstance(driver, StartupLog):
        work_dir = run_work_dir(run_id=run.pk, attempt=run.attempt)
        try:
            tail = driver.startup_log(run_id=str(run.pk), attempt=run.attempt, work_dir=work_dir)
        except DriverError:
            tail = ""
    message += f"\nlast lines of agent.log:\n{tail}" if tail else "\n(agent.log is empty)"
    return run_requeue_or_fail(
        run=run,
        reason=EndReason.TERMINATED if ended else EndReason.DISPATCH_FAILED,
        message=message,
        retry=bool(ended and (ended[1] or not tail)),
        as_seen=True,
    )
