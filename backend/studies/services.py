"""Writes on studies: create, edit, submit, clone, delete; the runs a submission queues.

Runs are created here (pending, at submission; an extension adds some through runs_insert,
studies.extension) and change state only in studies.transitions. A study's state once
submitted (derived from its runs, or cancelled) is studies.state's. What a write leaves to
do in a higher layer (schedule the tenant, delete run files) is enqueued by name
(core.jobs); what must happen in its transaction, by hook (core.hooks).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Any

from django.db import transaction
from django.utils import timezone

from catalog.images import study_image_ensure
from compute.capacity import capacity_of
from core import jobs
from core.exceptions import ApplicationError, Conflict, ErrorCode
from core.jobs import Job
from quotas.fit import (
    GB,
    Shape,
    queue_problem,
    run_fit_problem,
    runs_at_once_limited,
    storage_problem,
)
from quotas.models import Quota
from studies.bulk import runs_copy
from studies.choices import (
    Priority,
    RunState,
    StudyState,
    WaitReason,
)
from studies.estimate import study_estimate
from studies.identity import identity_base, identity_inputs
from studies.models import Run, Study
from studies.space import point_key
from studies.spec import ResolvedSpec, spec_resolve
from studies.transitions import runs_reuse
from studies.usage import active_run_count, storage_used_bytes


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
    study.reuse = spec.get("reuse", True) is not False
    study.priority = PRIORITIES[spec.get("priority") or "normal"]


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
        study_submit(study=study, resolved=resolved)
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


PRIORITIES = {p.label: p.value for p in Priority}  # the spec's words → the stored values


Point = tuple[int, dict[str, Any], dict[str, Any]]  # a run's index, parameters and context


def points_iter(
    *, resolved: ResolvedSpec, start_index: int, skip: set[tuple] | None = None
) -> Iterator[Point]:
    """The runs' points of a resolved spec, numbered from `start_index`: (index, parameters,
    context). With `skip`, the points whose key is in it are left out, and those made are
    added to it (an extension skips the points its study has)."""
    names = [a.name for a in resolved.space.axes]
    index = start_index
    for params, context in resolved.points():
        if skip is not None:
            key = point_key(params, names)
            if key in skip:
                continue
            skip.add(key)
        yield index, params, context
        index += 1


def runs_insert(*, study: Study, resolved: ResolvedSpec, points: Iterable[Point]) -> int:
    """The runs of `points`, queued now, in one COPY (studies/bulk.py), each with its
    identity; then, unless the study says `reuse: false`, those identical to a completed
    run of the tenant are reused at once (studies.transitions.runs_reuse). How many were
    written."""
    study.identity_inputs = identity_inputs(
        case_dir=resolved.case_dir,
        solver=resolved.solver,
        steps=resolved.steps,
        decompose=resolved.decompose,
        processes=resolved.processes,
        env=resolved.env,
        convergence=resolved.convergence,
        fields=list((study.spec or {}).get("fields") or ()),
        image=study.image,
        warm_start=bool((study.spec or {}).get("warm_start")),
    )
    template = Run(
        study=study,
        tenant_id=study.tenant_id,
        backend=resolved.backend,
        processes=resolved.processes,
        nodes=resolved.nodes,
        memory_gb=resolved.memory_gb,
        queued_at=timezone.now(),
        state=RunState.PENDING,
        wait_reason=WaitReason.QUEUED,
        priority=study.priority,
    )
    count = runs_copy(
        template=template, points=points, identity_base=identity_base(study.identity_inputs)
    )
    if study.reuse:  # the callers save the study (and its identity_inputs) after this
        runs_reuse(study=study)
    return count


def single_run_problem(*, tenant: Any, resolved: ResolvedSpec) -> str | None:
    """Why a single run of this spec can never run (quota, backend, cloud project), or None."""
    problem = run_fit_problem(
        shape=resolved_shape(resolved),
        quota=Quota.objects.get(tenant=tenant),
        backend=capacity_of(resolved.backend),
    )
    return problem.for_one_run() if problem else None


def queue_check(*, tenant_id: int, adding: int) -> None:
    """Refuse `adding` more runs while the tenant's storage quota is used up (storage_check),
    or past the quota's cap on queued and running runs (a 400 that names the limit and how
    many are queued). Holds the tenant's quota row until the transaction ends, so two
    submissions at once cannot both pass it."""
    quota = Quota.objects.select_for_update().get(tenant_id=tenant_id)
    storage_check(quota=quota)
    active = active_run_count(tenant_id=tenant_id)
    problem = queue_problem(quota=quota, active=active, adding=adding)
    if problem:
        raise ApplicationError(
            problem,
            code=ErrorCode.QUOTA,
            field="parameters",
            details={"max_queued_runs": quota.max_queued_runs, "active": active, "adding": adding},
        )


def storage_check(*, quota: Quota) -> None:
    """Refuse new runs while the tenant stores as much as its storage quota allows (or more):
    a 400 naming storage_gb, the figures and what to do. They would only wait in the queue
    (admission holds them) for files to be deleted; a draft may still be saved."""
    stored = storage_used_bytes(tenant_id=quota.tenant_id)
    problem = storage_problem(quota=quota, stored_bytes=stored)
    if problem:
        raise ApplicationError(
            problem.for_one_run(),
            code=ErrorCode.QUOTA,
            field="storage_gb",
            details={"storage_gb": quota.storage_gb, "stored_gb": round(stored / GB, 3)},
        )


def resolved_shape(resolved: ResolvedSpec) -> Shape:
    return Shape(cores=resolved.processes, memory_gb=resolved.memory_gb, nodes=resolved.nodes)


@transaction.atomic
def study_submit(*, study: Study, resolved: ResolvedSpec | None = None) -> Study:
    """Queue a draft's runs. `resolved` is its spec resolved in this same transaction (by
    study_create), or None to resolve it now (the case may have changed since the draft)."""
    study = Study.objects.select_for_update().get(pk=study.pk)
    if study.state != StudyState.DRAFT:
        raise Conflict(
            f"this study was already submitted (state {study.state})", code=ErrorCode.STATE
        )
    if resolved is None:
        resolved = spec_resolve(tenant=study.tenant, spec=study.spec)
    problem = single_run_problem(tenant=study.tenant, resolved=resolved)
    if problem:
        raise ApplicationError(problem, code=ErrorCode.QUOTA, field="resources")
    _apply(study, resolved, study.spec)
    # an image composed from packages is created now and built while the runs wait
    study.image = study_image_ensure(choice=resolved.image, user=study.owner)
    queue_check(tenant_id=study.tenant_id, adding=resolved.run_count)
    # the points stream into the COPY as they are made: PostgreSQL inserts while Python
    # computes the next ones, and 100,000 points are never all in memory at once
    points = points_iter(resolved=resolved, start_index=0)
    first = next(points, None)
    inserted = 0
    if first is not None:
        resolved.check_case(first[2])  # the case may have changed since the draft
        inserted = runs_insert(
            study=study, resolved=resolved, points=itertools.chain([first], points)
        )
    study.run_count = inserted
    study.cost_estimate = _estimate(study, resolved)  # shown beside what it used
    study.batches = 1 if resolved.adaptive else 0  # an adaptive study's initial design
    study.state = StudyState.SUBMITTED
    study.submitted_at = timezone.now()
    study.save()
    jobs.enqueue(Job.SCHEDULE_TENANT, study.tenant_id)
    return study


def _estimate(study: Study, resolved: ResolvedSpec) -> dict[str, Any]:
    """What the preview would say the study costs, at the runs that fit at once now."""
    concurrent, _ = runs_at_once_limited(
        shape=resolved_shape(resolved),
        quota=Quota.objects.get(tenant_id=study.tenant_id),
        backend=capacity_of(resolved.backend),
    )
    return study_estimate(tenant=study.tenant, resolved=resolved, concurrent=concurrent)


@transaction.atomic
def study_clone(*, study: Study, owner, name: str | None = None) -> Study:
    spec = dict(study.spec)
    spec["name"] = name or f"{study.name} (copy)"[:200]
    clone = study_create(tenant=study.tenant, owner=owner, spec=spec)
    clone.cloned_from = study
    clone.save(update_fields=["cloned_from"])
    return clone
