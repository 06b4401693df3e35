"""An open websocket lives as long as the credential that opened it, on the real stack
(uvicorn processes, the Redis channel layer): a revoked, replaced or expired token, a
sign-out or an expired sign-in, a user who lost access close its sockets with 4401 and the
reason, and nobody else's.

Two web processes: the stack's own (which re-checks its sockets' credentials every few
seconds) and `orders_only`, whose re-check is an hour away, so a socket there closes only
by the order sent through the channel layer by whoever ended the credential (from the other
process), or by the timer at its credential's expiry.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import timedelta

import httpx
import pytest
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session
from django.urls import get_resolver
from django.utils import timezone
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from core.stack import Stack
from studies.events import publish_study
from studies.models import Study
from studies.services import study_create
from tenancy.models import ApiToken, Membership
from tenancy.services import api_token_create

pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def orders_only(stack) -> Iterator[Stack]:
    """A second web process beside the stack's, on the same database and Redis, that does not
    re-check its sockets' credentials for an hour."""
    web = Stack()
    web.env["WINDTUNNEL_WEBSOCKET_RECHECK_SECONDS"] = "3600"
    web.start_web()
    yield web
    web.stop()


@pytest.fixture
def sockets() -> Iterator[ExitStack]:
    """The test's websockets, closed at its end."""
    with ExitStack() as stack:
        yield stack


@pytest.fixture
def study(live) -> Study:
    """A draft study of the live tenant: something to subscribe to."""
    return study_create(
        tenant=live.tenant,
        owner=live.tenant.user,
        spec={"name": "watched", "template": "cavity", "parameters": {"cells": 8}},
    )


def subscribe(
    sockets: ExitStack,
    web: Stack,
    study: Study,
    *,
    token: str | None = None,
    browser: httpx.Client | None = None,
) -> ClientConnection:
    """A socket on `web` following the study, opened with a token or a browser's sign-in
    (closed with the test's `sockets`)."""
    url = f"{web.url.replace('http://', 'ws://')}/ws/studies/{study.pk}/"
    headers = {}
    if token is not None:
        url += f"?token={token}"
    if browser is not None:
        headers = {"Cookie": f"sessionid={browser.cookies['sessionid']}", "Origin": web.url}
    ws = sockets.enter_context(connect(url, open_timeout=20, additional_headers=headers))
    first = json.loads(ws.recv(timeout=20))
    assert first["type"] == "subscribed", first
    return ws


def closed(ws: ClientConnection, *, within: float = 30) -> tuple[int, str]:
    """The code and reason the portal closes a quiet socket with (a TimeoutError: it stayed
    open)."""
    try:
        message = ws.recv(timeout=within)
    except ConnectionClosed as exc:
        assert exc.rcvd is not None, "closed without a close frame"
        return exc.rcvd.code, exc.rcvd.reason
    raise AssertionError(f"a message instead of the close: {message!r}")


def still_streams(ws: ClientConnection, study: Study) -> None:
    """The socket receives the study's next live event."""
    publish_study(study_id=study.pk, kind="study", payload={})
    message = json.loads(ws.recv(timeout=30))
    assert (message["type"], message["id"]) == ("study", str(study.pk)), message


def new_token(live, **body) -> dict:
    made = live.post("/api/v1/tokens/", json={"name": "watcher", **body})
    assert made.status_code == 201, made.text
    return made.json()


def sign_in(web: Stack, tenant) -> httpx.Client:
    """A browser signed in to the dashboard (the CSRF cookie, then the sign-in form)."""
    browser = httpx.Client(base_url=web.url, timeout=30)
    browser.get("/api/v1/auth/csrf/")
    signed = browser.post(
        "/api/v1/auth/login/",
        json={"username": tenant.user.username, "password": f"pw-{tenant.name}"},
        headers={"X-CSRFToken": browser.cookies["csrftoken"]},
    )
    assert signed.status_code == 200, signed.text
    return browser


# --- tokens --------------------------------------------------------------------------------


def test_revoking_a_token_closes_its_websockets_with_4401_and_no_other(
    sockets, live, study, orders_only
):
    doomed = new_token(live)
    first, second = (
        subscribe(sockets, orders_only, study, token=doomed["key"]),
        subscribe(sockets, orders_only, study, token=doomed["key"]),
    )
    bystander = subscribe(
        sockets, orders_only, study, token=live.headers["Authorization"].split()[1]
    )

    # revoked through the stack's web process; the sockets are in the other one
    assert live.delete(f"/api/v1/tokens/{doomed['id']}/").status_code == 204

    for ws in (first, second):
        code, reason = closed(ws)
        assert code == 4401
        assert reason == "API token revoked; make a new one at /settings/tokens"
    still_streams(bystander, study)


def test_a_token_revoked_in_the_dashboard_closes_its_websockets(sockets, live, study, orders_only):
    doomed = new_token(live)
    ws = subscribe(sockets, orders_only, study, token=doomed["key"])
    browser = sign_in(live.stack, live.tenant)
    revoked = browser.delete(
        f"/api/v1/tokens/{doomed['id']}/", headers={"X-CSRFToken": browser.cookies["csrftoken"]}
    )
    assert revoked.status_code == 204, revoked.text
    assert closed(ws)[0] == 4401


def test_signing_in_again_with_a_tokens_name_closes_the_replaced_tokens_websockets(
    sockets, live, study, orders_only
):
    body = {"username": live.tenant.user.username, "password": f"pw-{live.tenant.name}"}
    old = httpx.post(f"{live.stack.url}/api/v1/auth/token/", json={**body, "name": "laptop"})
    ws = subscribe(sockets, orders_only, study, token=old.json()["token"])
    new = httpx.post(f"{live.stack.url}/api/v1/auth/token/", json={**body, "name": "laptop"})
    assert new.status_code == 200
    assert closed(ws) == (4401, "API token revoked; make a new one at /settings/tokens")
    replacement = subscribe(sockets, orders_only, study, token=new.json()["token"])
    still_streams(replacement, study)


def test_a_token_that_expires_closes_its_websockets_at_its_expiry(
    sockets, live, study, orders_only
):
    expires_at = timezone.now() + timedelta(seconds=6)
    doomed = new_token(live, expires_at=expires_at.isoformat())
    ws = subscribe(sockets, orders_only, study, token=doomed["key"])
    code, reason = closed(ws)
    assert timezone.now() >= expires_at  # not before
    assert code == 4401 and reason.startswith("API token expired ")
    assert reason.endswith("; make a new one at /settings/tokens")


# --- sign-ins ------------------------------------------------------------------------------


def routes(resolver=None, prefix: str = "") -> Iterator[str]:
    """Every URL route of the portal."""
    for pattern in (resolver or get_resolver()).url_patterns:
        route = prefix + str(pattern.pattern)
        if hasattr(pattern, "url_patterns"):
            yield from routes(pattern, route)
        else:
            yield route


#: every way to sign out the portal has (a new one is tested here by itself)
SIGN_OUTS = sorted({f"/{route}" for route in routes() if "logout" in route})


@pytest.mark.parametrize("sign_out", SIGN_OUTS)
def test_signing_out_closes_that_sign_ins_websockets_and_no_other(
    sockets, live, study, orders_only, sign_out
):
    here, elsewhere = sign_in(live.stack, live.tenant), sign_in(live.stack, live.tenant)
    mine = subscribe(sockets, orders_only, study, browser=here)
    other = subscribe(sockets, orders_only, study, browser=elsewhere)

    out = here.post(sign_out, headers={"X-CSRFToken": here.cookies["csrftoken"]})
    assert out.status_code in (200, 204), out.text
    assert here.get("/api/v1/me/").status_code in (401, 403)

    assert closed(mine) == (4401, "signed out; sign in again")
    still_streams(other, study)


def test_a_sign_in_that_expires_closes_its_websockets_at_its_expiry(
    sockets, live, study, orders_only
):
    browser = sign_in(live.stack, live.tenant)
    expires_at = timezone.now() + timedelta(seconds=6)
    Session.objects.filter(session_key=browser.cookies["sessionid"]).update(expire_date=expires_at)
    ws = subscribe(sockets, orders_only, study, browser=browser)
    assert closed(ws) == (4401, "sign-in expired; sign in again")
    assert timezone.now() >= expires_at


# --- a user's access -----------------------------------------------------------------------


def test_removing_a_member_or_deactivating_the_tenant_closes_their_websockets(
    sockets, live, study, orders_only, make_tenant
):
    member = User.objects.create_user(username=f"{live.tenant.name}-member", password="pw")
    Membership.objects.create(user=member, tenant=live.tenant, role="member")
    removed = subscribe(sockets, orders_only, study, token=api_token_create(user=member))
    admin_socket = subscribe(
        sockets, orders_only, study, token=live.headers["Authorization"].split()[1]
    )
    operator = make_tenant().user
    operator.is_staff = True
    operator.save(update_fields=["is_staff"])
    staff = httpx.Client(
        base_url=live.stack.url,
        headers={"Authorization": f"Token {api_token_create(user=operator)}"},
        timeout=30,
    )
    members = f"/api/v1/admin/tenants/{live.tenant.name}/members/"

    assert staff.delete(f"{members}{member.pk}/").status_code == 204
    code, reason = closed(removed)
    assert code == 4401 and "removed from its tenant" in reason
    still_streams(admin_socket, study)

    assert (
        staff.patch(f"/api/v1/admin/tenants/{live.tenant.name}/", json={"active": False})
    ).status_code == 200
    assert closed(admin_socket) == (
        4401,
        f"tenant {live.tenant.name} is deactivated; ask an operator to activate it again",
    )


# --- when the order to close is lost: the stack's process checks again ----------------------


def test_a_token_deleted_without_an_order_still_closes_its_websockets(sockets, live, study):
    doomed = new_token(live)
    ws = subscribe(sockets, live.stack, study, token=doomed["key"])
    bystander = subscribe(
        sockets, live.stack, study, token=live.headers["Authorization"].split()[1]
    )
    ApiToken.objects.filter(pk=doomed["id"]).delete()  # as if the order had been lost
    assert closed(ws) == (4401, "API token revoked; make a new one at /settings/tokens")
    still_streams(bystander, study)


def test_a_password_change_closes_the_users_sign_ins_but_not_their_tokens(sockets, live, study):
    browser = sign_in(live.stack, live.tenant)
    signed_in = subscribe(sockets, live.stack, study, browser=browser)
    by_token = subscribe(sockets, live.stack, study, token=live.headers["Authorization"].split()[1])
    user = live.tenant.user
    user.set_password("a new password")
    user.save()
    assert closed(signed_in) == (4401, "password changed; sign in again")
    still_streams(by_token, study)


def test_a_deactivated_user_loses_every_websocket(sockets, live, study):
    browser = sign_in(live.stack, live.tenant)
    sockets = [
        subscribe(sockets, live.stack, study, browser=browser),
        subscribe(sockets, live.stack, study, token=live.headers["Authorization"].split()[1]),
    ]
    User.objects.filter(pk=live.tenant.user.pk).update(is_active=False)
    for ws in sockets:
        code, reason = closed(ws)
        assert code == 4401 and reason.startswith("account deactivated")
