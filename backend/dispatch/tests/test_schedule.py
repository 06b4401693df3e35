"""A scheduling pass starts the few runs it admits itself and hands a larger admission to
dispatch tasks; each run's live events take one seq per change, none skipped."""

from __future__ import annotations

from catalog.models import Backend
from core.jobs import Job
from dispatch.start import INLINE_DISPATCH, schedule_and_start
from studies.models import Run
from studies.services import study_create


def _study(tenant, runs: int):
    Backend.objects.update_or_create(
        name="noop", defaults={"kind": "noop", "cores": 64, "memory_gb": 256, "max_nodes": 1}
    )
    return study_create(
        tenant=tenant,
        owner=tenant.user,
        spec={
            "name": f"{runs} runs",
            "template": "cavity",
            "backend": "noop",
            "reuse": False,
            "parameters": {"lid_velocity": {"linspace": [0.1, 10, runs]}},
        },
        submit=True,
    )


def test_a_few_admitted_runs_start_at_once_with_one_event_each(make_tenant, catalog, published):
    tenant = make_tenant(cores=64, memory_gb=256, max_runs=64)
    study = _study(tenant, INLINE_DISPATCH)
    seqs = dict(Run.objects.filter(study=study).values_list("pk", "event_seq"))
    assert len(schedule_and_start(tenant_id=tenant.id)) == INLINE_DISPATCH
    for run in Run.objects.filter(study=study):
        assert run.state == "provisioning" and run.event_seq == seqs[run.pk] + 1
        assert published.states(run) == [("provisioning", run.event_seq)]  # no `admitted`
    assert Job.DISPATCH_RUNS not in published.job_names()


def test_a_larger_admission_goes_to_dispatch_tasks_and_is_published_with_its_own_seqs(
    make_tenant, catalog, published
):
    tenant = make_tenant(cores=64, memory_gb=256, max_runs=64)
    study = _study(tenant, INLINE_DISPATCH + 4)
    seqs = dict(Run.objects.filter(study=study).values_list("pk", "event_seq"))
    admitted = schedule_and_start(tenant_id=tenant.id)
    assert len(admitted) == INLINE_DISPATCH + 4
    assert published.job_names().count(Job.DISPATCH_RUNS) == 1  # up to DISPATCH_BATCH a task
    for run in Run.objects.filter(study=study):
        assert run.state == "admitted" and run.event_seq == seqs[run.pk] + 1
        assert published.states(run) == [("admitted", run.event_seq)]
