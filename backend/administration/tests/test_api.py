"""Operator endpoints: staff only, every tenant's quota and derived usage, backends' load."""

import dataclasses

from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from studies.models import Run
from studies.services import study_create
from studies.usage import queued_demand_for_tenant, usage_for_tenant

SPEC = {"name": "sweep", "template": "airfoil2d", "parameters": {"aoa": {"values": [0, 2, 4]}}}


def _submit(tenant, *, running: int = 0):
    study = study_create(tenant=tenant, owner=tenant.user, spec=SPEC, submit=True)
    ids = list(study.runs.order_by("index").values_list("id", flat=True)[:running])
    Run.objects.filter(id__in=ids).update(state="running")
    return study


def test_members_who_are_not_staff_get_a_clear_403(api):
    for path in ("/api/v1/admin/tenants/", "/api/v1/admin/overview/"):
        r = api.get(path)
        assert r.status_code == 403
        assert "operators" in r.json()["message"]


def test_anonymous_is_refused(db):
    r = APIClient().get("/api/v1/admin/tenants/")
    assert r.status_code in (401, 403)


def test_tenants_list_quota_usage_and_queued_demand_as_the_quota_selectors_derive_them(
    ops, make_tenant, catalog
):
    a = make_tenant("alpha", cores=4, max_runs=3)
    b = make_tenant("beta", cores=8)
    _submit(a, running=2)
    _submit(b)
    r = ops.get("/api/v1/admin/tenants/")
    assert r.status_code == 200
    rows = {t["name"]: t for t in r.json()}
    assert set(rows) == {"alpha", "beta", "ops"}
    assert rows["alpha"]["limits"]["cores"] == 4 and rows["alpha"]["limits"]["runs"] == 3
    assert rows["alpha"]["members"] == 1 and rows["alpha"]["studies"] == 1
    for tenant in (a, b):
        usage = usage_for_tenant(tenant_id=tenant.id)
        queued = queued_demand_for_tenant(tenant_id=tenant.id)
        assert rows[tenant.name]["usage"] == dataclasses.asdict(usage)
        assert rows[tenant.name]["queued"] == dataclasses.asdict(queued)
    assert rows["alpha"]["usage"]["runs"] == 2 and rows["alpha"]["queued"]["runs"] == 1
    assert rows["beta"]["usage"]["runs"] == 0 and rows["beta"]["queued"]["runs"] == 3


def test_tenants_list_costs_two_usage_queries_per_tenant_and_nothing_more(ops, make_tenant):
    make_tenant()
    with CaptureQueriesContext(connection) as few:
        assert ops.get("/api/v1/admin/tenants/").status_code == 200
    for _ in range(5):
        make_tenant()
    with CaptureQueriesContext(connection) as many:
        assert ops.get("/api/v1/admin/tenants/").status_code == 200
    # usage and queued demand come from quotas.selectors (one definition of usage)
    assert len(many) - len(few) == 2 * 5


def test_overview_shows_backends_with_capacity_usage_and_health_and_the_catalog(
    ops, make_tenant, catalog
):
    _submit(make_tenant("alpha"), running=1)
    r = ops.get("/api/v1/admin/overview/")
    assert r.status_code == 200
    body = r.json()
    assert body["tenants"] == 2 and body["studies"] == 1
    assert body["runs_by_state"]["running"] == 1 and body["runs_by_state"]["pending"] == 2
    local = next(b for b in body["backends"] if b["name"] == "local")
    assert local["capacity"]["cores"] >= 1
    assert local["usage"]["runs"] == 1 and local["queued"]["runs"] == 2
    assert local["health"]["status"] == "ok"
    assert any("simpleFoam" in p["solvers"] for p in body["packages"])
    assert body["images"] == []


def test_a_local_backend_whose_runs_get_no_cgroup_is_degraded_and_says_why(ops, catalog):
    """A host (or container) where no cgroup can be made for a run: runs would be held to
    their memory and cores only by the numbers admission counts; the health says so."""
    from catalog.models import Backend

    Backend.objects.create(
        name="no-cgroups",
        kind="local",
        cores=2,
        memory_gb=4,
        settings={"cgroup_parent": "/cgroup.procs"},  # a file, not a group: nothing made
    )
    body = ops.get("/api/v1/admin/overview/").json()
    row = next(b for b in body["backends"] if b["name"] == "no-cgroups")
    assert row["health"]["status"] == "degraded"
    assert "not held to their memory, cores and processes" in row["health"]["detail"]
    assert "Not a directory" in row["health"]["detail"]
    local = next(b for b in body["backends"] if b["name"] == "local")
    assert local["health"]["status"] == "ok"  # this host gives cgroups
