"""A tenant's monthly core-hour budget, enforced: once its runs have used the month's
core-hours, nothing more is admitted and its queued runs say why (and until when); runs
that already run finish; raising the budget lets the queue go on at the next pass."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from dispatch.tests.conftest import submitted
from quotas.models import Quota
from quotas.services import quota_update
from scheduler.admission import admit
from studies.choices import RunState, WaitReason
from studies.models import Run
from studies.usage import budget_period_end, budget_period_start

SWEEP = {
    "name": "budget",
    "template": "cavity",
    "backend": "bench",
    "reuse": False,  # each study's runs run: none takes another's results
    "parameters": {"lid_velocity": {"values": [0.5, 1, 1.5, 2]}},
}


def _budget(api, core_hours: float | None) -> None:
    quota_update(
        quota=Quota.objects.get(tenant=api.tenant), limits={"core_hours_budget": core_hours}
    )


def _used_this_month(api, core_hours: float) -> float:
    """A run of the tenant that ran this month for up to `core_hours` on one core, ended now:
    the core-hours it used."""
    study = {**SWEEP, "name": "earlier", "parameters": {"lid_velocity": 0.1}}
    run = Run.objects.get(study_id=submitted(api, study)["id"])
    now = timezone.now()
    start = max(now - timedelta(hours=core_hours), budget_period_start(now=now))
    hours = (now - start).total_seconds() / 3600
    Run.objects.filter(pk=run.pk).update(
        state=RunState.COMPLETED, processes=1, started_at=start, finished_at=now
    )
    return hours


def test_a_tenant_over_its_monthly_budget_admits_nothing_and_its_runs_say_until_when(api, bench):
    used = _used_this_month(api, core_hours=2.0)
    _budget(api, used / 2)
    study = submitted(api, SWEEP)["id"]
    assert admit(tenant_id=api.tenant.id, publish=False) == []
    queued = list(Run.objects.filter(study_id=study))
    assert {r.state for r in queued} == {RunState.PENDING}
    assert {r.wait_reason for r in queued} == {WaitReason.BUDGET}
    resets = budget_period_end(start=budget_period_start(now=timezone.now()))
    detail = queued[0].wait_detail
    assert "monthly core-hour budget" in detail and f"{resets:%-d %B %Y}" in detail, detail
    # the run page says it in words too
    body = api.get(f"/api/v1/runs/{queued[0].pk}/").json()
    assert body["wait_reason"] == "core_hour_budget" and "used up" in body["wait_detail"]
    # the admin raises the budget: the next pass admits the queue
    _budget(api, used * 10)
    assert len(admit(tenant_id=api.tenant.id, publish=False)) == 4


def test_a_tenant_below_its_budget_or_without_one_is_admitted(api, bench):
    used = _used_this_month(api, core_hours=1.0)
    _budget(api, used * 3)
    first = submitted(api, {**SWEEP, "name": "below"})["id"]
    assert len(admit(tenant_id=api.tenant.id, publish=False)) == 4
    _budget(api, None)
    Run.objects.filter(study_id=first).update(state=RunState.COMPLETED)
    second = submitted(api, {**SWEEP, "name": "no budget"})["id"]
    assert len(admit(tenant_id=api.tenant.id, publish=False)) == 4
    assert Run.objects.filter(study_id=second, state=RunState.ADMITTED).count() == 4
