"""The notifications API: webhooks (secret shown once, validation, tenants as walls, the
test button, the delivery log) and e-mail preferences."""

from __future__ import annotations

import socket

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


@pytest.mark.parametrize(
    ("address", "carried", "form"),
    [
        ("64:ff9b::7f00:1", "127.0.0.1", "NAT64"),
        ("64:ff9b::a9fe:a9fe", "169.254.169.254", "NAT64"),
        ("2002:7f00:1::", "127.0.0.1", "6to4"),
        ("2002:a00:1::1", "10.0.0.1", "6to4"),
        ("::127.0.0.1", "127.0.0.1", "IPv4-compatible"),
        ("::ffff:127.0.0.1", "127.0.0.1", "IPv4-mapped"),
        ("::ffff:0:a9fe:a9fe", "169.254.169.254", "IPv4-translated"),
        # Teredo: the client's address is stored XOR-ed (0x80fffffe: 127.0.0.1)
        ("2001:0:4136:e378:8000:63bf:80ff:fffe", "127.0.0.1", "Teredo"),
    ],
)
def test_an_ipv6_address_that_carries_a_private_ipv4_one_is_refused(
    api, settings, address, carried, form
):
    settings.WINDTUNNEL = {**settings.WINDTUNNEL, "WEBHOOK_ALLOW_PRIVATE": False}
    response = _create(api, url=f"http://[{address}]:8080/hook")
    assert response.status_code == 400, response.content
    error = response.json()
    assert error["field"] == "url"
    assert (
        f"carries the private, loopback, link-local or reserved IPv4 address {carried}"
        in (error["message"])
    )
    assert form in error["message"] and "WINDTUNNEL_WEBHOOK_ALLOW_PRIVATE" in error["message"]
    assert not Webhook.objects.exists()


def test_a_local_nat64_translator_and_non_unicast_ipv6_are_refused(api, settings):
    settings.WINDTUNNEL = {**settings.WINDTUNNEL, "WEBHOOK_ALLOW_PRIVATE": False}
    for address, says in [
        ("64:ff9b:1::808:808", "local NAT64 translator"),
        ("fd00::1", "private, loopback, link-local or reserved address (fd00::1)"),
        ("::1", "private, loopback, link-local or reserved address (::1)"),
        ("100::1", "private, loopback, link-local or reserved address (100::1)"),
    ]:
        response = _create(api, url=f"https://[{address}]/hook")
        assert response.status_code == 400, address
        assert response.json()["field"] == "url" and says in response.json()["message"], address


def test_ipv6_forms_of_public_ipv4_addresses_are_accepted(api, settings):
    settings.WINDTUNNEL = {**settings.WINDTUNNEL, "WEBHOOK_ALLOW_PRIVATE": False}
    for address in ("64:ff9b::808:808", "2002:808:808::1", "::ffff:8.8.8.8", "2606:4700::1"):
        response = _create(api, url=f"https://[{address}]/hook")  # saved, nothing is sent
        assert response.status_code == 201, (address, response.content)


def test_a_name_that_resolves_to_a_hidden_loopback_address_is_refused(api, settings, monkeypatch):
    settings.WINDTUNNEL = {**settings.WINDTUNNEL, "WEBHOOK_ALLOW_PRIVATE": False}
    # the tenant's DNS (which cannot run here) answers with a public and a NAT64 address
    answers = {"hooks.attacker.test": ["93.184.215.14", "64:ff9b::7f00:1"]}
    real = socket.getaddrinfo

    def resolve(host, port, *args, **kwargs):
        if host not in answers:
            return real(host, port, *args, **kwargs)
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
            for a in answers[host]
        ]

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    response = _create(api, url="https://hooks.attacker.test/wt")
    assert response.status_code == 400 and response.json()["field"] == "url"
    assert response.json()["message"].startswith(
        "the host hooks.attacker.test resolves to 64:ff9b::7f00:1, which is an address that "
        "carries the private, loopback, link-local or reserved IPv4 address 127.0.0.1"
    )


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


@pytest.mark.parametrize("status", [200, 500, 302])
def test_a_loopback_receivers_answer_is_nowhere_in_what_the_tenant_sees(api, receiver, status):
    """Local settings send to loopback (development): what a service there answers must not
    reach the tenant through the delivery log, only the status code."""
    secret = "root-only-3f9c2a: the answer of an internal service"
    receiver.statuses, receiver.reply = [status], secret.encode()
    created = _create(api, url=receiver.url).json()
    tested = api.post(f"{HOOKS}{created['id']}/test/")
    log = api.get(f"{HOOKS}{created['id']}/deliveries/")
    assert receiver.requests, "the receiver was called"
    assert tested.json()["attempts_log"][0]["status_code"] == status
    assert log.json()["results"][0]["attempts_log"][0]["status_code"] == status
    for answer in (tested, log):
        assert "root-only-3f9c2a" not in answer.content.decode(), answer.content


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
