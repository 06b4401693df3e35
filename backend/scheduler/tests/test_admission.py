"""Admission within quotas, on real PostgreSQL, with concurrent schedulers."""

import random
import threading

import pytest
from django.db import close_old_connections, connection, transaction
from django.utils import timezone

from catalog.models import Backend
from quotas.selectors import usage_for_tenant
from scheduler.services import schedule_tenant
from studies.choices import HOLDING_STATES, RunState
from studies.models import Simulation
from studies.services import study_create

SPEC = {
    "name": "s",
    "template": "cavity",
    "parameters": {"lid_velocity": {"linspace": [0.5, 2, 50]}},
}


def _noop_backend(cores=64):
    return Backend.objects.update_or_create(
        name="bench", defaults={"kind": "noop", "cores": cores, "memory_gb": 256, "max_nodes": 1}
    )[0]


@pytest.mark.django_db(transaction=True)
def test_concurrent_schedulers_never_exceed_the_quota(make_tenant, catalog):
    tenant = make_tenant(cores=4, memory_gb=100, max_runs=100)
    _noop_backend()
    study = study_create(
        tenant=tenant, owner=tenant.user, spec={**SPEC, "backend": "bench"}, submit=True
    )
    assert study.runs.count() == 50
    stop = threading.Event()
    peaks: list[int] = []
    errors: list[BaseException] = []

    def guard(fn):
        def run():
            try:
                fn()
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)
            finally:
                connection.close()

        return run

    def scheduler():
        while not stop.is_set():
            schedule_tenant(tenant_id=tenant.id, dispatch=False)

    def finisher():
        rng = random.Random(1)
        while not stop.is_set():
            held = list(
                Simulation.objects.filter(study=study, state__in=HOLDING_STATES).values_list(
                    "id", flat=True
                )
            )
            if held:
                Simulation.objects.filter(id=rng.choice(held), state=RunState.ADMITTED).update(
                    state=RunState.COMPLETED, finished_at=timezone.now()
                )
            if (
                not Simulation.objects.filter(study=study)
                .exclude(state=RunState.COMPLETED)
                .exists()
            ):
                stop.set()

    def monitor():
        while not stop.is_set():
            peaks.append(usage_for_tenant(tenant_id=tenant.id).cores)

    threads = [threading.Thread(target=guard(f)) for f in [scheduler] * 6 + [finisher, monitor]]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=180)
    stop.set()
    close_old_connections()
    assert not errors, errors
    assert max(peaks) <= 4, max(peaks)
    assert max(peaks) == 4  # and the quota was actually used
    assert Simulation.objects.filter(study=study, state=RunState.COMPLETED).count() == 50


@pytest.mark.django_db(transaction=True)
def test_fifo_across_studies_and_queued_runs_say_why_they_wait(make_tenant, catalog):
    tenant = make_tenant(cores=3, memory_gb=100, max_runs=100)
    _noop_backend(cores=64)
    # one transaction: the scheduling that submission asks for (after commit) cannot race
    # this call when a test stack's worker is running
    with transaction.atomic():
        first = study_create(
            tenant=tenant,
            owner=tenant.user,
            spec={**SPEC, "name": "a", "backend": "bench", "parameters": {"lid_velocity": [1, 2]}},
            submit=True,
        )
        second = study_create(
            tenant=tenant,
            owner=tenant.user,
            spec={
                **SPEC,
                "name": "b",
                "backend": "bench",
                "parameters": {"lid_velocity": [1, 2, 3]},
            },
            submit=True,
        )
        admitted = schedule_tenant(tenant_id=tenant.id, dispatch=False)
    assert len(admitted) == 3
    assert set(first.runs.values_list("state", flat=True)) == {RunState.ADMITTED}
    waiting = second.runs.filter(state=RunState.PENDING)
    assert waiting.count() == 2
    assert all(r.wait_reason == "quota" and "cores (3+1 > 3)" in r.wait_detail for r in waiting)


@pytest.mark.django_db(transaction=True)
def test_backend_capacity_holds_runs_back_with_its_own_reason(make_tenant, catalog):
    tenant = make_tenant(cores=16, memory_gb=100, max_runs=100)
    _noop_backend(cores=2)
    with transaction.atomic():  # as above: no race with a running worker's scheduling
        study = study_create(
            tenant=tenant,
            owner=tenant.user,
            spec={**SPEC, "backend": "bench", "parameters": {"lid_velocity": [1, 2, 3, 4]}},
            submit=True,
        )
        assert len(schedule_tenant(tenant_id=tenant.id, dispatch=False)) == 2
    waiting = list(study.runs.filter(state=RunState.PENDING))
    assert [r.wait_reason for r in waiting] == ["backend_capacity"] * 2
    assert "bench: cores (2+1 > 2)" in waiting[0].wait_detail


@pytest.mark.django_db(transaction=True)
def test_a_run_larger_than_the_quota_is_refused_at_submission(make_tenant, catalog):
    from core.exceptions import ApplicationError

    tenant = make_tenant(cores=2)
    with pytest.raises(ApplicationError, match="quota allows 2 cores"):
        study_create(
            tenant=tenant,
            owner=tenant.user,
            spec={**SPEC, "resources": {"processes": 4}},
            submit=True,
        )
