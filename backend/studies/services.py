"""Writes on studies: create, edit, submit, extend, clone, cancel, delete; a study's state.

Runs are created here (pending, at submission) and change state only in studies.transitions.
What a write leaves to do in a higher layer (schedule the tenant, delete run files) is
enqueued by name (core.jobs).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from catalog.choices import ImageStatus
from catalog.images import study_image_ensure
from compute.capacity import capacity_of
from core import hooks, jobs
from core.exceptions import ApplicationError, Conflict, ErrorCode
from core.hooks import Hook
from core.jobs import Job
from quotas.fit import GB, Shape, queue_problem, run_fit_problem, storage_problem
from quotas.models import Quota
from studies.bulk import runs_copy
from studies.choices import (
    ACTIVE_STATES,
    ENDED_STUDY_STATES,
    HOLDING_STATES,
    AdaptiveEnd,
    Priority,
    RunState,
    StudyState,
    WaitReason,
)
from studies.events import publish_study
from studies.identity import identity_base, identity_inputs
from studies.models import Run, Study
from studies.space import parse_space, point_key
from studies.spec import ResolvedSpec, spec_resolve
from studies.transitions import runs_cancel_for_study, runs_cancel_queued, runs_reuse
from studies.usage import active_run_count, storage_used_bytes

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


def _iter_points(
    *, resolved: ResolvedSpec, start_index: int, skip: set[tuple] | None = None
) -> Iterator[Point]:
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


def _points_for(
    *, resolved: ResolvedSpec, start_index: int, skip: set[tuple] | None = None
) -> list[Point]:
    return list(_iter_points(resolved=resolved, start_index=start_index, skip=skip))


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
    points = _iter_points(resolved=resolved, start_index=0)
    first = next(points, None)
    inserted = 0
    if first is not None:
        resolved.check_case(first[2])  # the case may have changed since the draft
        inserted = runs_insert(
            study=study, resolved=resolved, points=itertools.chain([first], points)
        )
    study.run_count = inserted
    study.batches = 1 if resolved.adaptive else 0  # an adaptive study's initial design
    study.state = StudyState.SUBMITTED
    study.submitted_at = timezone.now()
    study.save()
    jobs.enqueue(Job.SCHEDULE_TENANT, study.tenant_id)
    return study


@transaction.atomic
def study_extend(
    *, study: Study, parameters: dict[str, Any] | None = None, budget: int | None = None
) -> int:
    """Add parameter values; only the points not already in the study get new runs (how
    many). An adaptive study is extended by raising its budget instead: its batches go on
    (0 runs now: the next batch is made by its task)."""
    study = Study.objects.select_for_update().get(pk=study.pk)
    if study.state == StudyState.DRAFT:
        raise Conflict(
            "a draft study is edited, not extended; submit it first", code=ErrorCode.STATE
        )
    if study.image is not None and study.image.status == ImageStatus.RETIRED:
        raise Conflict(
            f"the study's image {study.image.name} was retired by an operator: it gets no new "
            "runs; clone the study and choose another image (or name its packages)",
            code=ErrorCode.STATE,
        )
    if study.state == StudyState.CANCELLED and study.runs.filter(state=RunState.PENDING).exists():
        raise Conflict(
            "the study's cancel is still ending its queued runs; extend it once they are "
            "cancelled (in a few seconds)",
            code=ErrorCode.STATE,
        )
    if study.spec.get("combine") == "adaptive":
        return _adaptive_extend(study=study, parameters=parameters, budget=budget)
    if budget is not None:
        raise ApplicationError(
            "budget is for adaptive studies (combine: adaptive); give new parameter values instead",
            field="budget",
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
    points = _points_for(resolved=resolved, start_index=start, skip=existing)
    if not points:
        raise ApplicationError(
            f"nothing new to add: {_values_present(old, parameters, combine=combine)}; give "
            "values the study does not have",
            code=ErrorCode.EMPTY_SPACE,
            field=f"parameters.{next(iter(parameters))}",
        )
    # the stored spec describes every run the study has (clone reproduces them): the old and
    # the new values together
    spec["parameters"] = _merged_parameters(old, parameters, combine=combine)
    total = study.runs.count() + len(points)
    limit = settings.WINDTUNNEL["MAX_RUNS_PER_STUDY"]
    if total > limit:
        raise ApplicationError(
            f"the extended study would have {total:,} runs; at most {limit:,}",
            code=ErrorCode.TOO_MANY_RUNS,
            field="parameters",
        )
    queue_check(tenant_id=study.tenant_id, adding=len(points))
    runs_insert(study=study, resolved=resolved, points=points)
    study.spec = spec
    study.run_count = total
    if points:
        study.state = StudyState.SUBMITTED if study.state != StudyState.RUNNING else study.state
        study.finished_at = None
        jobs.enqueue(Job.SCHEDULE_TENANT, study.tenant_id)
    study.save()
    return len(points)


def _adaptive_extend(*, study: Study, parameters: Any, budget: int | None) -> int:
    """Raise an adaptive study's budget: its batches resume where they stopped (or go on)."""
    old = int(study.spec["adaptive"]["budget"])
    if parameters:
        raise ApplicationError(
            "an adaptive study chooses its own points: extend it with a larger budget "
            f'(e.g. {{"budget": {old + 10}}}), or clone it with other bounds',
            field="parameters",
        )
    if budget is None or budget <= old:
        raise ApplicationError(
            f"budget: give a budget above the study's {old} runs to extend it",
            field="budget",
        )
    limit = settings.WINDTUNNEL["MAX_RUNS_PER_STUDY"]
    if budget > limit:
        raise ApplicationError(
            f"budget: at most {limit:,} runs a study", code=ErrorCode.TOO_MANY_RUNS, field="budget"
        )
    if study.state == StudyState.CANCELLED:
        raise Conflict("a cancelled study is not extended; clone it", code=ErrorCode.STATE)
    storage_check(quota=Quota.objects.select_for_update().get(tenant_id=study.tenant_id))
    spec = dict(study.spec)
    spec["adaptive"] = {**spec["adaptive"], "budget": budget}
    study.spec = spec
    resumed = bool(study.adaptive_end)
    study.adaptive_end = AdaptiveEnd.NONE
    if resumed and not study.runs.filter(state__in=ACTIVE_STATES).exists():
        study.state, study.finished_at = StudyState.RUNNING, None
        jobs.enqueue(Job.NEXT_BATCH, str(study.pk), study.batches)
    study.save()
    return 0


def _values_present(old: dict, added: dict, *, combine: str) -> str:
    """The values asked for that the study has already, said per parameter ("aoa 0, 4 are
    in the study already"), for an extension that would add no run."""
    before = {a.name: set(a.values) for a in parse_space(old, combine=combine).axes}
    asked = parse_space({**old, **added}, combine=combine).axes
    said = []
    for axis in asked:
        if axis.name in added:
            there = [v for v in axis.values if v in before.get(axis.name, set())]
            if there:
                said.append(
                    f"{axis.name} {', '.join(f'{v:g}' if isinstance(v, float) else str(v) for v in there)}"
                )
    return ("; ".join(said) or "every run these values make") + " already in the study"


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
    # a cancelled study's queued runs may still be ending in the background: they never
    # start, and go with the study
    active = HOLDING_STATES if study.state == StudyState.CANCELLED else ACTIVE_STATES
    if study.state != StudyState.DRAFT and study.runs.filter(state__in=active).exists():
        raise Conflict(
            "this study still has queued or running runs; cancel it first", code=ErrorCode.STATE
        )
    run_ids = [str(i) for i in study.runs.values_list("pk", flat=True)]
    # the results other studies' runs reuse handed over to them, the runs' telemetry deleted
    hooks.call(Hook.STUDY_DELETING, study=study)
    _runs_delete(study_id=study.pk)
    study.delete()  # its runs gone, what is left to cascade is a handful of rows
    # what it stored is freed: runs held for the tenant's storage quota may start now
    jobs.enqueue(Job.SCHEDULE_TENANT, study.tenant_id)
    # the runs' directories and archives go too (in the worker: thousands of folders)
    for i in range(0, len(run_ids), 500):
        jobs.enqueue(Job.DELETE_RUN_FILES, run_ids[i : i + 500])


def _runs_delete(*, study_id: Any) -> None:
    """A study's runs deleted as a set: runs of other studies that reused one of them lose
    the link (as `on_delete=SET_NULL` says), then one DELETE. Django's cascade walked them in
    batches with a query per batch and relation: 1,014 queries and ~7-15 s for 100,000 runs.
    Rows of higher layers that point at the runs (their telemetry) are their owners' to
    delete first (Hook.STUDY_DELETING); the database's foreign keys refuse the commit
    otherwise, so nothing is left pointing at a deleted run."""
    table = connection.ops.quote_name(Run._meta.db_table)
    with connection.cursor() as cur:
        cur.execute(
            f"UPDATE {table} SET reused_from_id = NULL WHERE study_id <> %s AND reused_from_id"
            f" IN (SELECT id FROM {table} WHERE study_id = %s)",
            [study_id, study_id],
        )
        cur.execute(f"DELETE FROM {table} WHERE study_id = %s", [study_id])


@transaction.atomic
def study_cancel(*, study: Study, by) -> int:
    """Cancel a study at once, whatever its size: the study is marked cancelled and its runs
    that hold resources (at most a quota's worth) are cancelled now, their jobs stopped on
    their backends; its queued runs, up to 100,000, are ended in chunks by the worker
    (study_cancel_queued), and from this commit on nothing admits them and every read shows
    them cancelled (selectors.study_progress, the runs' serializer). How many runs were
    cancelled now."""
    study = Study.objects.select_for_update().get(pk=study.pk)
    if study.state == StudyState.DRAFT:
        raise Conflict(
            "a draft study has no runs to cancel; delete it instead", code=ErrorCode.STATE
        )
    if study.state == StudyState.CANCELLED:
        raise Conflict("the study is cancelled already", code=ErrorCode.STATE)
    between_batches = (
        study.spec.get("combine") == "adaptive"
        and not study.adaptive_end
        and study.state not in ENDED_STUDY_STATES
    )
    if (
        not between_batches
        and not study.runs.filter(state__in=(RunState.PENDING, *HOLDING_STATES)).exists()
    ):
        raise Conflict(
            f"the study is {study.get_state_display().lower()}: no run is queued or running, "
            "so there is nothing to cancel",
            code=ErrorCode.STATE,
        )
    # the fence: admission holds the tenant's quota row for its whole pass, so a pass under
    # way ends before this commits and a later one reads the study as cancelled
    # (scheduler.admission skips a cancelled study's queued runs): none is admitted after
    Quota.objects.select_for_update().filter(tenant_id=study.tenant_id).first()
    count = runs_cancel_for_study(study=study, by=by, queued=False)
    if between_batches:  # and no further batch
        study.adaptive_end = AdaptiveEnd.CANCELLED
    study.state = StudyState.CANCELLED
    study.finished_at = timezone.now()
    study.save(update_fields=["state", "finished_at", "adaptive_end", "updated_at"])
    who = getattr(by, "username", None) or "the system"
    jobs.enqueue(Job.CANCEL_QUEUED_RUNS, str(study.pk), who)
    transaction.on_commit(lambda: publish_study(study_id=study.pk, kind="study", payload={}))
    return count


CANCEL_CHUNK = 5000  # queued runs per statement of the background cancel


def study_cancel_queued(*, study_id: Any, who: str = "the system") -> int:
    """The background half of study_cancel: a cancelled study's queued runs ended, a range
    of CANCEL_CHUNK indexes per transaction, the study's counts published after each
    ("cancelling: 40,000 of 100,000"); then any run that holds resources is cancelled as
    study_cancel does (none should: the fence); then the study's end is notified.
    Idempotent: a repeat finds nothing left. How many queued runs it ended."""
    study = Study.objects.filter(pk=study_id, state=StudyState.CANCELLED).first()
    if study is None or study.finished_at is None:
        return 0
    last = study.runs.order_by("-index").values_list("index", flat=True).first()
    done = 0
    for start in range(0, (last or 0) + 1, CANCEL_CHUNK):
        with transaction.atomic():
            ids = runs_cancel_queued(
                study_id=study.pk,
                who=who,
                cancelled_at=study.finished_at,
                start=start,
                stop=start + CANCEL_CHUNK,
            )
        done += len(ids)
        if ids:
            publish_study(study_id=study.pk, kind="study", payload={})
    with transaction.atomic():
        runs_cancel_for_study(study=study, queued=False)
        # its subscribers are told once its runs are all ended (the event's key is the
        # study's end: a repeat of this job tells no one twice)
        jobs.enqueue(Job.NOTIFY_STUDY_ENDED, str(study.pk))
    return done


def study_refresh_state(*, study_id) -> None:
    """Derive the study's state from its runs (called after every run transition)."""
    with transaction.atomic():
        study = Study.objects.select_for_update().filter(pk=study_id).first()
        if study is None or study.state in (StudyState.DRAFT, StudyState.CANCELLED):
            return
        states = _states_present(study.pk)
        if not states:
            return
        active = states & {RunState.PENDING, *HOLDING_STATES}
        if not active and study.spec.get("combine") == "adaptive" and not study.adaptive_end:
            # a batch has ended: the next one is made (or the batches end) by its own task,
            # fenced by the batch number; the study runs on until then
            jobs.enqueue(Job.NEXT_BATCH, str(study.pk), study.batches)
            active = {RunState.RUNNING}
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
            # the study's end, found once: refreshes of one study queue on its row lock, so
            # of two last runs ending together only the first refresh sees it go from active
            ended = finished is not None and study.state not in ENDED_STUDY_STATES
            study.state, study.finished_at = new, finished
            study.save(update_fields=["state", "finished_at", "updated_at"])
            transaction.on_commit(
                lambda: publish_study(study_id=study.pk, kind="study", payload={})
            )
            if ended:
                jobs.enqueue(Job.NOTIFY_STUDY_ENDED, str(study.pk))


_STATES_PRESENT_SQL = (  # a probe of the (study, state) index per state: not a scan of the runs
    f"SELECT s FROM unnest(%s::text[]) AS s WHERE EXISTS"
    f" (SELECT 1 FROM {Run._meta.db_table} r WHERE r.study_id = %s AND r.state = s)"
)


def _states_present(study_id: Any) -> set[str]:
    """The states the study's runs are in: a probe per state, so a refresh after each run's
    end costs the same with 100 runs as with 100,000."""
    with connection.cursor() as cur:
        cur.execute(_STATES_PRESENT_SQL, [[s.value for s in RunState], str(study_id)])
        return {row[0] for row in cur.fetchall()}


def studies_settle() -> int:
    """Refresh studies still shown as submitted or running with no active run left (their
    refresh after the last run's end was lost); how many."""
    runs = Run.objects.filter(study_id=OuterRef("pk"))
    ids = list(
        Study.objects.filter(state__in=[StudyState.SUBMITTED, StudyState.RUNNING])
        .filter(Exists(runs))  # a study without runs has no state to derive: left alone
        .exclude(Exists(runs.filter(state__in=ACTIVE_STATES)))
        .values_list("pk", flat=True)
    )
    for study_id in ids:
        jobs.send(Job.REFRESH_STUDY, str(study_id))
    # a cancel whose background half was lost (a worker restarted): it is done again
    cancelling = Study.objects.filter(state=StudyState.CANCELLED).filter(
        Exists(runs.filter(state=RunState.PENDING))
    )
    for study_id in cancelling.values_list("pk", flat=True):
        jobs.send(Job.CANCEL_QUEUED_RUNS, str(study_id))
    return len(ids)
