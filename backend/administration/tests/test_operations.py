"""Operations: an operator lists every tenant's running and queued runs, filters them and
stops one with a reason its owner reads; a backend's watchdog limits are set by operators;
the backends' health counts their runs that stalled."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from catalog.models import Backend
from studies.models import Run
from studies.services import study_create

RUNS = "/api/v1/admin/runs/"
SPEC = {
    "name": "sweep",
    "template": "cavity",
    "parameters": {"lid_velocity": {"values": [1, 2, 3]}},
}


@pytest.fixture
def second_backend(db):
    return Backend.objects.create(name="cluster", kind="noop", cores=64, memory_gb=256)


def _submit(tenant, *, backend: str = "local", running: int = 0, name: str = "sweep"):
    spec = {**SPEC, "name": name, "backend": backend}
    study = study_create(tenant=tenant, owner=tenant.user, spec=spec, submit=True)
    ids = list(study.runs.order_by("index").values_list("id", flat=True)[:running])
    Run.objects.filter(id__in=ids).update(state="running", started_at=timezone.now())
    return study


def _ids(response) -> set[str]:
    return {row["id"] for row in response.json()["results"]}


def test_a_tenants_member_is_refused_the_operations_endpoints(api, catalog):
    study = _submit(api.tenant, running=1)
    run = study.runs.first()
    r = api.get(RUNS)
    assert r.status_code == 403 and "operators" in r.json()["message"]
    r = api.post(f"{RUNS}{run.pk}/stop/", {"reason": "mine"}, format="json")
    assert r.status_code == 403
    assert Run.objects.get(pk=run.pk).state == "running"


def test_an_operator_sees_every_tenants_active_runs_running_first(
    ops, make_tenant, catalog, second_backend
):
    alpha, beta = make_tenant("alpha"), make_tenant("beta")
    a = _submit(alpha, running=2)
    b = _submit(beta, backend="cluster", running=1)
    done = _submit(beta, name="old")
    done.runs.update(state="completed")
    r = ops.get(RUNS)
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["count"] == 6  # 3 of alpha, 3 of beta's running study; none that ended
    rows = body["results"]
    assert [row["state"] for row in rows[:3]] == ["running"] * 3
    assert {row["state"] for row in rows[3:]} == {"pending"}
    first = next(row for row in rows if row["tenant"] == "alpha")
    assert first["owner"] == alpha.user.username and first["study_name"] == "sweep"
    assert first["backend"] == "local"
    assert _ids(r) == {str(x) for x in [*a.runs.values_list("id", flat=True)]} | {
        str(x) for x in b.runs.values_list("id", flat=True)
    }


def test_filters_by_tenant_backend_and_state_narrow_the_list(
    ops, make_tenant, catalog, second_backend
):
    alpha, beta = make_tenant("alpha"), make_tenant("beta")
    a = _submit(alpha, running=1)
    b = _submit(beta, backend="cluster", running=2)
    r = ops.get(RUNS, {"tenant": "alpha"})
    assert _ids(r) == {str(x) for x in a.runs.values_list("id", flat=True)}
    r = ops.get(RUNS, {"backend": "cluster"})
    assert _ids(r) == {str(x) for x in b.runs.values_list("id", flat=True)}
    r = ops.get(RUNS, {"state": "running", "backend": "cluster"})
    assert r.json()["count"] == 2
    assert {row["state"] for row in r.json()["results"]} == {"running"}
    r = ops.get(f"{RUNS}?state=running&state=pending&tenant=alpha")
    assert r.json()["count"] == 3
    r = ops.get(RUNS, {"state": "completed"})
    assert r.status_code == 400 and r.json()["field"] == "state"
    assert "pending, admitted, provisioning, running" in r.json()["message"]
    r = ops.get(RUNS, {"limit": 0})
    assert r.status_code == 400 and r.json()["field"] == "limit"


def test_the_list_costs_the_same_queries_for_many_runs_as_for_few(ops, make_tenant, catalog):
    _submit(make_tenant("alpha"), running=1)
    with CaptureQueriesContext(connection) as few:
        assert ops.get(RUNS).status_code == 200
    for i in range(4):
        _submit(make_tenant(f"t{i}x"), running=2)
    with CaptureQueriesContext(connection) as many:
        r = ops.get(RUNS)
    assert r.json()["count"] == 15
    assert len(many) == len(few)


def test_an_operator_stops_a_run_with_a_reason_its_owner_reads(ops, make_tenant, catalog):
    alpha = make_tenant("alpha")
    study = _submit(alpha, running=1)
    queued = study.runs.filter(state="pending").first()
    r = ops.post(f"{RUNS}{queued.pk}/stop/", {"reason": "cluster maintenance"}, format="json")
    assert r.status_code == 200, r.content
    assert (r.json()["state"], r.json()["end_reason"]) == ("cancelled", "cancelled_by_admin")
    owner = APIClient()
    owner.force_authenticate(alpha.user)
    shown = owner.get(f"/api/v1/runs/{queued.pk}/").json()
    assert shown["state"] == "cancelled" and shown["end_reason"] == "cancelled_by_admin"
    assert shown["message"] == "stopped by an administrator (ops-user): cluster maintenance"

    running = study.runs.get(state="running")
    r = ops.post(f"{RUNS}{running.pk}/stop/", {"reason": "stuck"}, format="json")
    assert r.status_code == 200, r.content
    fresh = Run.objects.get(pk=running.pk)
    assert fresh.state == "cancelled" and fresh.stop_requested  # its agent is told to stop
    assert fresh.message.endswith(": stuck")


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({}, "reason", "required"),
        ({"reason": "   "}, "reason", "blank"),
        ({"reason": "x" * 501}, "reason", "500"),
    ],
)
def test_a_stop_without_a_usable_reason_is_a_400_naming_it(
    ops, make_tenant, catalog, body, field, words
):
    run = _submit(make_tenant("alpha")).runs.first()
    r = ops.post(f"{RUNS}{run.pk}/stop/", body, format="json")
    assert r.status_code == 400 and r.json()["field"] == field, r.content
    assert words in r.json()["message"]
    assert Run.objects.get(pk=run.pk).state == "pending"


def test_stopping_a_run_that_ended_or_does_not_exist_says_so(ops, make_tenant, catalog):
    run = _submit(make_tenant("alpha")).runs.first()
    Run.objects.filter(pk=run.pk).update(state="completed")
    r = ops.post(f"{RUNS}{run.pk}/stop/", {"reason": "late"}, format="json")
    assert r.status_code == 409 and "already ended (completed)" in r.json()["message"]
    for missing in ("not-a-uuid", "00000000-0000-0000-0000-000000000000"):
        assert ops.post(f"{RUNS}{missing}/stop/", {"reason": "x"}).status_code == 404


# --- a backend's limits and health --------------------------------------------------------


def test_operators_set_a_backends_stall_floor_and_wall_time_default_and_cap(ops, catalog):
    url = "/api/v1/admin/backends/local/"
    r = ops.patch(
        url,
        {"stall_seconds": 300, "default_wall_seconds": 3600, "max_wall_seconds": 86400},
        format="json",
    )
    assert r.status_code == 200, r.content
    body = r.json()
    assert (body["stall_seconds"], body["default_wall_seconds"], body["max_wall_seconds"]) == (
        300,
        3600,
        86400,
    )
    r = ops.patch(url, {"default_wall_seconds": 90000}, format="json")
    assert r.status_code == 400 and r.json()["field"] == "default_wall_seconds", r.content
    assert "above the backend's cap" in r.json()["message"]
    r = ops.patch(url, {"stall_seconds": 0}, format="json")
    assert r.status_code == 400 and r.json()["field"] == "stall_seconds"
    r = ops.patch(url, {"stall_seconds": None, "max_wall_seconds": None}, format="json")
    assert r.status_code == 200
    assert (r.json()["stall_seconds"], r.json()["max_wall_seconds"]) == (None, None)


def test_the_backends_health_counts_its_runs_that_stalled(ops, make_tenant, catalog):
    study = _submit(make_tenant("alpha"))
    ids = list(study.runs.values_list("id", flat=True))
    Run.objects.filter(id__in=ids[:1]).update(
        state="failed", end_reason="stalled", finished_at=timezone.now()
    )
    local = next(
        b for b in ops.get("/api/v1/admin/overview/").json()["backends"] if b["name"] == "local"
    )
    assert local["health"]["stalled"] == 1 and local["health"]["status"] == "ok"
    assert "1 run(s) stopped for making no progress" in local["health"]["detail"]
    Run.objects.filter(id__in=ids).update(
        state="failed", end_reason="stalled", finished_at=timezone.now()
    )
    local = next(
        b for b in ops.get("/api/v1/admin/overview/").json()["backends"] if b["name"] == "local"
    )
    assert local["health"]["stalled"] == 3 and local["health"]["status"] == "degraded"
