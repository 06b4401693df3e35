"""The notifications API: webhooks (secret shown once, validation, tenants as walls, the
test button, the delivery log) and e-mail preferences."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from notifications.models import Webhook
from tenancy.models import Membership
from tenancy.testing import TenantAPIClient

HOOKS = "/api/v1/notifications/webhooks/"


def _member(api) -> TenantAPIClient:
    """A plain member (not an admin) of the `api` client's tenant, signed in."""
    user = User.objects.create_user(username=f"{api.tenant.name}-member", password="pw")
    Membership.objects.create(user=user, tenant=api.tenant, role="member")
    client = TenantAPIClient()
    client.force_authenticate(user)
    client.tenant = api.tenant
    return client


def _create(client, **body):
    body = {"url": "https://hooks.example.org/wt", "events": ["study.completed"], **body}
    return client.post(HOOKS, body, format="json")


def test_the_secret_is_shown_once_and_stored_encrypted(api):
    created = _create(api, events=["study.completed", "run.diverged"])
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["secret"].startswith("whsec_") and body["scope"] == "personal"
    assert body["events"] == ["study.completed", "run.diverged"]
    shown = api.get(f"{HOOKS}{body['id']}/").json()
    assert "secret" not in shown and body["secret"].startswith(shown["secret_prefix"])
    assert body["secret"] not in Webhook.objects.get(pk=body["id"]).secret_encrypted
    assert [h["id"] for h in api.get(HOOKS).json()["results"]] == [body["id"]]


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"url": "ftp://example.org/x"}, "url", "http:// or https://"),
        ({"url": "https:///nohost"}, "url", "names no host"),
        ({"url": "x" * 2001}, "url", "2000"),
        ({"events": []}, "events", "empty"),
        ({"events": ["study.exploded"]}, "events", '"study.exploded" is not an event'),
        ({"events": ["ping"]}, "events", "choose from"),
        ({"scope": "everyone"}, "scope", "not a valid choice"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(api, body, field, words):
    response = _create(api, **body)
    assert response.status_code == 400, response.content
    error = response.json()
    assert error["field"].startswith(field) and words in error["message"], error


def test_a_private_address_is_refused_where_the_portal_refuses_them(api, settings):
    settings.WINDTUNNEL = {**settings.WINDTUNNEL, "WEBHOOK_ALLOW_PRIVATE": False}
    for url in ("http://127.0.0.1:8080/x", "http://169.254.169.254/latest", "http://[::1]/"):
        response = _create(api, url=url)
        assert response.status_code == 400, url
        assert "WINDTUNNEL_WEBHOOK_ALLOW_PRIVATE" in response.json()["message"]


def test_only_admins_make_and_see_the_tenants_webhooks(api):
    member = _member(api)
    refused = _create(member, scope="tenant")
    assert refused.status_code == 403 and refused.json()["field"] == "scope"
    tenant_hook = _create(api, scope="tenant").json()
    assert tenant_hook["scope"] == "tenant" and tenant_hook["owner"] is None
    personal = _create(member).json()
    assert [h["id"] for h in member.get(HOOKS).json()["results"]] == [personal["id"]]
    assert member.get(f"{HOOKS}{tenant_hook['id']}/").status_code == 404
    # an admin sees the tenant's and their own, not a member's personal webhook
    assert api.get(f"{HOOKS}{personal['id']}/").status_code == 404


def test_another_tenants_webhook_is_a_404_everywhere(api, make_tenant):
    hook = _create(api).json()
    other = TenantAPIClient()
    tenant = make_tenant()
    other.force_authenticate(tenant.user)
    url = f"{HOOKS}{hook['id']}/"
    assert other.get(url).status_code == 404
    assert other.patch(url, {"active": False}, format="json").status_code == 404
    assert other.delete(url).status_code == 404
    assert other.post(f"{url}test/").status_code == 404
    assert other.get(f"{url}deliveries/").status_code == 404
    assert other.get(f"{HOOKS}not-a-uuid/").status_code == 404
    assert Webhook.objects.get(pk=hook["id"]).active


def test_patch_changes_events_and_turns_a_webhook_on_again(api):
    hook = _create(api).json()
    Webhook.objects.filter(pk=hook["id"]).update(active=False, disabled_reason="410 Gone")
    changed = api.patch(
        f"{HOOKS}{hook['id']}/", {"active": True, "events": ["run.failed"]}, format="json"
    )
    assert changed.status_code == 200
    assert changed.json()["active"] and changed.json()["disabled_reason"] == ""
    assert changed.json()["events"] == ["run.failed"]
    bad = api.patch(f"{HOOKS}{hook['id']}/", {"url": "javascript:alert(1)"}, format="json")
    assert bad.status_code == 400 and bad.json()["field"] == "url"
    assert api.delete(f"{HOOKS}{hook['id']}/").status_code == 204
    assert not Webhook.objects.filter(pk=hook["id"]).exists()


def test_the_test_button_sends_a_signed_ping_and_answers_with_the_result(
    api, receiver, django_assert_max_num_queries
):
    created = _create(api, url=receiver.url).json()
    receiver.secret = created["secret"]
    result = api.post(f"{HOOKS}{created['id']}/test/")
    assert result.status_code == 200, result.content
    body = result.json()
    assert body["event_type"] == "ping" and body["state"] == "delivered"
    assert body["attempts_log"][0]["status_code"] == 200
    (request,) = receiver.requests
    assert request.signed and request.headers["windtunnel-event"] == "ping"
    assert request.json["data"]["webhook"]["id"] == created["id"]

    receiver.statuses = [503]
    failed = api.post(f"{HOOKS}{created['id']}/test/").json()
    assert failed["state"] == "failed" and failed["attempts_log"][0]["status_code"] == 503
    assert failed["max_attempts"] == 1  # a ping is not retried

    with django_assert_max_num_queries(6):  # user's tenant, webhook, count, page, attempts
        log = api.get(f"{HOOKS}{created['id']}/deliveries/").json()
    assert [d["last_status_code"] for d in log["results"]] == [503, 200]


def test_email_preferences_need_an_address_and_known_events(api):
    assert api.get("/api/v1/notifications/email/").json() == {
        "email": "",
        "events": [],
        "scope": "own",
    }
    no_address = api.put(
        "/api/v1/notifications/email/", {"events": ["study.completed"]}, format="json"
    )
    assert no_address.status_code == 400 and no_address.json()["field"] == "email"
    bad = api.put(
        "/api/v1/notifications/email/",
        {"events": ["study.completed"], "email": "not-an-address"},
        format="json",
    )
    assert bad.status_code == 400 and bad.json()["field"] == "email"
    ok = api.put(
        "/api/v1/notifications/email/",
        {"events": ["study.completed", "run.failed"], "scope": "tenant", "email": "a@b.org"},
        format="json",
    )
    assert ok.status_code == 200
    assert ok.json() == {
        "email": "a@b.org",
        "events": ["study.completed", "run.failed"],
        "scope": "tenant",
    }
