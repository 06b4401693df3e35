"""An adaptive study's next batch: made when the previous one has ended, once.

`study_refresh_state` (studies.state) enqueues Job.NEXT_BATCH with the number of batches
the study had when it saw no active run left; the task calls `adaptive_next_batch`, which
makes that batch only if the study still has that many (a conditional UPDATE on
studies_study.batches, under the study's row lock): a redelivered or duplicated task finds
the number moved on and does nothing.
"""

from __future__ import annotations

import logging

from django.db import transaction

from compute.capacity import capacity_of
from core import jobs
from core.exceptions import ApplicationError
from core.jobs import Job
from orchestration.planning import pareto, surrogate
from quotas.fit import runs_at_once_limited
from quotas.models import Quota
from studies import services, state
from studies.choices import ACTIVE_STATES, AdaptiveEnd, StudyState
from studies.models import Study
from studies.spec import spec_resolve
from studies.surrogate_map import stored_plan, study_models, study_observed, study_space
from studies.usage import usage_for_tenant

log = logging.getLogger(__name__)


def free_batch(study: Study) -> int:
    """Batch auto's size: the runs of this study's shape the tenant can run at once on its
    backend (its quota and the backend's capacity, studies.preview's figure), less those of
    its runs already running; at least 1."""
    resolved = spec_resolve(tenant=study.tenant, spec=study.spec)
    quota = Quota.objects.get(tenant=study.tenant)
    concurrent, _ = runs_at_once_limited(
        shape=services.resolved_shape(resolved),
        quota=quota,
        backend=capacity_of(resolved.backend),
    )
    running = usage_for_tenant(tenant_id=study.tenant_id).runs
    return max(1, concurrent - running)


def adaptive_next_batch(*, study_id, after: int) -> int:
    """Make batch `after + 1` of an adaptive study whose runs have all ended, or end its
    batches (budget spent, tolerance met, nothing left to learn from); how many runs were
    queued. Does nothing when the study has moved on (cancelled, ended, or that batch made)."""
    with transaction.atomic():
        study = Study.objects.select_for_update().filter(pk=study_id).first()
        if (
            study is None
            or study.spec.get("combine") != "adaptive"
            or study.adaptive_end
            or study.state not in (StudyState.SUBMITTED, StudyState.RUNNING)
            or study.batches != after
            or study.runs.filter(state__in=ACTIVE_STATES).exists()
        ):
            return 0
        try:  # its objectives may have been replaced since (PUT …/objectives/)
            plan = stored_plan(study)
        except ApplicationError as exc:
            log.warning("adaptive batch refused study=%s error=%s", study.pk, exc.message)
            plan = None
        total = study.runs.count()
        end, points = AdaptiveEnd.NONE, []
        if plan is None:
            end = AdaptiveEnd.ERROR
        elif total >= plan.budget:
            end = AdaptiveEnd.BUDGET
        else:
            observed = study_observed(study=study, objectives=plan.learned)
            models = study_models(observed=observed, plan=plan)
            size = min(plan.batch, plan.budget - total)
            if plan.batch_auto:
                try:  # the case, template or image may have changed since submission
                    size = min(size, free_batch(study))
                except ApplicationError as exc:
                    log.warning("adaptive batch refused study=%s error=%s", study.pk, exc.message)
                    end = AdaptiveEnd.ERROR
            if end:
                pass
            elif not models or (plan.uses_front and len(models) < len(plan.learned)):
                end = AdaptiveEnd.NO_RESULTS
            elif plan.uses_front:
                choice = pareto.next_batch(
                    models,
                    objectives=plan.goals,
                    constraints=plan.constraints,
                    found=observed.found,
                    size=size,
                    seed=plan.seed + after,
                    exclude=observed.points,
                )
            else:
                choice = surrogate.next_batch(
                    models,
                    size=size,
                    goal=plan.goal,
                    direction=plan.direction,
                    seed=plan.seed + after,
                    exclude=observed.points,
                )
            if not end:
                # the parameters held at one value go with every point
                fixed = study_space(study).constants()
                points = [{**fixed, **p} for p in choice.points]
                if plan.tolerance is not None and choice.score < plan.tolerance:
                    end, points = AdaptiveEnd.TOLERANCE, []
                elif not points:
                    end = AdaptiveEnd.EXHAUSTED
                log.info(
                    "adaptive batch study=%s batch=%d score=%.4g", study.pk, after + 1, choice.score
                )
        rows: list[services.Point] = []
        if points:
            try:  # the case, template or image may have changed since submission
                resolved = spec_resolve(tenant=study.tenant, spec=study.spec)
                last = study.runs.order_by("-index").values_list("index", flat=True).first()
                start = 0 if last is None else last + 1
                rows = [
                    (start + i, params, context)
                    for i, (params, context) in enumerate(resolved.contexts(points))
                ]
            except ApplicationError as exc:
                log.warning("adaptive batch refused study=%s error=%s", study.pk, exc.message)
                end = AdaptiveEnd.ERROR
        if end:
            study.adaptive_end = end
            study.save(update_fields=["adaptive_end", "updated_at"])
        else:
            # the fence: this batch is made once, whoever else saw the same end
            moved = Study.objects.filter(pk=study.pk, batches=after).update(batches=after + 1)
            if not moved:
                return 0
            services.runs_insert(study=study, resolved=resolved, points=rows)
            # batch auto: where this batch starts (its runs' batch is read from it)
            starts = list(study.batch_starts)
            if plan is not None and plan.batch_auto:
                starts = [*(starts or [0]), rows[0][0]]
            Study.objects.filter(pk=study.pk).update(
                run_count=total + len(rows),
                identity_inputs=study.identity_inputs,
                batch_starts=starts,
            )
            jobs.enqueue(Job.SCHEDULE_TENANT, study.tenant_id)
            return len(rows)
    state.study_refresh_state(study_id=study_id)  # the batches ended: so does the study
    return 0
