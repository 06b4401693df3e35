"""A submitted study extended: new parameter values add the runs of the points it has not
got; an adaptive study gets a larger budget instead, and its batches go on."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction

from catalog.choices import ImageStatus
from core import jobs
from core.exceptions import ApplicationError, Conflict, ErrorCode
from core.jobs import Job
from quotas.models import Quota
from studies.choices import ACTIVE_STATES, AdaptiveEnd, RunState, StudyState
from studies.models import Study
from studies.services import points_iter, queue_check, runs_insert, storage_check
from studies.space import parse_space, point_key
from studies.spec import spec_resolve


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
    points = list(points_iter(resolved=resolved, start_index=start, skip=existing))
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
