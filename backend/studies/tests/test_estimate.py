"""What a study will cost, before it is submitted: the preview's estimate from the tenant's
earlier completed runs of the same case and solver (core-hours kept, wall time scaled by
cores), as ranges, for the whole study at the runs that fit at once."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from catalog.models import Backend
from studies.models import Run
from studies.services import study_create
from tenancy.testing import TenantAPIClient

CAVITY = {"name": "earlier", "template": "cavity", "backend": "est", "reuse": False}


@pytest.fixture
def backend(catalog):
    return Backend.objects.update_or_create(
        name="est", defaults={"kind": "noop", "cores": 64, "memory_gb": 256, "max_nodes": 1}
    )[0]


def _ran(tenant, spec: dict, walls: list[float], processes: int = 1) -> list[Run]:
    """A study of `spec` whose runs completed, each after its wall time in seconds."""
    values = [0.5 + i for i in range(len(walls))]
    study = study_create(
        tenant=tenant,
        owner=tenant.user,
        spec={**spec, "parameters": {"lid_velocity": {"values": values}}},
        submit=True,
    )
    now = timezone.now()
    runs = list(study.runs.order_by("index"))
    for run, wall in zip(runs, walls, strict=True):
        Run.objects.filter(pk=run.pk).update(
            state="completed",
            processes=processes,
            started_at=now - timedelta(seconds=wall),
            finished_at=now,
        )
    return runs


def _estimate(client, spec: dict) -> dict:
    r = client.post("/api/v1/studies/preview/", spec, format="json")
    assert r.status_code == 200, r.json()
    return r.json()["estimate"]


def test_without_an_earlier_run_of_the_case_there_is_no_estimate_and_it_says_so(
    make_tenant, backend
):
    client = TenantAPIClient()
    tenant = make_tenant(cores=4, max_runs=4)
    client.force_authenticate(tenant.user)
    body = _estimate(client, {**CAVITY, "name": "first"})
    assert body["based_on"] == 0 and body["core_hours"] is None and body["wall_seconds"] is None
    assert body["summary"].startswith("no completed run of this case with icoFoam yet")


def test_the_estimate_reads_earlier_runs_of_the_case_and_scales_their_wall_time_by_cores(
    make_tenant, backend
):
    client = TenantAPIClient()
    tenant = make_tenant(cores=4, max_runs=4)
    client.force_authenticate(tenant.user)
    _ran(tenant, CAVITY, walls=[60.0, 120.0, 90.0], processes=1)
    # not read: another tenant's runs of this case
    _ran(make_tenant(cores=4, max_runs=4), CAVITY, walls=[5000.0])
    spec = {
        **CAVITY,
        "name": "next",
        "resources": {"processes": 2},
        "parameters": {"lid_velocity": {"values": [1, 2, 3, 4, 5]}},
    }
    body = _estimate(client, spec)
    assert body["based_on"] == 3 and body["runs"] == 5
    # the earlier runs' core-seconds (60 to 120 on one core) are a run's, on 2 cores half the time
    assert body["run_core_hours"] == pytest.approx([60 / 3600, 120 / 3600])
    assert body["run_wall_seconds"] == pytest.approx([30, 60])
    assert body["core_hours"] == pytest.approx([5 * 60 / 3600, 5 * 120 / 3600])
    # 4 cores of quota: 2 runs of 2 cores at once, 5 runs in 3 waves
    assert body["wall_seconds"] == pytest.approx([90, 180])
    assert body["summary"] == (
        "about 0.083–0.17 core-hours and 90 s–3 min at 2 at a time, from 3 earlier runs of "
        "this case with icoFoam"
    )


def test_reused_and_unfinished_runs_are_not_read(make_tenant, backend):
    client = TenantAPIClient()
    tenant = make_tenant(cores=4, max_runs=4)
    client.force_authenticate(tenant.user)
    done, reused, running = _ran(tenant, CAVITY, walls=[60.0, 600.0, 900.0])
    Run.objects.filter(pk=reused.pk).update(reused_from=done)
    Run.objects.filter(pk=running.pk).update(state="running", finished_at=None)
    body = _estimate(client, {**CAVITY, "name": "next"})
    assert body["based_on"] == 1
    assert body["run_wall_seconds"] == pytest.approx([60, 60])


def test_a_submitted_study_keeps_its_estimate_beside_what_it_used(make_tenant, backend):
    client = TenantAPIClient()
    tenant = make_tenant(cores=4, max_runs=4)
    client.force_authenticate(tenant.user)
    draft = client.post(
        "/api/v1/studies/", {**CAVITY, "name": "draft", "draft": True}, format="json"
    )
    assert draft.status_code == 201, draft.json()
    assert draft.json()["estimate"] is None  # estimated when submitted
    first = client.post("/api/v1/studies/", {**CAVITY, "name": "first"}, format="json").json()
    assert first["estimate"]["based_on"] == 0 and first["estimate"]["core_hours"] is None
    _ran(tenant, CAVITY, walls=[60.0, 120.0])
    r = client.post("/api/v1/studies/", {**CAVITY, "name": "second"}, format="json")
    assert r.status_code == 201, r.json()
    shown = client.get(f"/api/v1/studies/{r.json()['id']}/").json()
    assert shown["estimate"]["based_on"] == 2
    assert shown["estimate"]["core_hours"] == pytest.approx([60 / 3600, 120 / 3600])
    assert shown["core_hours"] == 0  # what it used, beside it, once it runs
