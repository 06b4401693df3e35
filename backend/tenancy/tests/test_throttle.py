"""Sign-in throttling (tenancy.throttle): per client address, whatever X-Forwarded-For says,
and per username from any address, on every way to sign in: the token endpoint, the web UI's
session login, and the login forms of the admin and the browsable API."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from django.conf import settings
from django.test import Client, RequestFactory

from tenancy import throttle

TOKEN = "/api/v1/auth/token/"
SESSION = "/api/v1/auth/login/"
ADMIN = "/admin/login/"
BROWSABLE = "/api-auth/login/"

_addresses = (f"198.51.100.{i}" for i in itertools.count(1))


def attempt(path: str, username: str, password: str, *, remote: str, forwarded: str = ""):
    """One sign-in as a client at `remote` would send it: JSON to the API, a form elsewhere."""
    extra: dict[str, Any] = {"REMOTE_ADDR": remote}
    if forwarded:
        extra["HTTP_X_FORWARDED_FOR"] = forwarded
    client = Client(**extra)
    data = {"username": username, "password": password}
    if path.startswith("/api/v1/"):
        return client.post(path, data, content_type="application/json")
    return client.post(path, data)


def assert_throttled(response, *, says: str) -> int:
    assert response.status_code == 429, response.content
    retry_after = int(response["Retry-After"])
    assert retry_after >= 1
    text = (
        response.json()["message"]
        if response["Content-Type"].startswith("application/json")
        else response.content.decode()
    )
    assert says in text and "try again in" in text and "UTC" in text, text
    return retry_after


@pytest.mark.parametrize("path", [TOKEN, SESSION, ADMIN])
def test_rotating_x_forwarded_for_does_not_escape_the_per_address_limit(db, path):
    limit = settings.WINDTUNNEL["LOGIN_ATTEMPTS_PER_MINUTE"]
    for i in range(limit):
        r = attempt(path, f"nobody-{i}", "guess", remote="203.0.113.7", forwarded=f"10.9.{i}.1")
        assert r.status_code in (200, 401), r.content  # a wrong password, not yet throttled
    r = attempt(path, "nobody-else", "guess", remote="203.0.113.7", forwarded="10.9.99.1")
    assert_throttled(r, says="from your address")
    # another client is not held up by it
    assert attempt(path, "nobody-else", "guess", remote="203.0.113.8").status_code in (200, 401)


@pytest.mark.parametrize("path", [TOKEN, SESSION, ADMIN, BROWSABLE])
def test_a_username_attacked_from_many_addresses_is_locked_and_backs_off(
    make_tenant, monkeypatch, path
):
    victim = make_tenant("victim").user
    victim.is_staff = True  # may sign in to the admin too
    victim.save()
    now = [1_900_000_000.0]
    monkeypatch.setattr(throttle, "clock", lambda: now[0])
    free = settings.WINDTUNNEL["LOGIN_FAILURES_BEFORE_BACKOFF"]
    for _ in range(free):
        r = attempt(path, "victim-user", "guess", remote=next(_addresses))
        assert r.status_code in (200, 401), r.content
    # locked: even the right password, from an address never seen, waits
    r = attempt(path, "victim-user", "pw-victim", remote=next(_addresses))
    assert assert_throttled(r, says="'victim-user'") == throttle.BACKOFF_FIRST_SECONDS
    # spelled otherwise, it is the same account
    r = attempt(path, " Victim-User", "guess", remote=next(_addresses))
    assert r.status_code == 429
    # once the lock is over, the next failure locks it for twice as long
    now[0] += throttle.BACKOFF_FIRST_SECONDS + 1
    assert attempt(path, "victim-user", "guess", remote=next(_addresses)).status_code in (200, 401)
    r = attempt(path, "victim-user", "pw-victim", remote=next(_addresses))
    assert assert_throttled(r, says="'victim-user'") == 2 * throttle.BACKOFF_FIRST_SECONDS
    # the right password after the lock signs in, and starts the count afresh
    now[0] += 2 * throttle.BACKOFF_FIRST_SECONDS + 1
    r = attempt(path, "victim-user", "pw-victim", remote=next(_addresses))
    assert r.status_code in (200, 302), r.content
    r = attempt(path, "victim-user", "guess", remote=next(_addresses))
    assert r.status_code in (200, 401), r.content


def test_the_admin_login_form_still_signs_staff_in(make_tenant):
    tenant = make_tenant("ops")
    tenant.user.is_staff = True
    tenant.user.save()
    client = Client()
    r = client.post(ADMIN, {"username": "ops-user", "password": "pw-ops"}, REMOTE_ADDR="192.0.2.1")
    assert r.status_code == 302
    assert client.get("/admin/").status_code == 200


def test_the_client_address_comes_from_x_forwarded_for_only_through_a_trusted_proxy(settings):
    factory = RequestFactory()
    spoofed = factory.get("/", REMOTE_ADDR="203.0.113.5", HTTP_X_FORWARDED_FOR="192.0.2.77")
    assert throttle.client_address(spoofed) == "203.0.113.5"
    settings.WINDTUNNEL = {**settings.WINDTUNNEL, "TRUSTED_PROXIES": ["10.0.0.0/8", "::1"]}
    # the client's own claim (left) is passed over: the closest proxy saw 198.51.100.200
    proxied = factory.get(
        "/",
        REMOTE_ADDR="10.0.0.2",
        HTTP_X_FORWARDED_FOR="192.0.2.77, 198.51.100.200, 10.0.0.9",
    )
    assert throttle.client_address(proxied) == "198.51.100.200"
    direct = factory.get("/", REMOTE_ADDR="203.0.113.5", HTTP_X_FORWARDED_FOR="10.0.0.9")
    assert throttle.client_address(direct) == "203.0.113.5"
