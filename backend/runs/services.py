"""A run's life after its start: heartbeats, its end as the agent or a policy reports it,
retries, and what its backend holds (kill, release).

The decisions live here (a retry left? did the backend end the job itself?); the state
changes they lead to are studies.transitions', each fenced and published.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from catalog.models import Backend
from compute.drivers import DriverError, EndExplainer, driver_for, kinds, traits_of
from core import jobs
from core.exceptions import ApplicationError, RunEnded, StaleAttempt
from core.jobs import Job
from orchestration.backoff import backoff_delay
from studies import transitions
from studies.choices import STARTED_STATES, TERMINAL_STATES, EndReason, RunState
from studies.continuation import retry_base
from studies.events import publish_runs_changed
from studies.models import Run
from telemetry.run_results import results_compute

log = logging.getLogger(__name__)
SIGFPE_EXIT_CODES = (136, -8)  # 128 + SIGFPE from a shell/mpirun, or -SIGFPE from Popen


# --- retries -----------------------------------------------------------------------------


def retries_left(run: Run) -> bool:
    """Whether another attempt is due: attempts its backend never took do not count, nor
    those before its latest continuation (studies.continuation)."""
    used = run.attempt - run.dispatch_failures - retry_base(run)
    return used <= settings.WINDTUNNEL["MAX_RETRIES"]


def run_requeue_or_fail(
    *, run: Run, reason: str, message: str, retry: bool = True, as_seen: bool = False
) -> str:
    """End this attempt: back to the queue while retries remain, else failed. The outcome
    (pending | failed), or "" when the attempt had ended already (as_seen: or the run changed
    since `run` was read: studies.transitions.run_requeue)."""
    if retry and retries_left(run):
        done = transitions.run_requeue(run=run, message=message, as_seen=as_seen)
        outcome = RunState.PENDING
    else:
        done = transitions.run_fail(run=run, reason=reason, message=message, as_seen=as_seen)
        outcome = RunState.FAILED
    if not done:
        return ""
    log.info("run %s attempt %s → %s: %s", run.pk, run.attempt, outcome, message)
    return outcome


def run_dispatch_later(*, run: Run, message: str) -> str:
    """Its backend could not take the run (unreachable, restarting): back to the queue until
    a later time, with backoff (5 s doubling to 60 s), without using up a retry: the run
    never started. Failed after WINDTUNNEL_DISPATCH_RETRIES such tries."""
    tries = run.dispatch_failures + 1
    if tries > settings.WINDTUNNEL["DISPATCH_RETRIES"]:
        return run_requeue_or_fail(
            run=run,
            reason=EndReason.DISPATCH_FAILED,
            message=f"{message}\n(tried {tries} times; giving up)",
            retry=False,
        )
    delay = backoff_delay(tries, first=5.0, cap=60.0)
    if not transitions.run_dispatch_later(run=run, message=message, tries=tries, delay=delay):
        return ""
    log.info("run %s: backend could not take it (try %s): %s", run.pk, tries, message)
    return RunState.PENDING


# --- what the backend holds --------------------------------------------------------------


def run_kill(*, run_id: Any, attempt: int, handle: str) -> None:
    """Stop whatever is left of an attempt on its backend."""
    run = Run.objects.select_related("backend").filter(pk=run_id).first()
    if run is None or not handle:
        return
    try:
        driver_for(run.backend).cancel(handle, grace=10.0)
    except DriverError as exc:
        log.warning("cancel of run %s attempt %s failed: %s", run_id, attempt, exc)


def run_release(*, run_id: Any, attempt: int, handle: str) -> None:
    """Free what the backend holds for an ended attempt (delete its server or stack)."""
    run = Run.objects.select_related("backend").filter(pk=run_id).first()
    if run is None or not handle:
        return
    try:
        driver_for(run.backend).collect(handle)
    except DriverError as exc:  # the leak reaper deletes it later
        log.warning("release of run %s attempt %s failed: %s", run_id, attempt, exc)


def ended_by_backend(driver: Any, handle: str) -> tuple[str, bool] | None:
    """Did the backend itself end this job (e.g. a Slurm time limit)? (message, retry)."""
    if not isinstance(driver, EndExplainer) or not handle:
        return None
    try:
        return driver.ended_by_backend(handle)
    except DriverError as exc:
        log.warning("cannot ask the backend why %s ended: %s", handle, exc)
        return None


def backend_terminated(*, run: Run, attempt: int) -> tuple[str, bool] | None:
    """A run ended badly though the portal asked no stop: did the backend end it, and why?

    Slurm signals every process of a job at a time limit, so the agent reports either
    `terminated` or its solver's death by SIGTERM; only the backend knows it was TIMEOUT.
    """
    row = (
        Run.objects.select_related("backend")
        .filter(pk=run.pk, attempt=attempt, stop_requested=False)
        .exclude(handle="")
        .first()
    )
    if row is None:
        return None
    try:
        driver = driver_for(row.backend)
    except DriverError:
        return None
    return ended_by_backend(driver, row.handle)


# --- signs of life -----------------------------------------------------------------------


def run_heartbeat(
    *, run: Run, attempt: int, phase: str = "", resources: dict[str, Any] | None = None
) -> bool:
    """Record a sign of life; answer whether the agent should stop."""
    stop = run_heartbeat_fenced(
        run_id=run.pk, attempt=attempt, token_hash=None, phase=phase, resources=resources
    )
    if stop is not None:
        return stop
    current = Run.objects.filter(pk=run.pk).values_list("state", "attempt", "results_at").first()
    if current and current[1] == attempt and current[0] in TERMINAL_STATES:
        if current[2] is not None:  # its agent's final report is in: nothing more comes
            raise RunEnded(current[0])
        return True  # ended by the portal (cancel, policy): stop, but keep what comes in
    raise StaleAttempt()


def run_heartbeat_fenced(
    *,
    run_id: Any,
    attempt: int,
    token_hash: str | None,
    phase: str = "",
    resources: dict[str, Any] | None = None,
) -> bool | None:
    """The sign of life in one statement, fenced by attempt and started state (and by the
    token's hash when given): whether the agent should stop, or None when the fence held
    (the caller tells apart why)."""
    resources = resources or {}
    fields: dict[str, Any] = {"heartbeat_at": timezone.now()}
    if phase:
        fields["phase"] = phase[:20]
    if isinstance(resources.get("cpu_percent"), int | float):
        fields["cpu_percent"] = float(resources["cpu_percent"])
    if isinstance(resources.get("rss_bytes"), int | float):
        fields["rss_bytes"] = int(resources["rss_bytes"])
    disk = resources.get("disk_bytes")
    if isinstance(disk, int) and not isinstance(disk, bool):  # the tenant's storage counts it
        fields["disk_bytes"] = disk
    sets = ", ".join(f"{name} = %s" for name in fields)
    where = "id = %s AND attempt = %s AND state IN (%s, %s)"
    params: list[Any] = [str(run_id), attempt, *STARTED_STATES]
    if token_hash is not None:
        where += " AND token_hash = %s"
        params.append(token_hash)
    with connection.cursor() as cur:
        cur.execute(
            f"UPDATE {Run._meta.db_table} SET {sets} WHERE {where} RETURNING stop_requested",
            [*fields.values(), *params],
        )
        row = cur.fetchone()
    if row is None:
        return None
    if phase == "archiving":  # the steps are over: local cores go back to the queue now
        run_release_cores(run_id=run_id, attempt=attempt)
    elif phase == "finishing":  # the last step ends within moments: its cores go on now
        run_release_cores(run_id=run_id, attempt=attempt, backend_kinds=hand_over_kinds())
    return bool(row[0])


def early_release_kinds() -> list[str]:
    """Backend kinds whose runs give their cores back when the solver exits (their trait)."""
    return [k for k in kinds() if traits_of(k).releases_early]


def hand_over_kinds() -> list[str]:
    """Backend kinds whose runs hand their cores to the next run shortly before their last
    step ends, that run waiting on the host for the step to be over (trait hands_over)."""
    return [k for k in kinds() if traits_of(k).hands_over]


def run_release_cores(*, run_id: Any, attempt: int, backend_kinds: list[str] | None = None) -> bool:
    """The run's solver has exited and the agent only archives results (or, with `backend_kinds`
    the backends that hand cores over, its last step is about to end): on backends that run
    on the portal's own cores (trait releases_early), those cores go back to the queue now
    rather than when the final report comes in. True when this call released them."""
    table, backends = Run._meta.db_table, Backend._meta.db_table
    with connection.cursor() as cur:
        cur.execute(
            f"UPDATE {table} r SET released_at = now() FROM {backends} b WHERE r.id = %s"
            " AND r.attempt = %s AND r.state = %s AND r.released_at IS NULL"
            " AND b.id = r.backend_id AND b.kind = ANY(%s) RETURNING r.tenant_id",
            [
                str(run_id),
                attempt,
                RunState.RUNNING,
                early_release_kinds() if backend_kinds is None else backend_kinds,
            ],
        )
        row = cur.fetchone()
    if row is None:
        return False
    jobs.enqueue(Job.SCHEDULE_TENANT, row[0])
    return True


# --- the end -----------------------------------------------------------------------------


def run_report_state(
    *,
    run: Run,
    attempt: int,
    state: str,
    exit_code: int | None = None,
    reason: str = "",
    message: str = "",
    solver_converged: bool = False,
    iterations: int | None = None,
    last_time: float | None = None,
) -> bool:
    """Apply a state the agent reports: `running` (a repeat is fine), or its final state,
    taken once (run_report_end).

    `iterations` and `last_time` are the solver's own count (exact even where the agent had
    to thin out points); without them they are read from the stored residuals."""
    if state == RunState.RUNNING:
        stop = transitions.run_report_running(run_id=run.pk, attempt=attempt, token_hash=None)
        if stop is not None:
            return stop
        # a repeated report is fine; anything else is over
        current_row = (
            Run.objects.filter(pk=run.pk).values_list("state", "attempt", "stop_requested").first()
        )
        if current_row is None or current_row[:2] != (RunState.RUNNING, attempt):
            raise StaleAttempt()
        return bool(current_row[2])
    if state not in TERMINAL_STATES:
        raise ApplicationError(
            f"state must be running, completed, failed or cancelled; got {state!r}", field="state"
        )
    run_report_end(
        run=run,
        attempt=attempt,
        state=state,
        backend_end=run_backend_end(run=run, attempt=attempt, state=state),
        exit_code=exit_code,
        reason=reason,
        message=message,
        solver_converged=solver_converged,
        iterations=iterations,
        last_time=last_time,
    )
    return False


def run_backend_end(*, run: Run, attempt: int, state: str) -> tuple[str, bool] | None:
    """For a final report of `state`: did the backend itself end the attempt, unasked (a
    Slurm time limit)? (message, retry). Asked before run_report_end takes its locks (it may
    ask the backend over the network)."""
    if state in (RunState.CANCELLED, RunState.FAILED):  # killed by the backend, unasked?
        return backend_terminated(run=run, attempt=attempt)
    return None


def run_report_end(
    *,
    run: Run,
    attempt: int,
    state: str,
    backend_end: tuple[str, bool] | None,
    exit_code: int | None = None,
    reason: str = "",
    message: str = "",
    solver_converged: bool = False,
    iterations: int | None = None,
    last_time: float | None = None,
    disk_bytes: int | None = None,
    peak_memory_bytes: int | None = None,
    cpu_seconds: float | None = None,
    writes: list[str] | None = None,
) -> None:
    """Apply the final state the agent reports (`backend_end`: run_backend_end's answer), in
    one transaction, which may be the caller's. Once it is in, the attempt takes no more
    reports: a repeat is refused (RunEnded, 409) and changes nothing. `disk_bytes`: the size
    the attempt's directory ended at, kept with the end (the tenant's storage counts it);
    `peak_memory_bytes` and `cpu_seconds`: what the attempt's steps used, kept as the run's
    figures (a repeat of the report cannot change them); `writes`: the times the attempt's
    case wrote completely (what a continuation may start from)."""
    figures: dict[str, Any] = {
        k: v
        for k, v in (("peak_memory_bytes", peak_memory_bytes), ("cpu_seconds", cpu_seconds))
        if v is not None
    }
    if writes is not None:
        figures["writes"] = {"attempt": attempt, "times": writes}
    with transaction.atomic():
        current = (
            Run.objects.select_for_update(of=("self",))
            .select_related("study", "backend")
            .get(pk=run.pk)
        )
        if current.attempt != attempt:
            raise StaleAttempt()
        if current.state in TERMINAL_STATES and current.results_at is not None:
            raise RunEnded(current.state)  # its final report is in already
        if current.state in TERMINAL_STATES:
            # ended by the portal (cancel, policy): keep the state, but the agent's final
            # data is in now, so objectives and trust are brought up to date
            results_compute(
                run=current,
                solver_converged=solver_converged
                or current.trust_detail.get("solver_converged", False),
                iterations=iterations,
                last_time=last_time,
            )
            current.results_at = timezone.now()  # the agent is done with its files
            ended = [*transitions.RESULT_FIELDS, "results_at", "updated_at"]
            if disk_bytes is not None:
                current.disk_bytes = disk_bytes
                ended.append("disk_bytes")
            for name, value in figures.items():
                setattr(current, name, value)
                ended.append(name)
            current.save(update_fields=ended)
            publish_runs_changed([current.pk])
            return
        if current.state not in STARTED_STATES:
            raise StaleAttempt()
        if backend_end is not None:  # the backend killed it (e.g. a Slurm time limit)
            text, retry = backend_end
            if retry and retries_left(current):
                run_requeue_or_fail(run=current, reason=EndReason.TERMINATED, message=text)
                return
            state, reason = RunState.FAILED, EndReason.TERMINATED
            message = f"{text}\n{message}".strip()
        if state == RunState.FAILED and exit_code in SIGFPE_EXIT_CODES:
            # OpenFOAM traps floating point exceptions: the solution blew up
            reason = EndReason.DIVERGED
            message = (
                f"the solver stopped on a floating point exception (diverged)\n{message}".strip()
            )
        end_reason: str
        if state == RunState.COMPLETED:
            end_reason = EndReason.SUCCESS
        elif state == RunState.CANCELLED:
            end_reason = reason if reason in EndReason.values else EndReason.TERMINATED
        else:
            end_reason = reason if reason in EndReason.values and reason else EndReason.EXIT_CODE
        current.state, current.end_reason = state, end_reason  # what the trust flag reads
        results_compute(
            run=current,
            solver_converged=solver_converged,
            iterations=iterations,
            last_time=last_time,
        )
        transitions.run_end(
            run=current,
            state=state,
            end_reason=end_reason,
            message=message,
            exit_code=exit_code,
            results=_results_of(current),
            disk_bytes=disk_bytes,
            figures=figures,
        )


def run_end_on_refused_report(*, run_id: Any, attempt: int, token_hash: str, problem: str) -> bool:
    """The agent's final report was refused (a 400: `problem`) after the run's cores had gone
    back early (its `archiving` heartbeat): the attempt ends failed and whatever is left of
    it is killed at once, rather than running on while its cores count as free. Fenced by
    the attempt and its token's hash; True when this call ended it."""
    run = (
        Run.objects.select_related("backend")
        .filter(
            pk=run_id,
            attempt=attempt,
            token_hash=token_hash,
            state=RunState.RUNNING,
            released_at__isnull=False,
        )
        .first()
    )
    if run is None:
        return False
    message = f"the agent's final report was refused: {problem}"
    if not run_requeue_or_fail(run=run, reason=EndReason.EXIT_CODE, message=message, retry=False):
        return False
    if run.handle:
        jobs.enqueue(Job.KILL_RUN, str(run.pk), run.attempt, run.handle)
    return True


def run_stop_by_policy(*, run: Run, attempt: int, outcome: str, detail: str) -> bool:
    """A convergence policy ended the run: its resources return to the queue at once."""
    with transaction.atomic():
        current = (
            Run.objects.select_for_update(of=("self",))
            .select_related("study", "backend")
            .filter(pk=run.pk, attempt=attempt)
            .first()
        )
        if current is None or current.state not in STARTED_STATES:
            return False
        # what the trust flag reads: the state and reason the policy's end gives the run
        current.state = RunState.COMPLETED if outcome == "converged" else RunState.FAILED
        current.end_reason = {"converged": EndReason.CONVERGED, "diverged": EndReason.DIVERGED}.get(
            outcome, EndReason.MAX_WALL_TIME
        )
        results_compute(run=current, solver_converged=False)
        return transitions.run_stop_by_policy(
            run=current, outcome=outcome, detail=detail, results=_results_of(current)
        )


def _results_of(run: Run) -> dict[str, Any]:
    return {name: getattr(run, name) for name in transitions.RESULT_FIELDS}
