"""Starting runs: admit within quotas (scheduler), claim what was admitted, start it on its
backend.

Claim first, start second: a redelivered task finds the runs no longer admitted and does
nothing, so a run never starts twice. A worker that dies between the two leaves
provisioning runs without heartbeat, which the reaper (dispatch.reaper) requeues. Runs of
one backend are started together: drivers that start batches (Slurm job arrays) get them in
one call.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from catalog.images import image_reference
from compute.drivers import (
    BatchStart,
    DriverError,
    ResultsReader,
    RunSpec,
    Step,
    driver_for,
    run_work_dir,
    traits_of,
)
from core import jobs
from core.ids import parse_uuid
from core.jobs import Job
from core.metrics import DISPATCH_FAILURES, DISPATCH_LATENCY
from orchestration.case import casecheck, caseplan, render
from pools.selectors import any_pool_active, pooled_run_ids
from quotas.selectors import run_disk_budget_gb
from runs.services import run_dispatch_later, run_requeue_or_fail
from scheduler.admission import admit, tenants_with_queued_runs
from studies.choices import EndReason, RunState
from studies.continuation import agent_resume
from studies.events import publish_runs_taken
from studies.models import Run, Study
from studies.policy import stall_seconds_effective, wall_seconds_effective
from studies.provenance import provenance_seed
from studies.transitions import run_record_superseded_handle, runs_claim, runs_record_handles
from studies.warm import warm_sources_pick
from telemetry.carry import series_carry_over

log = logging.getLogger(__name__)

INLINE_DISPATCH = (
    8  # admitted runs a scheduling task starts itself (a crash: the reaper redispatches)
)
DISPATCH_BATCH = 50  # runs a dispatch task starts
PRERENDER_MAX_BYTES = 1024 * 1024  # larger rendered texts: the agent renders


def schedule_and_start(*, tenant_id: int) -> list[Any]:
    """Admit the tenant's runs that fit, and start them: the few one ending run makes room
    for from here (no second task round trip, and no `admitted` event, which their
    `provisioning` one follows at once); a larger admission as parallel dispatch tasks,
    its `admitted` events published once the tasks are on their way (the seqs were taken
    with the admission: publishing reads the runs, and holds none a claim would skip)."""
    admitted = admit(tenant_id=tenant_id, publish=False, seqs_over=INLINE_DISPATCH)
    dispatch_admitted(admitted, inline=INLINE_DISPATCH)
    if len(admitted) > INLINE_DISPATCH:
        publish_runs_taken(admitted)
    return admitted


def schedule_everyone() -> int:
    """The periodic safety tick: admit every tenant's runs that fit, the tenant with the
    oldest queued run first, and start them after commit as dispatch tasks."""
    count = 0
    for tenant_id in tenants_with_queued_runs():
        admitted = admit(tenant_id=tenant_id)
        transaction.on_commit(functools.partial(dispatch_admitted, admitted))
        count += len(admitted)
    return count


def dispatch_admitted(admitted: list[Any], *, inline: int = 0) -> None:
    """Start admitted runs: up to `inline` of them here and now, more as dispatch tasks of
    DISPATCH_BATCH (run by the worker's threads in parallel)."""
    ids = [str(x) for x in admitted]
    if ids and len(ids) <= inline:
        runs_dispatch(run_ids=ids)
        return
    for i in range(0, len(ids), DISPATCH_BATCH):
        jobs.send(Job.DISPATCH_RUNS, ids[i : i + DISPATCH_BATCH])


def runs_dispatch(*, run_ids: list[Any]) -> int:
    """Claim admitted runs (admitted → provisioning, attempt + 1) and start them on their
    backends; how many started. Runs a warm pool takes stay admitted: a pool worker's pilot
    leases them (dispatch.pilots), and the autoscaler is woken to boot one if need be."""
    pooled = (
        pooled_run_ids(runs_qs=Run.objects.filter(pk__in=list(run_ids)))
        if any_pool_active()
        else {}
    )
    if pooled:
        run_ids = [x for x in run_ids if parse_uuid(x) not in pooled]
        jobs.send(Job.AUTOSCALE_POOLS)
    runs, tokens = runs_claim(run_ids=run_ids)
    by_backend: dict[int, list[Run]] = {}
    for run in runs:
        by_backend.setdefault(run.backend_id, []).append(run)
    return sum(_start_group(group, tokens) for group in by_backend.values())


def run_spec(
    *,
    run: Run,
    study: Study,
    token: str,
    disk_gb: float | None = None,
    plan: caseplan.CasePlan | None = None,
) -> RunSpec:
    """Everything the driver and the agent need for the run's current attempt (`disk_gb`:
    its tenant's run disk budget, `plan`: its study's case plan, when the caller has them
    already for a batch of runs)."""
    return RunSpec(
        run_id=str(run.id),
        attempt=run.attempt,
        portal_url=settings.WINDTUNNEL["PUBLIC_URL"],
        token=token,
        case_dir=study.case_dir,
        work_dir=run_work_dir(run_id=run.id, attempt=run.attempt),
        context=run.context,
        steps=tuple(
            Step(name=s["name"], argv=tuple(s["argv"]), role=s.get("role", "other"))
            for s in study.steps
        ),
        processes=run.processes,
        nodes=run.nodes,
        memory_gb=run.memory_gb,
        decompose=study.decompose,
        env=study.env,
        mounts=dict((run.backend.settings or {}).get("mounts") or {}),
        heartbeat_interval=settings.WINDTUNNEL["HEARTBEAT_INTERVAL"],
        telemetry_interval=settings.WINDTUNNEL["TELEMETRY_INTERVAL"],
        archive_max_mb=settings.WINDTUNNEL["ARCHIVE_MAX_MB"],
        image=image_reference(image=study.image, backend=run.backend),
        rendered=prerendered(run=run, study=study, plan=plan),
        allow_system_operations=settings.WINDTUNNEL["CASE_SYSTEM_OPERATIONS"],
        sandbox=case_sandbox(run, disk_gb=disk_gb),
        fields=tuple((study.spec or {}).get("fields") or ()),
        provenance=provenance_seed(run=run, study=study),
        watchdog=run_watchdog(run=run, study=study),
        resume=agent_resume(run.resume),
    )


def run_watchdog(*, run: Run, study: Study) -> dict[str, Any]:
    """When the run's agent stops it for making no progress, or for running too long (docs/
    live.md): the floor of its stall rule and its wall-time limit, from its study, its
    backend and the portal's settings (studies.policy holds the rules)."""
    convergence = study.convergence or {}
    backend = run.backend
    return {
        "stall_seconds": stall_seconds_effective(
            study=convergence.get("stall_seconds"),
            backend=backend.stall_seconds,
            portal=settings.WINDTUNNEL["STALL_SECONDS"],
        ),
        "stall_factor": settings.WINDTUNNEL["STALL_FACTOR"],
        "startup_seconds": settings.WINDTUNNEL["STALL_STARTUP_SECONDS"],
        "wall_seconds": wall_seconds_effective(
            study=convergence.get("max_wall_seconds"),
            default=backend.default_wall_seconds,
            cap=backend.max_wall_seconds,
        ),
    }


def case_sandbox(run: Run, *, disk_gb: float | None = None) -> dict[str, Any]:
    """How the agent confines the run's steps: its backend's way (trait `sandbox`) unless
    the deployment turned sandboxes off; the network only for MPI across nodes; the run's
    memory and cores per node for its cgroup, and its disk budget (`disk_gb`, else read)."""
    mode = traits_of(run.backend).sandbox
    if settings.WINDTUNNEL["CASE_SANDBOX"] == "off":
        mode = "off"
    nodes = max(run.nodes, 1)
    limits = {
        **settings.WINDTUNNEL["CASE_LIMITS"],
        # what the run declared, per node, enforced by the run's cgroup (sandbox.py)
        "memory_gb": run.memory_gb / nodes,
        "cpus": math.ceil(run.processes / nodes),
        "disk_gb": run_disk_budget_gb(tenant_id=run.tenant_id) if disk_gb is None else disk_gb,
    }
    config: dict[str, Any] = {"mode": mode, "network": run.nodes > 1, "limits": limits}
    if settings.WINDTUNNEL["CGROUP_PARENT"]:
        config["cgroup_parent"] = settings.WINDTUNNEL["CGROUP_PARENT"]
    return config


def study_case_plan(study: Study) -> caseplan.CasePlan:
    """The study's case as it is now, read once for a batch of its runs
    (orchestration.case.caseplan); RenderError or OSError when it cannot be read."""
    etc_dir = casecheck.etc_folder(settings.WINDTUNNEL["OPENFOAM_DIR"])
    return caseplan.case_plan(study.case_dir, etc_dir=etc_dir)


def prerendered(
    *, run: Run, study: Study, plan: caseplan.CasePlan | None = None
) -> dict[str, str] | None:
    """The case's templates rendered here with the run's values, and checked whatever the
    run's backend (orchestration.case.casecheck: a CaseCheckError for what a run may not do, the
    run's values being able to write what its upload could not; a run whose values have the
    shape of a run that passed passes on sight, orchestration.case.caseplan). The texts go to
    agents that would otherwise import Jinja and render in their run slot; None (the agent
    renders, and reports any error) when the backend does not take them (trait
    prerenders_case), rendering fails or the texts are large. `plan`: the study's case plan
    (study_case_plan), else read here."""
    takes = traits_of(run.backend).prerenders_case
    try:
        plan = study_case_plan(study) if plan is None else plan
        texts = plan.checked(run.context, texts=takes)
    except casecheck.CaseCheckError:
        raise
    except (render.RenderError, OSError):
        return None
    if not takes or texts is None:
        return None
    if sum(len(t) for t in texts.values()) > PRERENDER_MAX_BYTES:
        return None
    return texts


def with_handover(backend: Any, specs: list[RunSpec]) -> list[RunSpec]:
    """On a backend that hands cores over (trait hands_over; HANDOVER_LEAD > 0): the specs
    with the lead their agents hand their cores over by, and the runs each must wait for."""
    lead = settings.WINDTUNNEL["HANDOVER_LEAD"]
    if not traits_of(backend).hands_over or lead <= 0:
        return specs
    after = handed_over_work_dirs(backend_id=backend.pk)
    return [dataclasses.replace(spec, handover=lead, after=after) for spec in specs]


def handed_over_work_dirs(*, backend_id: int) -> tuple[str, ...]:
    """The work directories of the backend's runs that handed their cores over while their
    last step may still run (trait hands_over): a run started now waits on the host until
    each of them is over (orchestration/agent/handover.py), so it never runs beside them."""
    rows = Run.objects.filter(
        backend_id=backend_id, state=RunState.RUNNING, released_at__isnull=False
    ).values_list("id", "attempt")
    return tuple(run_work_dir(run_id=run_id, attempt=attempt) for run_id, attempt in rows)


def run_case_refused(*, run: Run, error: casecheck.CaseCheckError) -> None:
    """A run whose rendered case the checks refuse fails before it starts, saying why."""
    run_requeue_or_fail(
        run=run,
        reason=EndReason.DISPATCH_FAILED,
        message=f"the case as this run's values render it is refused: {error}",
        retry=False,
    )


def _specs(runs: list[Run], tokens: dict[Any, str]) -> tuple[list[Run], list[RunSpec]]:
    """The runs' specs, but for runs whose rendered case is refused (those fail here)."""
    kept: list[Run] = []
    specs: list[RunSpec] = []
    budgets: dict[int, float] = {}  # one read per tenant of the batch, not one per run
    plans: dict[Any, caseplan.CasePlan | None] = {}  # one read per study of the batch
    by_study: dict[Any, list[Run]] = {}
    for run in runs:
        by_study.setdefault(run.study_id, []).append(run)
    for group in by_study.values():  # a warm-starting study's runs: their sources, first
        study = group[0].study
        if (study.spec or {}).get("warm_start"):
            warm_sources_pick(study=study, runs=group, plan=_plan_of(study, plans))
    for run in runs:
        if run.tenant_id not in budgets:
            budgets[run.tenant_id] = run_disk_budget_gb(tenant_id=run.tenant_id)
        _plan_of(run.study, plans)
        try:
            specs.append(
                run_spec(
                    run=run,
                    study=run.study,
                    token=tokens[run.pk],
                    disk_gb=budgets[run.tenant_id],
                    plan=plans[run.study_id],
                )
            )
        except casecheck.CaseCheckError as exc:
            run_case_refused(run=run, error=exc)
            continue
        if run.resume:
            _carry_series(run)
        kept.append(run)
    return kept, specs


def _carry_series(run: Run) -> None:
    """A run that goes on from a write: its series begin with the points before it (not a
    warm start's: it begins anew from another run's fields)."""
    resume = run.resume or {}
    if resume.get("source"):
        return
    try:
        up_to = float(str(resume.get("time")))
    except (TypeError, ValueError):
        return  # "latest": the agent picks it (a run requeued after a loss)
    series_carry_over(
        run_id=run.pk, from_attempt=int(resume["attempt"]), to_attempt=run.attempt, up_to=up_to
    )


def _plan_of(study: Study, plans: dict[Any, caseplan.CasePlan | None]) -> Any:
    """The study's case plan, read once for the batch (None: each run tries, and its agent
    reports why)."""
    if study.pk not in plans:
        try:
            plans[study.pk] = study_case_plan(study)
        except (render.RenderError, OSError):
            plans[study.pk] = None
    return plans[study.pk]


def _start_group(runs: list[Run], tokens: dict[Any, str]) -> int:
    backend = runs[0].backend
    runs, specs = _specs(runs, tokens)
    if not runs:
        return 0
    try:
        driver = driver_for(backend)
        # where the portal reads a run's files itself, its agent uploads no archive: the
        # archive is built from the run's directory when someone downloads it
        reads = isinstance(driver, ResultsReader)  # a protocol check: once, not per run
        dirs = [(driver.results_dir(spec) or "") if reads else "" for spec in specs]
        specs = [
            dataclasses.replace(spec, archive="portal") if d else spec
            for spec, d in zip(specs, dirs, strict=True)
        ]
        specs = with_handover(backend, specs)
        # a warm-starting study's next run starts from the runs that have completed: its
        # runs give their cores back with their results, not before their last step ends
        specs = [
            dataclasses.replace(spec, handover=0.0)
            if spec.handover and (run.study.spec or {}).get("warm_start")
            else spec
            for run, spec in zip(runs, specs, strict=True)
        ]
        for spec in specs:
            driver.prepare(spec)
        if len(specs) > 1 and isinstance(driver, BatchStart):
            handles = list(driver.start_batch(specs))
        else:
            handles = [driver.start(spec) for spec in specs]
    except (DriverError, OSError) as exc:
        DISPATCH_FAILURES.labels(backend=backend.name).inc(len(runs))
        retryable = getattr(exc, "retryable", False)
        for run in runs:
            if retryable:  # e.g. slurmctld restarting: the run never started anywhere
                run_dispatch_later(run=run, message=f"{backend.name} could not take the run: {exc}")
            else:
                run_requeue_or_fail(
                    run=run,
                    reason=EndReason.DISPATCH_FAILED,
                    message=f"backend {backend.name} refused to start the run: {exc}",
                    retry=False,
                )
        return 0
    stored = runs_record_handles(
        rows=[
            (str(run.pk), run.attempt, handle, d)
            for run, handle, d in zip(runs, handles, dirs, strict=True)
        ]
    )
    started = timezone.now()
    latency = DISPATCH_LATENCY.labels(backend=backend.name)
    for run, handle in zip(runs, handles, strict=True):
        if str(run.pk) in stored:
            if run.admitted_at is not None:
                latency.observe((started - run.admitted_at).total_seconds())
            continue
        # cancelled, finished or given to a new attempt while we were starting it (a slow
        # backend the reaper gave up on): this attempt must not run on
        run_record_superseded_handle(run_id=run.pk, attempt=run.attempt, handle=handle)
        try:
            driver.cancel(handle, grace=5.0)
        except DriverError as exc:
            log.warning("cannot cancel superseded start %s of run %s: %s", handle, run.pk, exc)
    return len(stored)
