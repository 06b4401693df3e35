"""Writes on studies and runs: create, submit, cancel, extend, clone; the run lifecycle.

Every run transition is a conditional UPDATE fenced by state and attempt, so a stale
worker or agent can never overwrite a newer attempt.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
import os
import secrets
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from catalog.choices import (
    EARLY_RELEASE_KINDS,
    NODE_HOLDING_KINDS,
    PRERENDER_KINDS,
    PRERENDER_MAX_BYTES,
    QUEUEING_KINDS,
)
from catalog.images import image_reference, study_image_ensure
from catalog.models import Backend
from core.crypto import decrypt_json
from core.events import enqueue_on_commit
from core.exceptions import ApplicationError, Conflict, ErrorCode, NotFound
from orchestration import render
from orchestration.drivers.base import DriverError, RunPhase, RunSpec, Step, get_driver
from quotas.models import Quota
from quotas.selectors import usage_for_tenant
from studies.choices import (
    ACTIVE_STATES,
    HOLDING_STATES,
    STARTED_STATES,
    TERMINAL_STATES,
    EndReason,
    RunState,
    StudyState,
    WaitReason,
)
from studies.models import Simulation, Study
from studies.space import parse_space, point_key
from studies.spec import ResolvedSpec, spec_resolve
from telemetry.events import publish_runs_changed, publish_study

log = logging.getLogger(__name__)
SIGFPE_EXIT_CODES = (136, -8)  # 128 + SIGFPE from a shell/mpirun, or -SIGFPE from Popen
SECRET_KINDS = ("slurm", "openstack")  # drivers that get the backend's decrypted secrets
RELEASE_KINDS = ("openstack",)  # drivers whose collect() deletes what a run held


# --- studies -----------------------------------------------------------------------------


def _apply(study: Study, resolved: ResolvedSpec, spec: dict[str, Any]) -> None:
    study.name = resolved.name
    study.description = resolved.description
    study.spec = spec
    study.template = resolved.template
    study.upload = resolved.upload
    study.backend = resolved.backend
    study.solver = resolved.solver
    study.processes = resolved.processes
    study.nodes = resolved.nodes
    study.memory_gb = resolved.memory_gb
    study.objectives = dict(resolved.objectives)
    study.derived = dict(resolved.derived)
    study.constants = dict(resolved.constants)
    study.case_dir = resolved.case_dir
    study.steps = resolved.steps
    study.decompose = resolved.decompose
    study.env = resolved.env
    study.convergence = resolved.convergence
    study.image = resolved.image.image if resolved.image else None


def study_preview(*, tenant, spec: dict[str, Any], rows: int = 20) -> dict[str, Any]:
    """What a spec would make, without creating anything: run count, first rows, quota impact."""
    resolved = spec_resolve(tenant=tenant, spec=spec)
    first = []
    for i, (params, context) in enumerate(resolved.points()):
        if i >= rows:
            break
        first.append({"index": i, "parameters": params, "context": context})
    resolved.check()  # every point (bounds, derived values) and the case's placeholders
    return {
        "run_count": resolved.run_count,
        "parameters": [a.name for a in resolved.space.axes],
        "rows": first,
        "solver": resolved.solver,
        "backend": resolved.backend.name,
        "resources": {
            "processes": resolved.processes,
            "nodes": resolved.nodes,
            "memory_gb": resolved.memory_gb,
        },
        "steps": resolved.steps,
        "objectives": resolved.objectives,
        "quota": quota_impact(tenant=tenant, resolved=resolved),
    }


def quota_impact(*, tenant, resolved: ResolvedSpec) -> dict[str, Any]:
    quota = Quota.objects.get(tenant=tenant)
    backend = resolved.backend
    per_run = {
        "cores": resolved.processes,
        "memory_gb": resolved.memory_gb,
        "nodes": resolved.nodes,
    }
    problem = single_run_problem(quota=quota, backend=backend, resolved=resolved)
    concurrent = 0
    if problem is None:
        concurrent = min(
            quota.max_runs,
            quota.cores // resolved.processes,
            int(quota.memory_gb // resolved.memory_gb) if resolved.memory_gb else quota.max_runs,
            quota.max_nodes // resolved.nodes
            if backend.kind in NODE_HOLDING_KINDS
            else quota.max_runs,
            backend.cores // resolved.processes,
            int(backend.memory_gb // resolved.memory_gb) if resolved.memory_gb else backend.cores,
        )
    concurrent = max(concurrent, 0)
    waves = math.ceil(resolved.run_count / concurrent) if concurrent else None
    usage = usage_for_tenant(tenant_id=tenant.id)
    total = {k: v * resolved.run_count for k, v in per_run.items()}
    if problem:
        summary = f"a single run does not fit: {problem}"
    else:
        summary = (
            f"{resolved.run_count} run(s) × {resolved.processes} core(s): at most {concurrent} at a time "
            f"within your {quota.cores}-core quota, about {waves} wave(s)"
        )
    return {
        "per_run": per_run,
        "total": total,
        "limits": {
            "cores": quota.cores,
            "memory_gb": quota.memory_gb,
            "nodes": quota.max_nodes,
            "runs": quota.max_runs,
        },
        "in_use": {
            "cores": usage.cores,
            "memory_gb": usage.memory_gb,
            "nodes": usage.nodes,
            "runs": usage.runs,
        },
        "concurrent_runs": concurrent,
        "waves": waves,
        "fits": problem is None,
        "problem": problem,
        "summary": summary,
    }


def single_run_problem(*, quota: Quota, backend: Backend, resolved: ResolvedSpec) -> str | None:
    p, m, n = resolved.processes, resolved.memory_gb, resolved.nodes
    if p > quota.cores:
        return f"one run needs {p} cores but your quota allows {quota.cores} cores; lower resources.processes or ask an admin to raise the quota"
    if m > quota.memory_gb:
        return f"one run needs {m:g} GB of memory but your quota allows {quota.memory_gb:g} GB; lower resources.memory_gb"
    if backend.kind in NODE_HOLDING_KINDS and n > quota.max_nodes:
        return f"one run needs {n} nodes but your quota allows {quota.max_nodes}; lower resources.nodes"
    if p > backend.cores:
        return f"one run needs {p} cores but backend {backend.name} has {backend.cores}; lower resources.processes or choose another backend"
    if m > backend.memory_gb:
        return f"one run needs {m:g} GB but backend {backend.name} has {backend.memory_gb:g} GB; lower resources.memory_gb"
    if n > backend.max_nodes:
        return f"one run needs {n} nodes but backend {backend.name} runs at most {backend.max_nodes} node(s) per run"
    return None


@transaction.atomic
def study_create(*, tenant, owner, spec: dict[str, Any], submit: bool = False) -> Study:
    resolved = spec_resolve(tenant=tenant, spec=spec)
    if not submit:  # a draft too: saved now, it must be able to run later (submit checks)
        resolved.check()
    study = Study(tenant=tenant, owner=owner, state=StudyState.DRAFT)
    _apply(study, resolved, spec)
    study.run_count = resolved.run_count
    study.save()
    if submit:
        study_submit(study=study)
    return study


@transaction.atomic
def study_update(*, study: Study, spec: dict[str, Any]) -> Study:
    study = Study.objects.select_for_update().get(pk=study.pk)
    if study.state != StudyState.DRAFT:
        raise Conflict(
            f"only a draft study can be edited; this one is {study.state}. Clone it to change it.",
            code=ErrorCode.STATE,
        )
    resolved = spec_resolve(tenant=study.tenant, spec=spec)
    resolved.check()
    _apply(study, resolved, spec)
    study.run_count = resolved.run_count
    study.save()
    return study


def _runs_for(
    *, study: Study, resolved: ResolvedSpec, start_index: int, skip: set[tuple] | None = None
) -> list[Simulation]:
    names = [a.name for a in resolved.space.axes]
    now = timezone.now()
    runs = []
    index = start_index
    for params, context in resolved.points():
        if skip is not None:
            key = point_key(params, names)
            if key in skip:
                continue
            skip.add(key)
        runs.append(
            Simulation(
                study=study,
                tenant_id=study.tenant_id,
                backend=resolved.backend,
                index=index,
                parameters=params,
                context=context,
                processes=resolved.processes,
                nodes=resolved.nodes,
                memory_gb=resolved.memory_gb,
                queued_at=now,
                state=RunState.PENDING,
                wait_reason=WaitReason.QUEUED,
            )
        )
        index += 1
    return runs


@transaction.atomic
def study_submit(*, study: Study) -> Study:
    from scheduler.tasks import schedule_tenant

    study = Study.objects.select_for_update().get(pk=study.pk)
    if study.state != StudyState.DRAFT:
        raise Conflict(
            f"this study was already submitted (state {study.state})", code=ErrorCode.STATE
        )
    resolved = spec_resolve(tenant=study.tenant, spec=study.spec)
    quota = Quota.objects.get(tenant=study.tenant)
    problem = single_run_problem(quota=quota, backend=resolved.backend, resolved=resolved)
    if problem:
        raise ApplicationError(problem, code=ErrorCode.QUOTA, field="resources")
    _apply(study, resolved, study.spec)
    # an image composed from packages is created now and built while the runs wait
    study.image = study_image_ensure(choice=resolved.image, user=study.owner)
    runs = _runs_for(study=study, resolved=resolved, start_index=0)
    if runs:
        resolved.check_case(runs[0].context)  # the case may have changed since the draft
    Simulation.objects.bulk_create(runs, batch_size=1000)
    study.run_count = len(runs)
    study.state = StudyState.SUBMITTED
    study.submitted_at = timezone.now()
    study.save()
    enqueue_on_commit(schedule_tenant, study.tenant_id)
    return study


@transaction.atomic
def study_extend(*, study: Study, parameters: dict[str, Any]) -> list[Simulation]:
    """Add parameter values; only the points not already in the study get new runs."""
    from scheduler.tasks import schedule_tenant

    study = Study.objects.select_for_update().get(pk=study.pk)
    if study.state == StudyState.DRAFT:
        raise Conflict(
            "a draft study is edited, not extended; submit it first", code=ErrorCode.STATE
        )
    if not isinstance(parameters, dict) or not parameters:
        raise ApplicationError(
            "give the new values as parameters: {name: {values: [...]}}", field="parameters"
        )
    old_names = list((study.spec.get("parameters") or {}).keys())
    if set(parameters) - set(old_names):
        extra = ", ".join(sorted(set(parameters) - set(old_names)))
        raise ApplicationError(
            f"extend can add values to the study's parameters ({', '.join(old_names)}), not new parameters ({extra}); clone the study instead",
            field="parameters",
        )
    combine = study.spec.get("combine", "grid")
    if combine in ("lhs", "random"):
        raise ApplicationError(
            f"a sampled study (combine: {combine}) has no values to add to; clone it with more "
            "samples or another seed instead",
            field="parameters",
        )
    spec = dict(study.spec)
    old = dict(spec.get("parameters") or {})
    spec["parameters"] = {**old, **parameters}
    resolved = spec_resolve(tenant=study.tenant, spec=spec)  # the points this extension makes
    names = [a.name for a in resolved.space.axes]
    existing = {point_key(p, names) for p in study.runs.values_list("parameters", flat=True)}
    last = study.runs.order_by("-index").values_list("index", flat=True).first()
    start = 0 if last is None else last + 1
    runs = _runs_for(study=study, resolved=resolved, start_index=start, skip=existing)
    # the stored spec describes every run the study has (clone reproduces them): the old and
    # the new values together
    spec["parameters"] = _merged_parameters(old, parameters, combine=combine)
    total = study.runs.count() + len(runs)
    limit = settings.WINDTUNNEL["MAX_RUNS_PER_STUDY"]
    if total > limit:
        raise ApplicationError(
            f"the extended study would have {total:,} runs; at most {limit:,}",
            code=ErrorCode.TOO_MANY_RUNS,
            field="parameters",
        )
    Simulation.objects.bulk_create(runs, batch_size=1000)
    study.spec = spec
    study.run_count = total
    if runs:
        study.state = StudyState.SUBMITTED if study.state != StudyState.RUNNING else study.state
        study.finished_at = None
        enqueue_on_commit(schedule_tenant, study.tenant_id)
    study.save()
    return runs


def _merged_parameters(old: dict, added: dict, *, combine: str) -> dict:
    """The study's parameters after an extension, as explicit values: for a grid each
    extended parameter holds its old values and the new ones (the grid of those is the old
    points plus the new); for zip, the old tuples followed by the new ones not there yet."""
    before = parse_space(old, combine=combine)
    after = parse_space({**old, **added}, combine=combine)
    if combine == "zip":
        names = [a.name for a in before.axes]
        rows: dict[tuple, dict] = {}
        for point in [*before.points(), *after.points()]:
            rows.setdefault(point_key(point, names), point)
        return {name: {"values": [row[name] for row in rows.values()]} for name in names}
    merged = dict(old)
    for axis_before, axis_after in zip(before.axes, after.axes, strict=True):
        if axis_before.name not in added:
            continue
        values: dict[tuple, Any] = {}
        for value in [*axis_before.values, *axis_after.values]:
            values.setdefault(point_key({"v": value}, ["v"]), value)
        merged[axis_before.name] = {"values": list(values.values())}
    return merged


@transaction.atomic
def study_clone(*, study: Study, owner, name: str | None = None) -> Study:
    spec = dict(study.spec)
    spec["name"] = name or f"{study.name} (copy)"[:200]
    clone = study_create(tenant=study.tenant, owner=owner, spec=spec)
    clone.cloned_from = study
    clone.save(update_fields=["cloned_from"])
    return clone


@transaction.atomic
def study_delete(*, study: Study) -> None:
    study = Study.objects.select_for_update().get(pk=study.pk)
    if (
        study.state != StudyState.DRAFT
        and study.runs.filter(state__in=(RunState.PENDING, *HOLDING_STATES)).exists()
    ):
        raise Conflict(
            "this study still has queued or running runs; cancel it first", code=ErrorCode.STATE
        )
    run_ids = [str(i) for i in study.runs.values_list("pk", flat=True)]
    study.delete()
    if run_ids:
        from studies.tasks import delete_run_files

        # the runs' directories and archives go too (in the worker: thousands of folders)
        for i in range(0, len(run_ids), 500):
            enqueue_on_commit(delete_run_files, run_ids[i : i + 500])


@transaction.atomic
def study_cancel(*, study: Study, by) -> int:
    study = Study.objects.select_for_update().get(pk=study.pk)
    if study.state == StudyState.DRAFT:
        raise Conflict(
            "a draft study has no runs to cancel; delete it instead", code=ErrorCode.STATE
        )
    if not study.runs.filter(state__in=(RunState.PENDING, *HOLDING_STATES)).exists():
        raise Conflict(
            f"the study is {study.get_state_display().lower()}: no run is queued or running, "
            "so there is nothing to cancel",
            code=ErrorCode.STATE,
        )
    count = 0
    for run in study.runs.filter(state__in=(RunState.PENDING, *HOLDING_STATES)):
        if run_cancel(run=run, by=by, refresh_study=False):
            count += 1
    study.state = StudyState.CANCELLED
    study.finished_at = timezone.now()
    study.save(update_fields=["state", "finished_at", "updated_at"])
    return count


def study_refresh_state(*, study_id) -> None:
    """Derive the study's state from its runs (called after every run transition)."""
    with transaction.atomic():
        study = Study.objects.select_for_update().filter(pk=study_id).first()
        if study is None or study.state in (StudyState.DRAFT, StudyState.CANCELLED):
            return
        states = set(study.runs.order_by().values_list("state", flat=True).distinct())
        if not states:
            return
        active = states & {RunState.PENDING, *HOLDING_STATES}
        if active:
            new = (
                StudyState.RUNNING
                if states - {RunState.PENDING, RunState.ADMITTED}
                else StudyState.SUBMITTED
            )
            finished = None
        else:
            new = (
                StudyState.COMPLETED
                if states == {RunState.COMPLETED}
                else StudyState.COMPLETED_WITH_FAILURES
            )
            finished = study.finished_at or timezone.now()
        if new != study.state or finished != study.finished_at:
            study.state, study.finished_at = new, finished
            study.save(update_fields=["state", "finished_at", "updated_at"])
            transaction.on_commit(
                lambda: publish_study(study_id=study.pk, kind="study", payload={})
            )


# --- runs ----------------------------------------------------------------------------------


def _after_run_ended(run: Simulation, *, requeued: bool = False) -> None:
    from scheduler.tasks import schedule_tenant
    from studies.tasks import refresh_study

    if requeued:
        publish_runs_changed([run.pk])
        enqueue_on_commit(refresh_study, str(run.study_id))
    else:  # the study's state changes only when its last active run ends
        publish_runs_changed([run.pk], refresh_when_done=True)
    if requeued or run.released_at is None:  # else its cores went back (and were scheduled)
        enqueue_on_commit(schedule_tenant, run.tenant_id)
    if run.handle and _holds_a_release(run):
        from studies.tasks import release_run

        # the server (or stack) of a finished run costs money until deleted: at once
        enqueue_on_commit(release_run, str(run.pk), run.attempt, run.handle)


def studies_settle() -> int:
    """Refresh studies still shown as submitted or running with no active run left."""
    from studies.tasks import refresh_study

    runs = Simulation.objects.filter(study_id=OuterRef("pk"))
    ids = list(
        Study.objects.filter(state__in=[StudyState.SUBMITTED, StudyState.RUNNING])
        .filter(Exists(runs))  # a study without runs has no state to derive: left alone
        .exclude(Exists(runs.filter(state__in=ACTIVE_STATES)))
        .values_list("pk", flat=True)
    )
    for study_id in ids:
        refresh_study.delay(str(study_id))
    return len(ids)


def _holds_a_release(run: Simulation) -> bool:
    """Whether the run's backend holds something to delete when a run ends (OpenStack
    servers); no query when the caller loaded the run with its backend."""
    if Simulation.backend.is_cached(run):
        return run.backend.kind in RELEASE_KINDS
    return Backend.objects.filter(pk=run.backend_id, kind__in=RELEASE_KINDS).exists()


def run_release(*, run_id, attempt: int, handle: str) -> None:
    """Free what the backend holds for an ended attempt (delete its server or stack)."""
    run = Simulation.objects.select_related("backend").filter(pk=run_id).first()
    if run is None or not handle:
        return
    try:
        _driver_for(run.backend).collect(handle)
    except DriverError as exc:  # the leak reaper deletes it later
        log.warning("release of run %s attempt %s failed: %s", run_id, attempt, exc)


def _stop_started_run(run: Simulation) -> None:
    """After commit: a running agent sees `stop` on its next report and ends cleanly, keeping
    its results; the backend kill follows as a safety net. A run not yet running is killed."""
    from studies.tasks import kill_run

    if not run.handle:
        return
    args = (str(run.id), run.attempt, run.handle)
    if run.state == RunState.RUNNING or run.started_at:
        delay = settings.WINDTUNNEL["STOP_GRACE"]
        transaction.on_commit(lambda: kill_run.apply_async(args, countdown=delay))
    else:
        enqueue_on_commit(kill_run, *args)


def run_cancel(*, run: Simulation, by, refresh_study: bool = True) -> bool:
    """Cancel a run: queued runs end at once; started runs are killed on their backend."""
    from studies.tasks import kill_run

    with transaction.atomic():
        run = Simulation.objects.select_for_update().get(pk=run.pk)
        if run.state in TERMINAL_STATES:
            return False
        who = getattr(by, "username", None) or "the system"
        started = run.state in STARTED_STATES
        was_running = run.state == RunState.RUNNING
        run.state = RunState.CANCELLED
        run.end_reason = EndReason.CANCELLED_BY_USER
        run.message = f"cancelled by {who}"
        run.finished_at = timezone.now()
        run.stop_requested = True
        run.wait_reason = WaitReason.NONE
        run.wait_detail = ""  # it waits for nothing any more
        run.save(
            update_fields=[
                "state",
                "end_reason",
                "message",
                "finished_at",
                "stop_requested",
                "wait_reason",
                "wait_detail",
                "updated_at",
            ]
        )
        if started and run.handle:
            if was_running:
                _stop_started_run(run)
            else:
                enqueue_on_commit(kill_run, str(run.id), run.attempt, run.handle)
        if refresh_study:
            _after_run_ended(run)
        else:
            from scheduler.tasks import schedule_tenant

            publish_runs_changed([run.pk])
            enqueue_on_commit(schedule_tenant, run.tenant_id)
    return True


def _driver_for(backend: Backend):
    opts = dict(backend.settings or {})
    if backend.kind in ("local", "container"):
        opts.setdefault("cores", backend.cores)
        opts.setdefault("memory_gb", backend.memory_gb)
        opts.setdefault("work_root", str(settings.RUNS_DIR))
    if backend.kind == "openstack":
        opts.update(cores=backend.cores, memory_gb=backend.memory_gb, max_nodes=backend.max_nodes)
    if backend.kind in SECRET_KINDS and backend.secrets:
        opts["secrets"] = decrypt_json(backend.secrets)  # e.g. Slurm's SSH key, never logged
    return get_driver(backend.kind, opts)


def _ended_by_backend(driver, handle: str) -> tuple[str, bool] | None:
    """Did the backend itself end this job (e.g. a Slurm time limit)? (message, retry) or None."""
    explain = getattr(driver, "ended_by_backend", None)
    if explain is None or not handle:
        return None
    try:
        return explain(handle)
    except DriverError as exc:
        log.warning("cannot ask the backend why %s ended: %s", handle, exc)
        return None


def run_spec(*, run: Simulation, study: Study, token: str) -> RunSpec:
    return RunSpec(
        run_id=str(run.id),
        attempt=run.attempt,
        portal_url=settings.WINDTUNNEL["PUBLIC_URL"],
        token=token,
        case_dir=study.case_dir,
        work_dir=str(Path(settings.RUNS_DIR) / str(run.id) / f"attempt-{run.attempt}"),
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
        rendered=_prerendered(run=run, study=study),
        allow_system_operations=settings.WINDTUNNEL["CASE_SYSTEM_OPERATIONS"],
    )


def _prerendered(*, run: Simulation, study: Study) -> dict[str, str] | None:
    """The case's templates rendered here, for agents that would otherwise import Jinja and
    render in their run slot; None (the agent renders, and reports any error) when the
    backend does not take it, rendering fails or the texts are large."""
    if run.backend.kind not in PRERENDER_KINDS:
        return None
    try:
        texts = render.render_files(Path(study.case_dir), run.context)
    except (render.RenderError, OSError):
        return None
    if sum(len(t) for t in texts.values()) > PRERENDER_MAX_BYTES:
        return None
    return texts


def hash_run_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def runs_dispatch(*, run_ids: list) -> int:
    """Claim admitted runs (admitted → provisioning, attempt + 1) and start them on their backends.

    Claim first, start second: a redelivered task finds the runs no longer admitted and does
    nothing, so a run never starts twice. A worker that dies between the two leaves
    provisioning runs without heartbeat, which the reaper requeues. Runs of one backend are
    started together: drivers with `start_batch` (Slurm job arrays) get them in one call.
    """
    now = timezone.now()
    tokens: dict = {}
    with transaction.atomic():
        runs = list(
            Simulation.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("study", "backend")
            .filter(pk__in=run_ids, state=RunState.ADMITTED)
            .order_by("queued_at", "index")
        )
        for run in runs:
            tokens[run.pk] = secrets.token_urlsafe(32)
            run.attempt += 1
            run.state = RunState.PROVISIONING
            run.provisioning_at = now
            run.heartbeat_at = None
            run.token_hash = hash_run_token(tokens[run.pk])
            run.handle = ""
            run.results_dir = ""
            run.results_at = None
            run.phase = ""
            run.updated_at = now
        if runs:
            _update_from_values(
                "attempt = v.attempt, state = %s, provisioning_at = %s, heartbeat_at = NULL, "
                "token_hash = v.token_hash, handle = '', results_dir = '', results_at = NULL, "
                "phase = '', "
                "updated_at = %s",
                [RunState.PROVISIONING.value, now, now],
                "(%s::uuid, %s::int, %s)",
                [(str(r.pk), r.attempt, r.token_hash) for r in runs],
                "v(id, attempt, token_hash)",
            )
    publish_runs_changed([r.pk for r in runs])
    by_backend: dict[int, list[Simulation]] = {}
    for run in runs:
        by_backend.setdefault(run.backend_id, []).append(run)
    started = 0
    for group in by_backend.values():
        started += _start_group(group, tokens)
    return started


def _update_from_values(
    assignments: str,
    params: list,
    row_sql: str,
    rows: list[tuple],
    alias: str,
    *,
    where: str = "",
    where_params: list | None = None,
) -> set[str]:
    """One `UPDATE … FROM (VALUES …)` for many runs (Django's bulk_update is far slower)."""
    table = Simulation._meta.db_table
    values = ", ".join([row_sql] * len(rows))
    with connection.cursor() as cur:
        cur.execute(
            f"UPDATE {table} AS s SET {assignments} FROM (VALUES {values}) AS {alias} "
            f"WHERE s.id = v.id {where} RETURNING s.id",
            [*params, *(x for row in rows for x in row), *(where_params or [])],
        )
        return {str(r[0]) for r in cur.fetchall()}


def _start_group(runs: list[Simulation], tokens: dict) -> int:
    backend = runs[0].backend
    specs = [run_spec(run=run, study=run.study, token=tokens[run.pk]) for run in runs]
    try:
        driver = _driver_for(backend)
        # where the portal reads a run's files itself, its agent uploads no archive: the
        # archive is built from the run's directory when someone downloads it
        readable = getattr(driver, "results_dir", None)
        dirs = [(readable(spec) or "") if readable else "" for spec in specs]
        specs = [
            dataclasses.replace(spec, archive="portal") if d else spec
            for spec, d in zip(specs, dirs, strict=True)
        ]
        for spec in specs:
            driver.prepare(spec)
        if len(specs) > 1 and hasattr(driver, "start_batch"):
            handles = list(driver.start_batch(specs))
        else:
            handles = [driver.start(spec) for spec in specs]
    except (DriverError, OSError) as exc:
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
    rows = [
        (str(run.pk), run.attempt, handle, d)
        for run, handle, d in zip(runs, handles, dirs, strict=True)
    ]
    stored = _update_from_values(
        "handle = v.handle, results_dir = v.results_dir",
        [],
        "(%s::uuid, %s::int, %s, %s)",
        rows,
        "v(id, attempt, handle, results_dir)",
        where="AND s.attempt = v.attempt AND s.state IN (%s, %s)",
        where_params=[RunState.PROVISIONING.value, RunState.RUNNING.value],
    )
    for run, handle in zip(runs, handles, strict=True):
        if str(run.pk) in stored:
            continue
        # cancelled, finished or given to a new attempt while we were starting it (a slow
        # backend the reaper gave up on): this attempt must not run on
        Simulation.objects.filter(pk=run.pk, attempt=run.attempt).update(handle=handle)
        try:
            driver.cancel(handle, grace=5.0)
        except DriverError as exc:
            log.warning("cannot cancel superseded start %s of run %s: %s", handle, run.pk, exc)
    return len(stored)


def run_dispatch_later(*, run: Simulation, message: str) -> str:
    """Its backend could not take the run (unreachable, restarting): back to the queue until
    a later time, with backoff (5 s doubling to 60 s), without using up a retry: the run
    never started. Failed after WINDTUNNEL_DISPATCH_RETRIES such tries."""
    from scheduler.tasks import schedule_tenant

    tries = run.dispatch_failures + 1
    if tries > settings.WINDTUNNEL["DISPATCH_RETRIES"]:
        return run_requeue_or_fail(
            run=run,
            reason=EndReason.DISPATCH_FAILED,
            message=f"{message}\n(tried {tries} times; giving up)",
            retry=False,
        )
    now = timezone.now()
    delay = min(60, 5 * 2 ** min(tries - 1, 4))
    retry_at = now + timezone.timedelta(seconds=delay)
    updated = Simulation.objects.filter(
        pk=run.pk, attempt=run.attempt, state__in=HOLDING_STATES
    ).update(
        state=RunState.PENDING,
        wait_reason=WaitReason.RETRY,
        wait_detail=f"{message[:150]}; trying again at {retry_at:%H:%M:%S} UTC",
        message=f"{message} (try {tries}; trying again in {delay} s)"[:5000],
        handle="",
        token_hash="",
        phase="",
        dispatch_failures=tries,
        retry_at=retry_at,
        updated_at=now,
    )
    if not updated:
        return ""
    log.info("run %s: backend could not take it (try %s): %s", run.pk, tries, message)
    publish_runs_changed([run.pk])
    tenant_id = run.tenant_id
    transaction.on_commit(lambda: schedule_tenant.apply_async((tenant_id,), countdown=delay))
    return RunState.PENDING


def run_requeue_or_fail(*, run: Simulation, reason: str, message: str, retry: bool = True) -> str:
    """End this attempt: back to the queue while retries remain, else failed. Attempts its
    backend never took (dispatch_failures) do not count."""
    max_retries = settings.WINDTUNNEL["MAX_RETRIES"]
    fence = Simulation.objects.filter(pk=run.pk, attempt=run.attempt, state__in=HOLDING_STATES)
    if retry and run.attempt - run.dispatch_failures <= max_retries:
        updated = fence.update(
            state=RunState.PENDING,
            wait_reason=WaitReason.RETRY,
            wait_detail=f"attempt {run.attempt} ended: {message}"[:200],
            handle="",
            token_hash="",
            phase="",
            message=message,
            updated_at=timezone.now(),
        )
        outcome = RunState.PENDING
    else:
        updated = fence.update(
            state=RunState.FAILED,
            end_reason=reason,
            message=message,
            finished_at=timezone.now(),
            token_hash="",
            updated_at=timezone.now(),
        )
        outcome = RunState.FAILED
    if updated:
        log.info("run %s attempt %s → %s: %s", run.pk, run.attempt, outcome, message)
        _after_run_ended(run, requeued=outcome == RunState.PENDING)
    return outcome if updated else ""


def run_kill(*, run_id, attempt: int, handle: str) -> None:
    run = Simulation.objects.select_related("backend").filter(pk=run_id).first()
    if run is None or not handle:
        return
    try:
        _driver_for(run.backend).cancel(handle, grace=10.0)
    except DriverError as exc:
        log.warning("cancel of run %s attempt %s failed: %s", run_id, attempt, exc)


def runs_reap() -> dict[str, int]:
    """Find runs whose agent went silent or whose start was lost; requeue or fail them."""
    from studies.tasks import dispatch_runs

    now = timezone.now()
    timeout = settings.WINDTUNNEL["HEARTBEAT_TIMEOUT"]
    dispatch_timeout = settings.WINDTUNNEL["DISPATCH_TIMEOUT"]
    stats = {"requeued": 0, "failed": 0, "redispatched": 0}
    candidates = Simulation.objects.select_related("backend").filter(state__in=STARTED_STATES)
    unreachable: set[int] = set()
    for run in candidates:
        last = run.heartbeat_at or run.provisioning_at or run.updated_at
        limit = timeout if run.heartbeat_at else max(timeout, dispatch_timeout)
        stale = not (last and last > now - timezone.timedelta(seconds=limit))
        # a run still waiting in its backend's own queue (a Slurm job) says why at every
        # pass, not only once it is late: one cached squeue a backend and pass
        waiting = (
            run.state == RunState.PROVISIONING
            and run.heartbeat_at is None
            and bool(run.handle)
            and run.backend.kind in QUEUEING_KINDS
        )
        if not (stale or waiting):
            continue
        phase, reason, driver = RunPhase.UNKNOWN, "", None
        if run.backend_id in unreachable:
            continue  # one slow failure per backend and pass: do not starve the other tasks
        if run.handle:
            try:
                driver = _driver_for(run.backend)
                status = driver.poll(run.handle)
            except DriverError as exc:
                unreachable.add(run.backend_id)
                log.warning("poll of run %s failed: %s", run.pk, exc)
                continue
            phase, reason = status.phase, status.reason
        if phase == RunPhase.PENDING:
            # queued on the backend (e.g. a Slurm job waiting for nodes): waiting, not lost
            message = _queued_message(run, f"queued on {run.backend.name}: {reason or 'waiting'}")
            Simulation.objects.filter(
                pk=run.pk, attempt=run.attempt, state=RunState.PROVISIONING
            ).exclude(phase="queued", message=message).update(phase="queued", message=message)
            continue
        if waiting and phase == RunPhase.EXITED:
            # the job ended before its agent said a word: at once, with what its log says
            outcome = _run_ended_before_its_agent(run=run, driver=driver, reason=reason)
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
        if (
            phase == RunPhase.RUNNING
            and last
            and last > now - timezone.timedelta(seconds=3 * limit)
        ):
            continue  # alive on the backend: give it up to 3 × the timeout to report
        if run.handle:  # whatever the agent left behind must not run on beside a retry
            run_kill(run_id=run.pk, attempt=run.attempt, handle=run.handle)
        seconds = int((now - last).total_seconds()) if last else 0
        message = f"agent lost: no heartbeat for {seconds} s (backend says {phase})"
        if reason:
            message += f": {reason}"
        end, retry = EndReason.AGENT_LOST, True
        ended = _ended_by_backend(driver, run.handle) if phase == RunPhase.EXITED else None
        if ended:  # e.g. "Slurm: TIMEOUT (time limit)" fails; NODE_FAIL / PREEMPTED retry
            message, retry = f"{ended[0]}; the agent sent no final report", ended[1]
            end = EndReason.TERMINATED
        outcome = run_requeue_or_fail(run=run, reason=end, message=message, retry=retry)
        if outcome == RunState.PENDING:
            stats["requeued"] += 1
        elif outcome == RunState.FAILED:
            stats["failed"] += 1
    lost = Simulation.objects.filter(
        state=RunState.ADMITTED, admitted_at__lt=now - timezone.timedelta(seconds=dispatch_timeout)
    ).values_list("id", flat=True)
    ids = [str(x) for x in lost]
    if ids:
        dispatch_runs.delay(ids)
        stats["redispatched"] = len(ids)
    stats["settled"] = studies_settle()
    return stats


# --- reports from the agent --------------------------------------------------------------


def _queued_message(run: Simulation, status: str) -> str:
    """A run waiting in its backend's queue: the status on the first line, and below it what
    the message said before (how an earlier attempt ended), kept across the reaper's passes
    and dropped with the status line when the run starts (run_report_running_fenced)."""
    earlier = run.message
    if run.phase == "queued":  # the first line is an older status
        earlier = earlier.partition("\n")[2]
    elif earlier and run.attempt > 1 and not earlier.startswith("attempt "):
        earlier = f"attempt {run.attempt - 1} ended: {earlier}"
    return f"{status}\n{earlier}"[:5000] if earlier else status[:5000]


def _run_ended_before_its_agent(*, run: Simulation, driver, reason: str) -> str:
    """A job that ended before its agent reported anything: Python or the agent missing on
    the nodes, a node that failed at start. Failed with the job's own words (retried only
    where the backend says it ended the job itself, e.g. a node failure)."""
    ended = _ended_by_backend(driver, run.handle)
    text = ended[0] if ended else (reason or "it exited")
    message = f"the job on {run.backend.name} ended before its agent reported: {text}"
    tail_of = getattr(driver, "startup_log", None)
    tail = ""
    if tail_of is not None:
        work_dir = str(Path(settings.RUNS_DIR) / str(run.pk) / f"attempt-{run.attempt}")
        try:
            tail = tail_of(run_id=str(run.pk), attempt=run.attempt, work_dir=work_dir)
        except DriverError:
            tail = ""
    message += f"\nlast lines of agent.log:\n{tail}" if tail else "\n(agent.log is empty)"
    return run_requeue_or_fail(
        run=run,
        reason=EndReason.TERMINATED if ended else EndReason.DISPATCH_FAILED,
        message=message,
        retry=bool(ended and ended[1]),
    )


class StaleAttempt(Conflict):
    def __init__(self) -> None:
        super().__init__("this attempt was superseded; stop", code=ErrorCode.STALE_ATTEMPT)


def run_heartbeat(
    *, run: Simulation, attempt: int, phase: str = "", resources: dict | None = None
) -> bool:
    """Record a sign of life; answer whether the agent should stop."""
    stop = run_heartbeat_fenced(
        run_id=run.pk, attempt=attempt, token_hash=None, phase=phase, resources=resources
    )
    if stop is not None:
        return stop
    current = Simulation.objects.filter(pk=run.pk).values_list("state", "attempt").first()
    if current and current[1] == attempt and current[0] in TERMINAL_STATES:
        return True  # ended by the portal (cancel, policy): stop, but keep what comes in
    raise StaleAttempt()


def run_heartbeat_fenced(
    *,
    run_id,
    attempt: int,
    token_hash: str | None,
    phase: str = "",
    resources: dict | None = None,
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
    sets = ", ".join(f"{name} = %s" for name in fields)
    where, params = (
        "id = %s AND attempt = %s AND state IN (%s, %s)",
        [
            str(run_id),
            attempt,
            *STARTED_STATES,
        ],
    )
    if token_hash is not None:
        where += " AND token_hash = %s"
        params.append(token_hash)
    with connection.cursor() as cur:
        cur.execute(
            f"UPDATE {Simulation._meta.db_table} SET {sets} WHERE {where} RETURNING stop_requested",
            [*fields.values(), *params],
        )
        row = cur.fetchone()
    if row is None:
        return None
    if phase == "archiving":  # the steps are over: local cores go back to the queue now
        run_release_cores(run_id=run_id, attempt=attempt)
    return bool(row[0])


def run_release_cores(*, run_id, attempt: int) -> bool:
    """The run's solver has exited and the agent only archives results: on backends that run
    on the portal's own cores (EARLY_RELEASE_KINDS), those cores go back to the queue now
    rather than when the final report comes in. True when this call released them."""
    table, backends = Simulation._meta.db_table, Backend._meta.db_table
    kinds = ", ".join(["%s"] * len(EARLY_RELEASE_KINDS))
    with connection.cursor() as cur:
        cur.execute(
            f"UPDATE {table} r SET released_at = now() FROM {backends} b WHERE r.id = %s"
            " AND r.attempt = %s AND r.state = %s AND r.released_at IS NULL"
            f" AND b.id = r.backend_id AND b.kind IN ({kinds}) RETURNING r.tenant_id",
            [str(run_id), attempt, RunState.RUNNING, *EARLY_RELEASE_KINDS],
        )
        row = cur.fetchone()
    if row is None:
        return False
    from scheduler.tasks import schedule_tenant

    enqueue_on_commit(schedule_tenant, row[0])
    return True


def run_check_and_release_cores(*, run_id, attempt: int, token_hash: str) -> tuple[int, str] | None:
    """For a final report: the run's (attempt, token hash), for the caller to check, and in
    the same statement its cores given back (as run_release_cores) when the token and the
    attempt are right. None when there is no such run."""
    table, backends = Simulation._meta.db_table, Backend._meta.db_table
    kinds = ", ".join(["%s"] * len(EARLY_RELEASE_KINDS))
    with connection.cursor() as cur:
        cur.execute(
            f"WITH r AS (SELECT id, attempt, token_hash FROM {table} WHERE id = %s),"
            f" u AS (UPDATE {table} s SET released_at = now() FROM r, {backends} b"
            " WHERE s.id = r.id AND s.attempt = %s AND r.token_hash = %s AND s.state = %s"
            f" AND s.released_at IS NULL AND b.id = s.backend_id AND b.kind IN ({kinds})"
            " RETURNING s.tenant_id)"
            " SELECT r.attempt, r.token_hash, (SELECT tenant_id FROM u) FROM r",
            [str(run_id), attempt, token_hash, RunState.RUNNING, *EARLY_RELEASE_KINDS],
        )
        row = cur.fetchone()
    if row is None:
        return None
    if row[2] is not None:
        from scheduler.tasks import schedule_tenant

        enqueue_on_commit(schedule_tenant, row[2])
    return row[0], row[1]


def run_report_running_fenced(*, run_id, attempt: int, token_hash: str | None) -> bool | None:
    """The agent's `running` report in one statement (provisioning → running, fenced by the
    attempt, and by the token's hash when given): whether the agent should stop, or None
    when the fence held (a repeat, a stale attempt, a wrong token: the caller tells apart)."""
    now = timezone.now()
    where, params = (
        "r.id = %s AND r.attempt = %s AND r.state = %s",
        [
            str(run_id),
            attempt,
            RunState.PROVISIONING,
        ],
    )
    if token_hash is not None:
        where += " AND r.token_hash = %s"
        params.append(token_hash)
    with connection.cursor() as cur:
        cur.execute(
            f"UPDATE {Simulation._meta.db_table} r SET state = %s, started_at = %s,"
            # no longer queued on its backend (the agent's heartbeats name its phase): the
            # status line goes, what was below it (an earlier attempt's end) stays
            f" heartbeat_at = %s, phase = '', message = CASE WHEN r.phase <> 'queued' THEN"
            " r.message WHEN strpos(r.message, chr(10)) = 0 THEN ''"
            " ELSE substr(r.message, strpos(r.message, chr(10)) + 1) END"
            f" FROM {Study._meta.db_table} st WHERE {where}"
            " AND st.id = r.study_id RETURNING r.stop_requested, r.study_id, st.state",
            [RunState.RUNNING, now, now, *params],
        )
        row = cur.fetchone()
    if row is None:
        return None
    publish_runs_changed([run_id])
    if row[2] != StudyState.RUNNING:  # the study's first run to start
        from studies.tasks import refresh_study

        enqueue_on_commit(refresh_study, str(row[1]))
    return bool(row[0])


def run_report_state(
    *,
    run: Simulation,
    attempt: int,
    state: str,
    exit_code: int | None = None,
    reason: str = "",
    message: str = "",
    solver_converged: bool = False,
    iterations: int | None = None,
    last_time: float | None = None,
) -> bool:
    """Apply a state the agent reports. Idempotent for a repeated final state.

    `iterations` and `last_time` are the solver's own count (exact even where the agent had
    to thin out points); without them they are read from the stored residuals."""
    from telemetry.services import results_compute

    now = timezone.now()
    if state == RunState.RUNNING:
        stop = run_report_running_fenced(run_id=run.pk, attempt=attempt, token_hash=None)
        if stop is not None:
            return stop
        # a repeated report is fine; anything else is over
        current = (
            Simulation.objects.filter(pk=run.pk)
            .values_list("state", "attempt", "stop_requested")
            .first()
        )
        if current is None or current[:2] != (RunState.RUNNING, attempt):
            raise StaleAttempt()
        return bool(current[2])
    if state not in TERMINAL_STATES:
        raise ApplicationError(
            f"state must be running, completed, failed or cancelled; got {state!r}", field="state"
        )
    backend_end = None
    if state in (RunState.CANCELLED, RunState.FAILED):  # killed by the backend, unasked?
        backend_end = _backend_terminated(run=run, attempt=attempt)
    with transaction.atomic():
        current = (
            Simulation.objects.select_for_update(of=("self",))
            .select_related("study", "backend")
            .get(pk=run.pk)
        )
        if current.attempt != attempt:
            raise StaleAttempt()
        if current.state in TERMINAL_STATES:
            # ended by the portal (cancel, policy) or a repeat: keep the state, but the agent's
            # final data is in now, so objectives and trust are brought up to date
            results_compute(
                run=current,
                solver_converged=solver_converged
                or current.trust_detail.get("solver_converged", False),
                iterations=iterations,
                last_time=last_time,
            )
            current.results_at = now  # the agent is done with its files
            current.save(update_fields=_RESULT_FIELDS)
            publish_runs_changed([current.pk])
            return False
        if current.state not in STARTED_STATES:
            raise StaleAttempt()
        if backend_end is not None:  # the backend killed it (e.g. a Slurm time limit)
            text, retry = backend_end
            if (
                retry
                and current.attempt - current.dispatch_failures
                <= settings.WINDTUNNEL["MAX_RETRIES"]
            ):
                run_requeue_or_fail(run=current, reason=EndReason.TERMINATED, message=text)
                return False
            state, reason = RunState.FAILED, EndReason.TERMINATED
            message = f"{text}\n{message}".strip()
        if state == RunState.FAILED and exit_code in SIGFPE_EXIT_CODES:
            # OpenFOAM traps floating point exceptions: the solution blew up
            reason = EndReason.DIVERGED
            message = (
                f"the solver stopped on a floating point exception (diverged)\n{message}".strip()
            )
        current.state = state
        current.exit_code = exit_code
        current.phase = ""
        current.finished_at = now
        current.heartbeat_at = now
        current.started_at = current.started_at or now
        current.message = (message or "")[:5000]
        if state == RunState.COMPLETED:
            current.end_reason = EndReason.SUCCESS
        elif state == RunState.CANCELLED:
            current.end_reason = reason if reason in EndReason.values else EndReason.TERMINATED
        else:
            current.end_reason = (
                reason if reason in EndReason.values and reason else EndReason.EXIT_CODE
            )
        results_compute(
            run=current,
            solver_converged=solver_converged,
            iterations=iterations,
            last_time=last_time,
        )
        current.results_at = now  # the agent is done with its files
        current.save(update_fields=_FINAL_FIELDS)
        _after_run_ended(current)
    return False


_RESULT_FIELDS = [  # what results_compute and the agent's final report set
    "objectives",
    "iterations",
    "last_time",
    "trust",
    "trust_detail",
    "results_at",
    "updated_at",
]
_FINAL_FIELDS = [  # what a run's final report sets
    "state",
    "phase",
    "exit_code",
    "finished_at",
    "heartbeat_at",
    "started_at",
    "message",
    "end_reason",
    *_RESULT_FIELDS,
]


def run_stop_by_policy(*, run: Simulation, attempt: int, outcome: str, detail: str) -> bool:
    """A convergence policy ended the run: its resources return to the queue at once."""
    from telemetry.services import results_compute

    with transaction.atomic():
        current = (
            Simulation.objects.select_for_update(of=("self",))
            .select_related("study")
            .filter(pk=run.pk, attempt=attempt)
            .first()
        )
        if current is None or current.state not in STARTED_STATES:
            return False
        converged = outcome == "converged"
        current.state = RunState.COMPLETED if converged else RunState.FAILED
        current.end_reason = {"converged": EndReason.CONVERGED, "diverged": EndReason.DIVERGED}.get(
            outcome, EndReason.MAX_WALL_TIME
        )
        current.stop_requested = True
        current.stop_reason = current.end_reason
        current.message = f"stopped by the convergence policy: {detail}"[:5000]
        current.finished_at = timezone.now()
        results_compute(run=current, solver_converged=False)
        current.save()
        _stop_started_run(current)
        _after_run_ended(current)
    return True


def _backend_terminated(*, run: Simulation, attempt: int) -> tuple[str, bool] | None:
    """A run ended badly though the portal asked no stop: did the backend end it, and why?

    Slurm signals every process of a job at a time limit, so the agent reports either
    `terminated` or its solver's death by SIGTERM; only the backend knows it was TIMEOUT.
    """
    row = (
        Simulation.objects.select_related("backend")
        .filter(pk=run.pk, attempt=attempt, stop_requested=False)
        .exclude(handle="")
        .first()
    )
    if row is None:
        return None
    try:
        driver = _driver_for(row.backend)
    except DriverError:
        return None
    return _ended_by_backend(driver, row.handle)


def run_store_archive(*, run: Simulation, attempt: int, stream, max_bytes: int) -> int:
    """Save the agent's result archive for this attempt; returns its size."""
    current = Simulation.objects.filter(pk=run.pk).values_list("attempt", flat=True).first()
    if current != attempt:
        raise StaleAttempt()
    target_dir = Path(settings.ARCHIVE_DIR) / str(run.pk)
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / f"attempt-{attempt}.tar.gz"
    tmp = target.with_suffix(".part")
    size = 0
    with tmp.open("wb") as fh:
        while chunk := stream.read(1024 * 1024):
            size += len(chunk)
            if size > max_bytes:
                fh.close()
                tmp.unlink(missing_ok=True)
                raise ApplicationError(
                    f"the archive is larger than {max_bytes // (1024 * 1024)} MB",
                    code=ErrorCode.UPLOAD,
                )
            fh.write(chunk)
    tmp.replace(target)
    Simulation.objects.filter(pk=run.pk, attempt=attempt).update(
        archive_path=str(target), archive_bytes=size
    )
    return size


def run_archive_file(*, run: Simulation) -> Path | None:
    """The run's result archive: the one its agent uploaded, or, for a run whose files the
    portal reads itself (`results_dir`), one built from them now and kept for later
    downloads. None when there is none (yet)."""
    if run.archive_path and Path(run.archive_path).is_file():
        return Path(run.archive_path)
    if run.state not in TERMINAL_STATES or not run.results_dir or run.results_at is None:
        return None  # not over, or its agent may still be writing (its final report is due)
    case = Path(run.results_dir)
    if not case.is_dir() or case.is_symlink():
        return None
    from orchestration.agent.archive import build_archive

    target_dir = Path(settings.ARCHIVE_DIR) / str(run.pk)
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / f"attempt-{run.attempt}.tar.gz"
    fd, name = tempfile.mkstemp(dir=target_dir, suffix=".part")
    os.close(fd)
    try:  # symbolic links and special files in the case are left out (archive.py)
        build_archive(
            case, Path(name), max_bytes=settings.WINDTUNNEL["ARCHIVE_MAX_MB"] * 1024 * 1024
        )
        os.replace(name, target)
    except OSError as exc:
        Path(name).unlink(missing_ok=True)
        log.warning("cannot archive run %s from %s: %s", run.pk, case, exc)
        return None
    size = target.stat().st_size
    Simulation.objects.filter(pk=run.pk, attempt=run.attempt).update(
        archive_path=str(target), archive_bytes=size
    )
    run.archive_path, run.archive_bytes = str(target), size
    return target


def run_case_archive(*, run: Simulation, attempt: int) -> Path:
    """A tar.gz of the run's case source, for agents that cannot read the portal's files
    (VMs): plain files and directories only, symlinks left out. The caller deletes it."""
    if run.attempt != attempt:
        raise StaleAttempt()
    if run.state not in STARTED_STATES:
        raise Conflict(f"run {run.pk} is {run.state}: nothing to fetch")
    source = Path(run.study.case_dir)
    if not source.is_dir():
        raise NotFound("this run's case source is gone")
    fd, name = tempfile.mkstemp(prefix="case-", suffix=".tar.gz", dir=settings.DATA_DIR)
    os.close(fd)
    target = Path(name)
    with tarfile.open(target, mode="w:gz", compresslevel=1) as tar:
        for path in sorted(source.rglob("*")):
            if path.is_symlink() or not (path.is_file() or path.is_dir()):
                continue
            tar.add(path, arcname=str(path.relative_to(source)), recursive=False)
    return target


def run_files_delete(*, run_ids: list[str]) -> None:
    """The run directories and result archives of deleted runs (ids only: the rows are gone)."""
    for run_id in run_ids:
        for base in (settings.RUNS_DIR, settings.ARCHIVE_DIR):
            shutil.rmtree(Path(base) / str(run_id), ignore_errors=True)
