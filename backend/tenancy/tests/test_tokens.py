"""Named API tokens: made with the key shown once, listed without it, revoked,
expiring, replaced on signing in again with a name, capped per user, and refused on HTTP and
websockets once revoked or expired."""

from __future__ import annotations

import asyncio
import importlib
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.apps import apps
from django.db import connection
from django.utils import timezone
from drf_spectacular.generators import SchemaGenerator
from jsonschema import Draft202012Validator
from rest_framework.test import APIClient

from tenancy.authentication import TokenQueryMiddleware
from tenancy.models import TOKENS_PAGE, ApiToken
from tenancy.tokens import TOKEN_MAX_DAYS, TOKENS_PER_USER, api_token_create

TOKENS = "/api/v1/tokens/"
SIGN_IN = "/api/v1/auth/token/"


@pytest.fixture
def me(make_tenant) -> APIClient:
    """A member signed in with a session (as the dashboard is): `me.tenant`."""
    tenant = make_tenant()
    client = APIClient()
    client.force_authenticate(tenant.user)
    client.tenant = tenant  # type: ignore[attr-defined]
    return client


def with_key(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def make(client: APIClient, **body: Any):
    return client.post(TOKENS, body, format="json")


def sign_in(tenant, name: str | None = None):
    body = {"username": tenant.user.username, "password": f"pw-{tenant.name}"}
    if name is not None:
        body["name"] = name
    return APIClient().post(SIGN_IN, body, format="json")


# --- made, listed, used, revoked -----------------------------------------------------------


def test_a_new_token_shows_its_key_once_and_signs_in_with_it(me):
    r = make(me, name="laptop")
    assert r.status_code == 201, r.json()
    made = r.json()
    assert made["name"] == "laptop" and made["key"].startswith("wt_")
    assert made["prefix"] == made["key"][:10] and made["expires_at"] is None
    assert made["last_used_at"] is None and made["expired"] is False
    # only its hash is stored
    token = ApiToken.objects.get(pk=made["id"])
    assert made["key"] not in (token.key_hash, token.key_prefix)

    listed = me.get(TOKENS).json()
    assert [t["name"] for t in listed] == ["laptop"]
    assert "key" not in listed[0] and made["key"] not in str(listed)

    r = with_key(made["key"]).get("/api/v1/me/")
    assert r.status_code == 200 and r.json()["username"] == me.tenant.user.username


def test_the_list_says_when_each_token_was_last_used_and_costs_one_query(
    me, django_assert_num_queries
):
    used = make(me, name="used").json()
    make(me, name="idle", expires_in_days=30)
    before = timezone.now()
    assert with_key(used["key"]).get("/api/v1/quota/").status_code == 200
    with django_assert_num_queries(1):
        listed = {t["name"]: t for t in me.get(TOKENS).json()}
    assert datetime.fromisoformat(listed["used"]["last_used_at"]) >= before
    assert listed["idle"]["last_used_at"] is None
    expires = datetime.fromisoformat(listed["idle"]["expires_at"])
    assert timedelta(days=29, hours=23) < expires - before <= timedelta(days=30)
    assert [t["name"] for t in me.get(TOKENS).json()] == ["idle", "used"]  # newest first


def test_a_revoked_token_is_refused_with_401(me):
    made = make(me, name="ci").json()
    client = with_key(made["key"])
    assert client.get("/api/v1/me/").status_code == 200
    assert me.delete(f"{TOKENS}{made['id']}/").status_code == 204
    r = client.get("/api/v1/me/")
    assert r.status_code == 401
    assert r.json()["message"].startswith("Invalid or revoked API token")
    assert TOKENS_PAGE in r.json()["message"]
    assert r["WWW-Authenticate"] == "Token"
    assert me.get(TOKENS).json() == []
    # revoked once is gone: again is a 404
    assert me.delete(f"{TOKENS}{made['id']}/").status_code == 404


def test_an_expired_token_is_refused_saying_when_it_expired_and_where_to_make_one(me):
    made = make(me, name="short", expires_in_days=1).json()
    client = with_key(made["key"])
    assert client.get("/api/v1/me/").status_code == 200
    ended = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)
    ApiToken.objects.filter(pk=made["id"]).update(expires_at=ended)
    r = client.get("/api/v1/me/")
    assert r.status_code == 401
    body = r.json()
    assert body["code"] == "token_expired"
    assert "expired 2026-03-01 09:30 UTC" in body["message"]
    assert TOKENS_PAGE in body["message"] and "'short'" in body["message"]
    assert me.get(TOKENS).json()[0]["expired"] is True


def test_a_token_can_revoke_itself_and_list_its_siblings(me):
    made = make(me, name="script").json()
    client = with_key(made["key"])
    assert [t["name"] for t in client.get(TOKENS).json()] == ["script"]
    assert client.delete(f"{TOKENS}{made['id']}/").status_code == 204
    assert client.get(TOKENS).status_code == 401


def test_the_tokens_api_needs_a_signed_in_user():
    assert APIClient().get(TOKENS).status_code in (401, 403)
    assert APIClient().post(TOKENS, {"name": "x"}, format="json").status_code in (401, 403)


def test_the_answers_match_the_api_schema(me):
    openapi = SchemaGenerator().get_schema(request=None, public=True)

    def problems(component: str, instance: Any) -> list[str]:
        root = {"components": openapi["components"], "$ref": f"#/components/schemas/{component}"}
        return [e.message for e in Draft202012Validator(root).iter_errors(instance)]

    made = make(me, name="a", expires_in_days=7).json()
    assert problems("NewApiToken", made) == []
    with_key(made["key"]).get("/api/v1/me/")
    make(me, name="b")
    listed = me.get(TOKENS).json()
    assert len(listed) == 2 and all(problems("ApiToken", t) == [] for t in listed)


# --- walls between users -------------------------------------------------------------------


def test_another_users_token_is_a_404_and_stays_valid(me, make_tenant):
    other = make_tenant()
    theirs = api_token_create(user=other.user, name="theirs")
    their_id = ApiToken.objects.get(user=other.user).pk
    r = me.delete(f"{TOKENS}{their_id}/")
    assert r.status_code == 404 and "no API token with id" in r.json()["message"]
    assert with_key(theirs).get("/api/v1/me/").status_code == 200
    assert me.get(TOKENS).json() == []
    assert [t["name"] for t in with_key(theirs).get(TOKENS).json()] == ["theirs"]


@pytest.mark.parametrize("bad", ["abc", "0", "-1", "99999999999999999999999", "１"])
def test_an_id_that_is_no_token_is_a_404_not_an_error(me, bad):
    r = me.delete(f"{TOKENS}{bad}/")
    assert r.status_code == 404, r.content
    assert r.json()["code"] == "not_found"


# --- what a new token may be ---------------------------------------------------------------


def test_names_are_required_short_and_unique_per_user(me, make_tenant):
    r = make(me)
    assert r.status_code == 400 and r.json()["field"] == "name"
    r = make(me, name="   ")
    assert r.status_code == 400 and r.json()["field"] == "name"
    r = make(me, name="x" * 101)
    assert r.status_code == 400 and r.json()["field"] == "name"
    assert "100" in r.json()["message"]
    r = make(me, name="lap\x00top")
    assert r.status_code == 400 and r.json()["field"] == "name"
    assert make(me, name="x" * 100).status_code == 201
    first = make(me, name="laptop").json()
    r = make(me, name="laptop")
    assert r.status_code == 400 and r.json()["field"] == "name"
    assert "a token named 'laptop' already" in r.json()["message"]
    assert "revoke" in r.json()["message"] and r.json()["details"] == {"id": first["id"]}
    # another user may use the same name
    other = APIClient()
    other.force_authenticate(make_tenant().user)
    assert make(other, name="laptop").status_code == 201


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        ({"expires_in_days": 0}, "expires_in_days", "at least 1 day"),
        ({"expires_in_days": TOKEN_MAX_DAYS + 1}, "expires_in_days", "at most 365 days"),
        ({"expires_in_days": "soon"}, "expires_in_days", "integer"),
        ({"expires_at": "2001-01-01T00:00:00Z"}, "expires_at", "is in the past"),
        ({"expires_at": "3000-01-01T00:00:00Z"}, "expires_at", "more than 365 days ahead"),
        ({"expires_at": "tomorrow"}, "expires_at", "format"),
        (
            {"expires_in_days": 7, "expires_at": "2100-01-01T00:00:00Z"},
            "expires_at",
            "not both",
        ),
    ],
)
def test_an_expiry_must_be_in_the_future_and_within_a_year(me, body, field, says):
    r = make(me, name="t", **body)
    assert r.status_code == 400, r.json()
    assert r.json()["field"] == field and says in r.json()["message"], r.json()
    assert me.get(TOKENS).json() == []


def test_an_expiry_can_be_a_moment(me):
    at = (timezone.now() + timedelta(days=90)).replace(microsecond=0)
    r = make(me, name="q3", expires_at=at.isoformat())
    assert r.status_code == 201, r.json()
    assert datetime.fromisoformat(r.json()["expires_at"]) == at


def test_a_user_holds_at_most_the_cap_and_is_told_to_revoke_one(me):
    for i in range(TOKENS_PER_USER - 1):
        api_token_create(user=me.tenant.user, name=f"t{i}")
    assert make(me, name="last").status_code == 201
    r = make(me, name="one-too-many")
    assert r.status_code == 400
    message = r.json()["message"]
    assert f"({TOKENS_PER_USER}" in message and "revoke one" in message
    assert TOKENS_PAGE in message
    assert r.json()["details"] == {"held": TOKENS_PER_USER, "limit": TOKENS_PER_USER}
    # signing in with a new name is held to it too; with a name held, it replaces that token
    assert sign_in(me.tenant, "new-laptop").status_code == 400
    assert sign_in(me.tenant, "last").status_code == 200
    # once one is revoked there is room again
    last = next(t for t in me.get(TOKENS).json() if t["name"] == "last")
    assert me.delete(f"{TOKENS}{last['id']}/").status_code == 204
    assert make(me, name="one-too-many").status_code == 201


# --- signing in ----------------------------------------------------------------------------


def test_signing_in_again_with_a_name_replaces_that_token(make_tenant):
    tenant = make_tenant()
    first = sign_in(tenant, "laptop")
    assert first.status_code == 200, first.json()
    second = sign_in(tenant, "laptop")
    assert second.status_code == 200
    old, new = first.json()["token"], second.json()["token"]
    assert old != new
    assert ApiToken.objects.filter(user=tenant.user).count() == 1
    assert with_key(old).get("/api/v1/me/").status_code == 401
    assert with_key(new).get("/api/v1/me/").status_code == 200
    # another name is another token; no name is the token named "api"
    assert sign_in(tenant, "ci").status_code == 200
    assert sign_in(tenant).status_code == 200
    assert sign_in(tenant).status_code == 200
    names = sorted(ApiToken.objects.filter(user=tenant.user).values_list("name", flat=True))
    assert names == ["api", "ci", "laptop"]


def test_signing_in_refuses_a_bad_name(make_tenant):
    tenant = make_tenant()
    r = sign_in(tenant, "x" * 101)
    assert r.status_code == 400 and r.json()["field"] == "name"
    r = sign_in(tenant, " ")
    assert r.status_code == 400 and r.json()["field"] == "name"
    assert not ApiToken.objects.filter(user=tenant.user).exists()


def test_the_portals_own_tokens_take_a_fresh_name(make_tenant):
    user = make_tenant().user
    keys = [api_token_create(user=user) for _ in range(3)]
    names = sorted(ApiToken.objects.filter(user=user).values_list("name", flat=True))
    assert names == ["default", "default (2)", "default (3)"]
    assert all(with_key(k).get("/api/v1/me/").status_code == 200 for k in keys)


# --- websockets ----------------------------------------------------------------------------


def ws_open(query: str) -> tuple[Any, list[dict]]:
    """Open a websocket through the token middleware: the user the route behind it saw
    (None: it was never reached) and what went back to the client."""
    seen: dict[str, Any] = {}
    sent: list[dict] = []

    async def route(scope, receive, send):
        seen["user"] = scope.get("user")
        await receive()
        await send({"type": "websocket.accept"})

    async def scenario() -> None:
        inbox: asyncio.Queue[dict] = asyncio.Queue()
        await inbox.put({"type": "websocket.connect"})

        async def send(message: dict) -> None:
            sent.append(message)

        scope = {"type": "websocket", "path": "/ws/runs/x/", "query_string": query.encode()}
        await TokenQueryMiddleware(route)(scope, inbox.get, send)

    async_to_sync(scenario)()
    return seen.get("user"), sent


# committed rows: the middleware reads the token in another thread, as Channels does, whose
# database connection is opened and closed around it
def test_a_websocket_opens_with_a_valid_token_and_closes_4401_on_a_revoked_or_expired_one(
    transactional_db, me
):
    made = make(me, name="ws", expires_in_days=7).json()
    user, sent = ws_open(f"token={made['key']}")
    assert user == me.tenant.user and sent == [{"type": "websocket.accept"}]

    ApiToken.objects.filter(pk=made["id"]).update(expires_at=datetime(2026, 2, 3, 4, 5, tzinfo=UTC))
    user, sent = ws_open(f"token={made['key']}")
    assert user is None
    assert sent[0] == {"type": "websocket.accept"}
    assert sent[1]["code"] == 4401
    assert (
        sent[1]["reason"]
        == f"API token expired 2026-02-03 04:05 UTC; make a new one at {TOKENS_PAGE}"
    )
    assert len(sent[1]["reason"].encode()) <= 123

    me.delete(f"{TOKENS}{made['id']}/")
    user, sent = ws_open(f"token={made['key']}")
    assert user is None and sent[1]["code"] == 4401
    assert sent[1]["reason"].startswith("Invalid or revoked API token")


# --- the migration that made names unique --------------------------------------------------


def test_the_migration_renames_a_users_tokens_of_one_name_oldest_first(make_tenant):
    user, other = make_tenant().user, make_tenant().user
    with connection.cursor() as cur:  # as before the migration (undone with the test's rollback)
        cur.execute("ALTER TABLE tenancy_apitoken DROP CONSTRAINT uniq_api_token_name")
    keys = [api_token_create(user=user, name=f"k{i}") for i in range(4)]
    ApiToken.objects.filter(user=user).update(name="cli")
    ApiToken.objects.filter(user=user, key_prefix=keys[3][:10]).update(name="cli (2)")
    api_token_create(user=other, name="cli")
    migration = importlib.import_module("tenancy.migrations.0003_api_token_names_and_expiry")
    migration.rename_duplicates(apps, None)
    by_key = {k: ApiToken.objects.get(key_prefix=k[:10]).name for k in keys}  # made in this order
    assert [by_key[k] for k in keys] == ["cli", "cli (3)", "cli (4)", "cli (2)"]
    assert ApiToken.objects.get(user=other).name == "cli"
