"""Session sign-in for the web UI: CSRF cookie, login, logout, and CSRF on later writes."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

LOGIN = "/api/v1/auth/login/"


@pytest.fixture
def browser(db):
    """A browser-like client: Django enforces CSRF exactly as it does for the SPA."""
    return Client(enforce_csrf_checks=True)


def csrf(client) -> str:
    r = client.get("/api/v1/auth/csrf/")
    assert r.status_code == 200
    token = r.json()["csrf_token"]
    assert client.cookies["csrftoken"].value
    return token


def login(client, username, password, *, token=None):
    return client.post(
        LOGIN,
        {"username": username, "password": password},
        content_type="application/json",
        headers={"X-CSRFToken": token or csrf(client)},
    )


def test_login_sets_a_session_and_returns_the_signed_in_user(browser, make_tenant):
    tenant = make_tenant("acme")
    r = login(browser, "acme-user", "pw-acme")
    assert r.status_code == 200, r.json()
    assert r.json() == {
        "username": "acme-user",
        "tenant": "acme",
        "is_admin": True,
        "is_staff": False,
    }
    assert browser.cookies["sessionid"].value
    me = browser.get("/api/v1/me/")
    assert me.status_code == 200 and me.json()["tenant"] == tenant.name


def test_wrong_password_is_a_clear_401(browser, make_tenant):
    make_tenant("acme")
    r = login(browser, "acme-user", "nope")
    assert r.status_code == 401
    assert r.json()["message"] == "wrong username or password"
    assert "sessionid" not in browser.cookies


def test_missing_fields_name_the_field(browser):
    r = browser.post(
        LOGIN,
        {"username": "someone"},
        content_type="application/json",
        headers={"X-CSRFToken": csrf(browser)},
    )
    assert r.status_code == 400
    assert r.json()["field"] == "password"
    assert "password" in r.json()["message"]


def test_login_without_the_csrf_token_is_refused_with_a_hint(browser, make_tenant):
    make_tenant("acme")
    r = browser.post(
        LOGIN, {"username": "acme-user", "password": "pw-acme"}, content_type="application/json"
    )
    assert r.status_code == 403
    assert "reload the page" in r.json()["message"]
    assert "sessionid" not in browser.cookies


def test_a_user_of_no_tenant_cannot_sign_in(browser):
    get_user_model().objects.create_user("loner", password="pw-loner")
    r = login(browser, "loner", "pw-loner")
    assert r.status_code == 403
    assert "no tenant" in r.json()["message"]


def test_writes_with_the_session_need_the_csrf_header(browser, make_tenant, catalog):
    make_tenant("acme")
    assert login(browser, "acme-user", "pw-acme").status_code == 200
    spec = {"name": "s", "template": "airfoil2d", "parameters": {"aoa": {"values": [0, 4]}}}
    r = browser.post("/api/v1/studies/preview/", spec, content_type="application/json")
    assert r.status_code == 403  # the session alone is not enough: CSRF
    # login rotates the token: the new one is in the cookie
    token = browser.cookies["csrftoken"].value
    r = browser.post(
        "/api/v1/studies/preview/",
        spec,
        content_type="application/json",
        headers={"X-CSRFToken": token},
    )
    assert r.status_code == 200, r.json()
    assert r.json()["run_count"] == 2


def test_logout_ends_the_session(browser, make_tenant):
    make_tenant("acme")
    assert login(browser, "acme-user", "pw-acme").status_code == 200
    token = browser.cookies["csrftoken"].value
    r = browser.post("/api/v1/auth/logout/", headers={"X-CSRFToken": token})
    assert r.status_code == 204
    assert browser.get("/api/v1/me/").status_code in (401, 403)


def test_me_tells_staff_apart(browser, make_tenant):
    tenant = make_tenant("ops")
    tenant.user.is_staff = True
    tenant.user.save()
    r = login(browser, "ops-user", "pw-ops")
    assert r.status_code == 200 and r.json()["is_staff"] is True


def test_a_huge_username_or_password_is_a_400_naming_the_field(browser):
    r = login(browser, "u" * 151, "p")
    assert r.status_code == 400 and r.json()["field"] == "username"
    assert "too long" in r.json()["message"]
    r = Client().post(
        "/api/v1/auth/token/",
        {"username": "u", "password": "p" * 5000},
        content_type="application/json",
    )
    assert r.status_code == 400 and r.json()["field"] == "password"
