"""What signed an open websocket in, whether it still does, and the orders that close the
websockets of a credential that ended.

A websocket is signed in by an API token (`?token=`) or by the dashboard's sign-in (its
session cookie). It stays open only while that credential opens the API: the token is not
revoked and not expired, the sign-in is not signed out and not expired, and its user is
active, in a tenant that is active (and, signed in by password, has not changed it since).

Who ends a credential says so after commit to the credential's group (`credentials_ended`):
every websocket it signed in, in every web process, closes with 4401 within moments. The
channel layer may lose that order, so each web process also checks its sockets' credentials
every WEBSOCKET_RECHECK_SECONDS, and at the moment one expires (tenancy.sockets).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Collection, Iterable, Mapping
from datetime import datetime
from enum import StrEnum
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.db import transaction
from django.db.models import OuterRef, Subquery

from core import live
from tenancy.models import TOKENS_PAGE, ApiToken, Membership, utc_text

#: the type of the channel-layer message that closes a consumer's websocket (its handler:
#: `credential_ended`, with the close frame's reason in `reason`)
ENDED = "credential.ended"

TOKEN_REVOKED = f"API token revoked; make a new one at {TOKENS_PAGE}"
SIGNED_OUT = "signed out; sign in again"
SIGN_IN_EXPIRED = "sign-in expired; sign in again"
PASSWORD_CHANGED = "password changed; sign in again"
ACCOUNT_ENDED = "account deactivated or removed from its tenant; ask your tenant's admin"


def token_expired(moment: datetime) -> str:
    return f"API token expired {utc_text(moment)}; make a new one at {TOKENS_PAGE}"


def tenant_deactivated(name: str) -> str:
    return f"tenant {name} is deactivated; ask an operator to activate it again"


class Kind(StrEnum):
    TOKEN = "token"
    SESSION = "session"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Credential:
    """What signed a websocket in: an API token (`key` its id) or a sign-in (`key` its
    session key). `auth_hash`: a sign-in's user's session hash when it was made (a new
    password changes it and ends the user's other sign-ins, as on HTTP)."""

    kind: Kind
    key: str
    user_id: int
    auth_hash: str = ""

    @property
    def groups(self) -> tuple[str, str]:
        """The channel groups whose `credential.ended` closes its websockets: its own, and
        its user's (all of the user's credentials)."""
        return credential_group(self.kind, self.key), user_group(self.user_id)


def credential_group(kind: Kind, key: str) -> str:
    """The group of one credential's websockets. A session key opens the dashboard: what
    goes to Redis is its digest, never the key."""
    if kind == Kind.SESSION:
        key = hashlib.sha256(key.encode()).hexdigest()[:40]
    return f"credential.{kind}.{key}"


def user_group(user_id: int) -> str:
    return f"credential.user.{user_id}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Verdict:
    """A credential as it stands: `ended` the reason it opens nothing any more (the close
    frame's text), else "" and when it expires (None: never)."""

    ended: str = ""
    expires_at: datetime | None = None


def credentials_check(
    credentials: Collection[Credential], *, now: datetime
) -> dict[Credential, Verdict]:
    """Each credential's verdict, in at most three queries whatever their number (tokens,
    sign-ins, users with their tenant): what a web process asks every few seconds for all
    its open websockets."""
    tokens = {c.key for c in credentials if c.kind == Kind.TOKEN}
    sessions = {c.key for c in credentials if c.kind == Kind.SESSION}
    token_rows = (
        {
            str(pk): expires_at
            for pk, expires_at in ApiToken.objects.filter(
                pk__in=[int(k) for k in tokens if k.isdigit()]
            ).values_list("pk", "expires_at")
        }
        if tokens
        else {}
    )
    # signed out: the row is gone (logout deletes it); expired: Django no longer loads it
    session_rows = (
        dict(
            Session.objects.filter(session_key__in=sessions).values_list(
                "session_key", "expire_date"
            )
        )
        if sessions
        else {}
    )
    users = _users({c.user_id for c in credentials})
    verdicts: dict[Credential, Verdict] = {}
    for credential in credentials:
        verdicts[credential] = _verdict(credential, token_rows, session_rows, users, now)
    return verdicts


def _verdict(
    credential: Credential,
    tokens: dict[str, datetime | None],
    sessions: dict[str, datetime],
    users: dict[int, Any],
    now: datetime,
) -> Verdict:
    expires_at: datetime | None
    if credential.kind == Kind.TOKEN:
        if credential.key not in tokens:
            return Verdict(ended=TOKEN_REVOKED)
        expires_at = tokens[credential.key]
        if expires_at is not None and expires_at <= now:
            return Verdict(ended=token_expired(expires_at))
    else:
        if credential.key not in sessions:
            return Verdict(ended=SIGNED_OUT)
        expires_at = sessions[credential.key]
        if expires_at <= now:
            return Verdict(ended=SIGN_IN_EXPIRED)
    ended = _user_ended(credential, users.get(credential.user_id))
    return Verdict(ended=ended, expires_at=None if ended else expires_at)


def _users(ids: set[int]) -> dict[int, Any]:
    """The users with what decides their access: active, the tenant they act in (the first
    membership, as tenancy.selectors.tenant_for_user) and whether it is active."""
    if not ids:
        return {}
    first = Membership.objects.filter(user_id=OuterRef("pk")).order_by("id")
    rows = (
        get_user_model()
        .objects.filter(pk__in=ids)
        .annotate(
            tenant_name=Subquery(first.values("tenant__name")[:1]),
            tenant_active=Subquery(first.values("tenant__is_active")[:1]),
        )
        .only("pk", "password", "is_active")
    )
    return {user.pk: user for user in rows}


def _user_ended(credential: Credential, user: Any) -> str:
    if user is None or not user.is_active or user.tenant_name is None:
        return ACCOUNT_ENDED
    if not user.tenant_active:
        return tenant_deactivated(user.tenant_name)
    if credential.kind == Kind.SESSION and user.get_session_auth_hash() != credential.auth_hash:
        return PASSWORD_CHANGED
    return ""


# --- ending credentials: the orders after commit -------------------------------------------


def credentials_ended(*, groups: Iterable[str], reason: str) -> None:
    """After commit, close every websocket of these credential or user groups (in every web
    process) with 4401 and `reason`."""
    messages = [(group, {"type": ENDED, "reason": reason}) for group in groups]
    if messages:
        transaction.on_commit(lambda: live.send_to_consumers(messages))


def token_ended(*, token_id: int, reason: str = TOKEN_REVOKED) -> None:
    credentials_ended(groups=[credential_group(Kind.TOKEN, str(token_id))], reason=reason)


def session_ended(*, session_key: str, reason: str = SIGNED_OUT) -> None:
    credentials_ended(groups=[credential_group(Kind.SESSION, session_key)], reason=reason)


def users_ended(*, user_ids: Iterable[int], reason: str = ACCOUNT_ENDED) -> None:
    credentials_ended(groups=[user_group(pk) for pk in user_ids], reason=reason)


def credential_in_scope(scope: Mapping[str, Any]) -> Credential | None:
    """What signed in a websocket's scope: the API token tenancy.authentication put there,
    else the sign-in whose cookie came with it; None for nobody."""
    token = scope.get("api_token")
    if token is not None:
        return Credential(kind=Kind.TOKEN, key=str(token.pk), user_id=token.user_id)
    user = scope.get("user")
    session = scope.get("session")
    key = getattr(session, "session_key", None)
    if user is None or not user.is_authenticated or not key:
        return None
    return Credential(
        kind=Kind.SESSION, key=key, user_id=user.pk, auth_hash=user.get_session_auth_hash()
    )
