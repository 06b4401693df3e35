"""Operations: every tenant's running and queued runs as an operator sees them, and an
operator's stop of one (docs/admin.md, "Operations").

The stop is a user's cancel (studies.transitions.run_cancel) with the operator's reason: the
run's owner sees it as the run's message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.models import Case, IntegerField, QuerySet, Value, When

from core.exceptions import ApplicationError, ErrorCode, NotFound
from core.ids import parse_uuid
from studies.choices import ACTIVE_STATES, RunState
from studies.models import Run
from studies.transitions import run_cancel

# the order the page lists them in: what runs first, then what waits, oldest first
_STATE_ORDER = {
    RunState.RUNNING: 0,
    RunState.PROVISIONING: 1,
    RunState.ADMITTED: 2,
    RunState.PENDING: 3,
}
REASON_MAX = 500


def operations_runs(
    *,
    states: Sequence[str] = (),
    backend: str = "",
    tenant: str = "",
) -> QuerySet[Run]:
    """Every tenant's active runs (queued, admitted, provisioning, running), running ones
    first, each state's oldest first; narrowed to `states` (active ones only), a backend's
    name and a tenant's name. An unknown state is a 400 that names the ones there are."""
    active = [str(s) for s in ACTIVE_STATES]
    unknown = [s for s in states if s not in active]
    if unknown:
        raise ApplicationError(
            f"state must be one of {', '.join(active)}; got {unknown[0]!r}", field="state"
        )
    runs = Run.objects.filter(state__in=list(states) or active)
    if backend:
        runs = runs.filter(backend__name=backend)
    if tenant:
        runs = runs.filter(tenant__name=tenant)
    order = Case(
        *(When(state=state, then=Value(rank)) for state, rank in _STATE_ORDER.items()),
        output_field=IntegerField(),
    )
    return (
        runs.select_related("study__owner", "tenant", "backend")
        .annotate(state_order=order)
        .order_by("state_order", "started_at", "queued_at", "study_id", "index")
    )


def operations_run_get(*, run_id: Any) -> Run:
    """Any tenant's run by its id (operators only reach this), or a 404."""
    pk = parse_uuid(run_id)
    run = (
        Run.objects.select_related("study__owner", "tenant", "backend").filter(pk=pk).first()
        if pk is not None
        else None
    )
    if run is None:
        raise NotFound(f"No run with id {run_id!r}.")
    return run


def operations_run_stop(*, run: Run, by: Any, reason: str) -> Run:
    """Stop a run of any tenant, as its owner's cancel does, with the operator's `reason`
    (its owner reads it in the run's message). A 400 without a reason; a 409 when the run
    has ended already."""
    reason = " ".join((reason or "").split())
    if not reason:
        raise ApplicationError(
            "give a reason: the run's owner sees it in the run's message", field="reason"
        )
    if len(reason) > REASON_MAX:
        raise ApplicationError(
            f"the reason is {len(reason)} characters long; keep it to {REASON_MAX}",
            field="reason",
        )
    if not run_cancel(run=run, by=by, reason=reason):
        raise ApplicationError(
            f"the run already ended ({run.state}); nothing to stop",
            status=409,
            code=ErrorCode.STATE,
        )
    return operations_run_get(run_id=run.pk)
