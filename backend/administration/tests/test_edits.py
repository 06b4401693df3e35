"""Operators edit what the admin pages show: tenants (create, rename, deactivate), members
(add by username or e-mail, role, remove; never the last admin), every quota field, backends
and images; each object links to its Django admin change form."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from catalog.choices import ImageStatus
from catalog.models import Image
from quotas.models import Quota
from studies.models import Run
from studies.services import study_create
from tenancy.choices import Role
from tenancy.models import Membership, Tenant

TENANTS = "/api/v1/admin/tenants/"


def _user(username: str, email: str = ""):
    return get_user_model().objects.create_user(username=username, email=email, password="x")


def _error(response, status: int) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) >= {"code", "message", "field"}
    return body


# --- staff only ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("post", TENANTS, {"name": "x"}),
        ("patch", f"{TENANTS}{{t}}/", {"active": False}),
        ("get", f"{TENANTS}{{t}}/quota/", None),
        ("patch", f"{TENANTS}{{t}}/quota/", {"cores": 64}),
        ("get", f"{TENANTS}{{t}}/members/", None),
        ("post", f"{TENANTS}{{t}}/members/", {"user": "someone"}),
        ("patch", f"{TENANTS}{{t}}/members/{{u}}/", {"role": "member"}),
        ("delete", f"{TENANTS}{{t}}/members/{{u}}/", None),
    ],
)
def test_members_who_are_not_staff_cannot_edit_tenants(api, method, path, body):
    tenant, user = api.tenant, api.tenant.user
    url = path.format(t=tenant.name, u=user.pk)
    r = getattr(api, method)(url, body, format="json") if body else getattr(api, method)(url)
    assert _error(r, 403)["code"] == "permission_denied"
    tenant.refresh_from_db()
    assert tenant.is_active and Quota.objects.get(tenant=tenant).cores == 4
    assert Membership.objects.filter(tenant=tenant, user=user, role=Role.ADMIN).exists()
    assert not Tenant.objects.filter(name="x").exists()


# --- tenants -----------------------------------------------------------------------------------


def test_create_a_tenant_with_its_quota_then_rename_it(ops):
    r = ops.post(
        TENANTS,
        {"name": "aero", "display_name": "Aerodynamics", "quota": {"cores": 32, "storage_gb": 500}},
        format="json",
    )
    assert r.status_code == 201, r.content
    body = r.json()
    assert body["name"] == "aero" and body["display_name"] == "Aerodynamics" and body["active"]
    assert body["limits"]["cores"] == 32 and body["limits"]["storage_gb"] == 500
    assert body["limits"]["memory_gb"] == 8.0  # the default where nothing was said
    tenant = Tenant.objects.get(name="aero")
    assert body["admin_url"] == f"/admin/tenancy/tenant/{tenant.pk}/change/"
    assert body["quota_admin_url"] == f"/admin/quotas/quota/{tenant.quota.pk}/change/"

    r = ops.patch(f"{TENANTS}aero/", {"name": "aero-lab", "display_name": "Aero lab"}, "json")
    assert r.status_code == 200, r.content
    assert (r.json()["name"], r.json()["display_name"]) == ("aero-lab", "Aero lab")
    assert ops.get(f"{TENANTS}aero-lab/").json()["display_name"] == "Aero lab"
    assert _error(ops.get(f"{TENANTS}aero/"), 404)["code"] == "not_found"


def test_tenant_names_are_checked(ops, make_tenant):
    make_tenant("taken")
    body = _error(ops.post(TENANTS, {"name": "taken"}, format="json"), 409)
    assert "exists already" in body["message"]
    body = _error(ops.post(TENANTS, {"name": "not a slug"}, format="json"), 400)
    assert body["field"] == "name"
    body = _error(ops.patch(f"{TENANTS}ops/", {"name": "taken"}, format="json"), 409)
    assert "choose another name" in body["message"]
    body = _error(ops.post(TENANTS, {"name": "q", "quota": {"cores": 0}}, format="json"), 400)
    assert body["field"] == "quota.cores"
    assert not Tenant.objects.filter(name="q").exists()


def test_a_deactivated_tenants_members_are_refused_with_a_reason_until_it_is_active(
    ops, make_tenant
):
    tenant = make_tenant("paused")

    def studies():  # as a request signed in as the member (its user loaded afresh)
        member = APIClient()
        member.force_authenticate(get_user_model().objects.get(pk=tenant.user.pk))
        return member.get("/api/v1/studies/")

    assert studies().status_code == 200
    r = ops.patch(f"{TENANTS}paused/", {"active": False}, format="json")
    assert r.status_code == 200 and r.json()["active"] is False
    body = _error(studies(), 403)
    assert "tenant paused is deactivated" in body["message"]
    assert "operator" in body["message"]

    assert ops.patch(f"{TENANTS}paused/", {"active": True}, format="json").json()["active"]
    assert studies().status_code == 200


def test_the_admin_links_open_the_django_admin_change_forms(ops, make_tenant):
    tenant = make_tenant("linked")
    operator = get_user_model().objects.create_superuser("root", "root@example.org", "pw")
    browser = Client()
    browser.force_login(operator)
    row = ops.get(f"{TENANTS}linked/").json()
    quota = ops.get(f"{TENANTS}linked/quota/").json()
    member = ops.get(f"{TENANTS}linked/members/").json()[0]
    for url in (
        row["admin_url"],
        row["quota_admin_url"],
        quota["admin_url"],
        member["admin_url"],
        member["user_admin_url"],
    ):
        page = browser.get(url)
        assert page.status_code == 200, url
    assert tenant.name in browser.get(row["admin_url"]).content.decode()


# --- members -----------------------------------------------------------------------------------


def test_add_members_by_username_or_email_change_their_role_and_remove_them(ops, make_tenant):
    tenant = make_tenant("crew")
    _user("ana")
    _user("ben", email="Ben@Example.org")
    url = f"{TENANTS}crew/members/"

    r = ops.post(url, {"user": "ana"}, format="json")
    assert r.status_code == 201, r.content
    assert r.json()["username"] == "ana" and r.json()["role"] == "member"
    r = ops.post(url, {"user": "ben@example.org", "role": "admin"}, format="json")
    assert r.status_code == 201 and r.json()["username"] == "ben" and r.json()["role"] == "admin"

    listed = {m["username"]: m["role"] for m in ops.get(url).json()}
    assert listed == {"ana": "member", "ben": "admin", tenant.user.username: "admin"}

    ana = get_user_model().objects.get(username="ana")
    r = ops.patch(f"{url}{ana.pk}/", {"role": "admin"}, format="json")
    assert r.status_code == 200 and r.json()["role"] == "admin"
    assert ops.delete(f"{url}{ana.pk}/").status_code == 204
    assert not Membership.objects.filter(tenant=tenant, user=ana).exists()
    # the member removed works in no tenant any more
    client = APIClient()
    client.force_authenticate(ana)
    assert client.get("/api/v1/studies/").status_code == 403


def test_adding_members_says_what_is_wrong(ops, make_tenant):
    make_tenant("crew")
    other = make_tenant("other")
    _user("twin1", email="same@example.org")
    _user("twin2", email="same@example.org")
    url = f"{TENANTS}crew/members/"

    body = _error(ops.post(url, {"user": "nobody"}, format="json"), 400)
    assert body["field"] == "user" and "must exist" in body["message"]
    body = _error(ops.post(url, {"user": "same@example.org"}, format="json"), 400)
    assert "give the username instead" in body["message"]
    body = _error(ops.post(url, {"user": other.user.username}, format="json"), 409)
    assert "member of tenant other" in body["message"] and body["field"] == "user"
    body = _error(ops.post(url, {"user": "twin1", "role": "owner"}, format="json"), 400)
    assert body["field"] == "role"
    ops.post(url, {"user": "twin1"}, format="json")
    body = _error(ops.post(url, {"user": "twin1"}, format="json"), 409)
    assert "already" in body["message"]
    _error(ops.patch(f"{url}999999/", {"role": "admin"}, format="json"), 404)


def test_the_last_admin_is_never_demoted_or_removed(ops, make_tenant):
    tenant = make_tenant("solo")
    owner = tenant.user
    url = f"{TENANTS}solo/members/{owner.pk}/"

    body = _error(ops.delete(url), 400)
    assert "last admin of tenant solo" in body["message"]
    assert "Make another member an admin first" in body["message"]
    body = _error(ops.patch(url, {"role": "member"}, format="json"), 400)
    assert body["field"] == "role" and "last admin" in body["message"]
    assert Membership.objects.get(tenant=tenant, user=owner).role == Role.ADMIN

    _user("heir")
    ops.post(f"{TENANTS}solo/members/", {"user": "heir", "role": "admin"}, format="json")
    assert ops.patch(url, {"role": "member"}, format="json").status_code == 200
    assert ops.delete(url).status_code == 204


# --- quotas ------------------------------------------------------------------------------------


def test_every_quota_field_can_be_changed_and_the_answer_says_when_it_applies(ops, make_tenant):
    make_tenant("q")
    change = {
        "cores": 64,
        "memory_gb": 256.5,
        "max_nodes": 16,
        "max_runs": 12,
        "max_queued_runs": 5000,
        "storage_gb": 750,
        "core_hours_budget": 10_000,
        "share_weight": 2.5,
    }
    r = ops.patch(f"{TENANTS}q/quota/", change, format="json")
    assert r.status_code == 200, r.content
    assert r.json()["quota"] == change
    assert "admission from now on" in r.json()["note"]
    row = Quota.objects.get(tenant__name="q")
    assert (row.cores, row.core_hours_budget, row.storage_gb) == (64, 10_000, 750)
    # the budget is cleared with null; the tenants list and the user's quota panel show it
    r = ops.patch(f"{TENANTS}q/quota/", {"core_hours_budget": None}, format="json")
    assert r.json()["quota"]["core_hours_budget"] is None
    assert ops.get(f"{TENANTS}q/").json()["limits"]["queued_runs"] == 5000


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"cores": -1}, "cores", "greater than or equal to 1"),
        ({"cores": 10_000_000}, "cores", "less than or equal to 100000"),
        ({"memory_gb": 0}, "memory_gb", "greater than or equal to 0.1"),
        ({"storage_gb": -5}, "storage_gb", "greater than or equal to 0"),
        ({"core_hours_budget": -1}, "core_hours_budget", "greater than or equal to 0"),
        ({"share_weight": 0}, "share_weight", "greater than or equal to 0.01"),
        ({"cores": None}, "cores", "may not be null"),
        ({"cores": "many"}, "cores", "valid integer"),
        ({"max_runs": 10, "max_queued_runs": 5}, "max_queued_runs", "at least max_runs"),
        ({"core": 8}, "core", "not a quota field"),
    ],
)
def test_quota_values_are_validated_field_by_field(ops, make_tenant, change, field, words):
    make_tenant("q")
    body = _error(ops.patch(f"{TENANTS}q/quota/", change, format="json"), 400)
    assert body["field"] == field and words in body["message"], body
    assert Quota.objects.get(tenant__name="q").cores == 4


def test_a_lowered_quota_never_stops_running_runs_and_the_answer_says_so(ops, make_tenant, catalog):
    tenant = make_tenant("busy", cores=8, max_runs=4)
    spec = {"name": "s", "template": "airfoil2d", "parameters": {"aoa": {"values": [0, 2, 4]}}}
    study = study_create(tenant=tenant, owner=tenant.user, spec=spec, submit=True)
    running = list(study.runs.order_by("index")[:2])
    Run.objects.filter(pk__in=[r.pk for r in running]).update(
        state="running", started_at=timezone.now()
    )
    r = ops.patch(f"{TENANTS}busy/quota/", {"max_runs": 1}, format="json")
    assert r.status_code == 200, r.content
    assert r.json()["over"] == ["max_runs"] and r.json()["usage"]["runs"] == 2
    assert set(Run.objects.filter(study=study).values_list("state", flat=True)) == {
        "running",
        "pending",
    }
    assert Run.objects.filter(study=study, state="running").count() == 2


# --- backends and images ------------------------------------------------------------------------


def test_backends_edit_and_check_carry_their_admin_link(ops):
    r = ops.post(
        "/api/v1/admin/backends/",
        {"name": "bench", "kind": "noop", "cores": 4, "memory_gb": 8},
        format="json",
    )
    assert r.status_code == 201, r.content
    assert r.json()["admin_url"].startswith("/admin/catalog/backend/")
    r = ops.patch("/api/v1/admin/backends/bench/", {"enabled": False, "cores": 2}, format="json")
    assert r.status_code == 200 and r.json()["enabled"] is False and r.json()["cores"] == 2
    assert ops.post("/api/v1/admin/backends/bench/check/").json()["ok"] is True
    overview = ops.get("/api/v1/admin/overview/").json()
    row = next(b for b in overview["backends"] if b["name"] == "bench")
    assert row["admin_url"] == r.json()["admin_url"] and row["health"]["status"] == "disabled"


def test_retiring_an_image_fails_its_waiting_runs_with_the_reason_and_refuses_new_ones(
    staff, containers, builds
):
    spec = {"name": "w", "template": "cavity", "backend": containers.name}
    study = study_create(tenant=staff.tenant, owner=staff.tenant.user, spec=spec, submit=True)
    study.refresh_from_db()
    image = study.image
    assert image is not None
    Image.objects.filter(pk=image.pk).update(status=ImageStatus.READY)
    waiting = Run.objects.get(study=study)
    assert waiting.state == "pending"

    r = staff.post(f"/api/v1/images/{image.pk}/retire/")
    assert r.status_code == 200, r.content
    assert r.json()["status"] == "retired"
    assert r.json()["admin_url"] == f"/admin/catalog/image/{image.pk}/change/"
    waiting.refresh_from_db()
    assert waiting.state == "failed"
    assert "was retired by an operator" in waiting.message
    assert "choose another image" in waiting.message

    # no new runs: neither a new study naming it nor an extension of its study
    body = _error(
        staff.post(
            "/api/v1/studies/",
            {**spec, "name": "again", "image": image.digest},
            format="json",
        ),
        400,
    )
    assert body["field"] == "image" and "retired" in body["message"]
    r = staff.post(
        f"/api/v1/studies/{study.pk}/extend/",
        {"parameters": {"lid_velocity": {"values": [2.0]}}},
        format="json",
    )
    assert _error(r, 409)["code"] == "invalid_state"
    assert "retired" in r.json()["message"]


def test_an_image_in_use_by_running_runs_is_not_retired(staff, containers, builds):
    spec = {"name": "r", "template": "cavity", "backend": containers.name}
    study = study_create(tenant=staff.tenant, owner=staff.tenant.user, spec=spec, submit=True)
    study.refresh_from_db()
    image = study.image
    assert image is not None
    Run.objects.filter(study=study).update(state="running", started_at=timezone.now())
    body = _error(staff.post(f"/api/v1/images/{image.pk}/retire/"), 409)
    assert "1 run(s) are starting or running" in body["message"]
    image.refresh_from_db()
    assert image.status != ImageStatus.RETIRED


def test_compose_and_rebuild_from_the_admin_page(staff, builds):
    r = staff.post("/api/v1/images/", {"packages": ["icofoam"]}, format="json")
    assert r.status_code == 201 and r.json()["admin_url"].startswith("/admin/catalog/image/")
    image_id = r.json()["id"]
    Image.objects.filter(pk=image_id).update(status=ImageStatus.FAILED)
    r = staff.post(f"/api/v1/images/{image_id}/rebuild/")
    assert r.status_code == 200 and r.json()["status"] == "pending"
    assert builds[-1] == (image_id, False)
    overview = staff.get("/api/v1/admin/overview/").json()
    assert any(i["id"] == image_id and i["admin_url"] for i in overview["images"])
