"""Objectives after the fact: a study's objectives edited or added once its runs have data,
every finished run's objectives and trust flag recomputed from its stored series (nothing
is run again; the series are telemetry's, which recomputes each run through
Hook.RUN_RESULTS_RECOMPUTE). Runs still going pick the new objectives up when they end."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from catalog.inspection import template_inspection
from core import hooks
from core.exceptions import Conflict, ErrorCode
from core.hooks import Hook
from studies import transitions
from studies.choices import TERMINAL_STATES, StudyState
from studies.events import publish_runs_changed, publish_study
from studies.models import Run, Study
from studies.objectives import objectives_check_series, objectives_resolve
from studies.spec import spec_validate


def study_inspection(*, study: Study) -> dict[str, Any]:
    """The inspection of the study's case (its upload's, or its template's)."""
    if study.upload is not None:
        return study.upload.inspection or {}
    if study.template is not None:
        return template_inspection(path=study.template.path)
    return {}


def study_objectives_update(*, study: Study, objectives: Any, trust: Any = None) -> int:
    """Replace the study's objectives, and its trust rules when `trust` is given (checked as
    the study spec checks them: shape, names, expressions, and every series one its case can
    send); recompute every finished run's objectives and trust flag from its stored series.
    Return how many runs were recomputed."""
    if study.state == StudyState.DRAFT:
        raise Conflict(
            "a draft's objectives are edited with the study (PUT /api/v1/studies/{id}/)",
            code=ErrorCode.STATE,
        )
    spec = {**study.spec, "objectives": objectives}
    if trust is not None:
        spec["trust"] = trust
    spec_validate(spec)
    run = Run.objects.filter(study=study).only("context").first()
    scope = set(study.constants) | set(study.derived) | set(run.context if run else {})
    resolved = objectives_resolve(objectives, names_in_scope=scope)
    objectives_check_series(
        objectives=resolved, convergence=study.convergence, inspection=study_inspection(study=study)
    )
    with transaction.atomic():
        locked = Study.objects.select_for_update().get(pk=study.pk)
        locked.objectives = resolved
        locked.spec = {**locked.spec, "objectives": objectives}
        if trust is not None:
            locked.spec["trust"] = trust
        locked.save(update_fields=["objectives", "spec", "updated_at"])
    ids = list(
        Run.objects.filter(study=study, state__in=TERMINAL_STATES).values_list("pk", flat=True)
    )
    for pk in ids:
        with transaction.atomic():
            current = Run.objects.select_for_update(of=("self",)).select_related("study").get(pk=pk)
            hooks.call(
                Hook.RUN_RESULTS_RECOMPUTE,
                run=current,
                solver_converged=bool(current.trust_detail.get("solver_converged", False)),
                iterations=current.iterations,
                last_time=current.last_time,
            )
            current.save(update_fields=[*transitions.RESULT_FIELDS, "updated_at"])
    transaction.on_commit(lambda: publish_runs_changed(ids))
    transaction.on_commit(
        lambda: publish_study(
            study_id=study.pk, kind="study.objectives", payload={"objectives": resolved}
        )
    )
    study.refresh_from_db()
    return len(ids)
