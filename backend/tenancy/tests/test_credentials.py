"""The check a web process makes of its open websockets' credentials: what ends each one,
and its cost, which does not grow with the number of sockets (the websockets themselves
closing: telemetry/tests/test_live_credentials.py)."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.sessions.backends.db import SessionStore
from django.contrib.sessions.models import Session
from django.utils import timezone

from tenancy.credentials import Credential, Kind, credentials_check
from tenancy.models import ApiToken, Membership
from tenancy.services import api_token_create


def token_of(user, name: str) -> Credential:
    api_token_create(user=user, name=name)
    token = ApiToken.objects.get(user=user, name=name)
    return Credential(kind=Kind.TOKEN, key=str(token.pk), user_id=user.pk)


def sign_in_of(user) -> Credential:
    store = SessionStore()
    store.create()
    return Credential(
        kind=Kind.SESSION,
        key=store.session_key or "",
        user_id=user.pk,
        auth_hash=user.get_session_auth_hash(),
    )


def test_a_credential_that_opens_the_api_stands_until_its_expiry(make_tenant):
    user = make_tenant().user
    token, sign_in = token_of(user, "laptop"), sign_in_of(user)
    soon = timezone.now() + timedelta(minutes=5)
    ApiToken.objects.filter(pk=token.key).update(expires_at=soon)
    now = timezone.now()
    verdicts = credentials_check([token, sign_in], now=now)
    assert verdicts[token].ended == "" and verdicts[token].expires_at == soon
    assert verdicts[sign_in].ended == ""
    assert verdicts[sign_in].expires_at == Session.objects.get(pk=sign_in.key).expire_date


def test_what_ends_a_credential_is_its_close_reason(make_tenant):
    user = make_tenant("acme").user
    revoked, expired, kept = (token_of(user, n) for n in ("revoked", "expired", "kept"))
    ApiToken.objects.filter(pk=revoked.key).delete()
    ApiToken.objects.filter(pk=expired.key).update(
        expires_at=timezone.now().replace(2026, 3, 1, 9, 30, 0, 0)
    )
    signed_out, lapsed = sign_in_of(user), sign_in_of(user)
    Session.objects.filter(pk=signed_out.key).delete()
    Session.objects.filter(pk=lapsed.key).update(expire_date=timezone.now())
    now = timezone.now()
    reasons = {
        c: v.ended
        for c, v in credentials_check([revoked, expired, kept, signed_out, lapsed], now=now).items()
    }
    assert reasons == {
        revoked: "API token revoked; make a new one at /settings/tokens",
        expired: "API token expired 2026-03-01 09:30 UTC; make a new one at /settings/tokens",
        kept: "",
        signed_out: "signed out; sign in again",
        lapsed: "sign-in expired; sign in again",
    }


def test_a_users_lost_access_ends_all_their_credentials(make_tenant):
    tenant = make_tenant("acme")
    user = tenant.user
    token, sign_in = token_of(user, "cli"), sign_in_of(user)

    def reasons() -> set[str]:
        return {v.ended for v in credentials_check([token, sign_in], now=timezone.now()).values()}

    user.set_password("another one")
    user.save()
    now = timezone.now()
    assert credentials_check([sign_in], now=now)[sign_in].ended == "password changed; sign in again"
    assert credentials_check([token], now=now)[token].ended == ""  # a token outlives it

    tenant.is_active = False
    tenant.save()
    assert reasons() == {"tenant acme is deactivated; ask an operator to activate it again"}

    Membership.objects.filter(user=user).delete()
    assert reasons() == {"account deactivated or removed from its tenant; ask your tenant's admin"}


def test_checking_many_websockets_costs_three_queries_whatever_their_number(
    make_tenant, django_assert_num_queries
):
    users = [make_tenant().user for _ in range(5)]
    credentials = [token_of(u, f"t{i}") for u in users for i in range(4)]
    credentials += [sign_in_of(u) for u in users for _ in range(4)]
    with django_assert_num_queries(3):  # tokens, sign-ins, users with their tenant
        verdicts = credentials_check(credentials, now=timezone.now())
    assert len(verdicts) == 40 and not any(v.ended for v in verdicts.values())
