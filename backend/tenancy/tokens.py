"""Personal API tokens: made (the key shown once), replaced on signing in again, revoked
(each request checks its key: tenancy.authentication; the websockets a revoked token opened
are closed: tenancy.credentials).

The rules for what a user makes through the API (a name of their own, an expiry within
TOKEN_MAX_DAYS, at most TOKENS_PER_USER tokens) live in `api_token_issue`; the sign-in
endpoint and the tokens API both go through it. `api_token_create` is for the portal's own
scripts and tests: a fresh name, no cap.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from core.exceptions import ApplicationError, NotFound
from tenancy.credentials import token_ended
from tenancy.models import TOKENS_PAGE, ApiToken, hash_token, utc_text

#: tokens a user may hold (expired ones count until revoked): past it, revoke one first
TOKENS_PER_USER = 50
#: the longest a token made with an expiry may live
TOKEN_MAX_DAYS = 365
#: how many characters of the key are kept to recognise it by ("wt_" and 7 more)
PREFIX_LENGTH = 10
# a bigint primary key: a larger id in a path is no token's (and not a database error)
ID_MAX = 2**63 - 1


@dataclasses.dataclass(frozen=True, kw_only=True)
class IssuedToken:
    """A new token and its raw key: the only time the key is known (only its hash is kept)."""

    token: ApiToken
    key: str


def api_token_expiry(
    *, expires_in_days: int | None = None, expires_at: datetime | None = None
) -> datetime | None:
    """When a token asked for with either (not both) expires; None: never. A 400 naming the
    field for a moment past, or further than TOKEN_MAX_DAYS ahead."""
    if expires_in_days is not None and expires_at is not None:
        raise ApplicationError("give expires_in_days or expires_at, not both", field="expires_at")
    now = timezone.now()
    if expires_in_days is not None:
        if not 1 <= expires_in_days <= TOKEN_MAX_DAYS:
            raise ApplicationError(
                f"expires_in_days must be from 1 to {TOKEN_MAX_DAYS}; got {expires_in_days} "
                "(leave it out for a token that does not expire)",
                field="expires_in_days",
            )
        return now + timedelta(days=expires_in_days)
    if expires_at is None:
        return None
    if expires_at <= now:
        raise ApplicationError(
            f"expires_at {utc_text(expires_at)} is in the past; give a moment in the future "
            f"(at most {TOKEN_MAX_DAYS} days ahead), or leave it out for a token that does "
            "not expire",
            field="expires_at",
        )
    # a day's grace: "365 days from now" computed on a client a little behind still passes
    if expires_at > now + timedelta(days=TOKEN_MAX_DAYS + 1):
        raise ApplicationError(
            f"expires_at {utc_text(expires_at)} is more than {TOKEN_MAX_DAYS} days ahead; a "
            "token may live a year at most (or not expire at all: leave it out)",
            field="expires_at",
        )
    return expires_at


@transaction.atomic
def api_token_issue(
    *,
    user: AbstractBaseUser,
    name: str,
    expires_at: datetime | None = None,
    replace: bool = False,
) -> IssuedToken:
    """A new token named `name` for the user. Its name must be new to the user, unless
    `replace` (signing in again): then the token of that name, if any, is revoked and this
    one takes its place. A user holds at most TOKENS_PER_USER tokens."""
    # the user's row locked: two requests at once cannot both pass the cap or the name check
    get_user_model().objects.select_for_update().filter(pk=user.pk).first()
    name = name.strip()
    if not name:
        raise ApplicationError("name: give the token a name (e.g. 'laptop', 'ci')", field="name")
    mine = ApiToken.objects.filter(user_id=user.pk)
    existing = mine.filter(name=name).first()
    if existing is not None and replace:
        token_ended(token_id=existing.pk)  # after commit
        existing.delete()
    elif existing is not None:
        expired = (
            f", expired {utc_text(existing.expires_at)}"
            if existing.expires_at and existing.expired(timezone.now())
            else ""
        )
        raise ApplicationError(
            f"you have a token named {name!r} already (made {utc_text(existing.created_at)}"
            f"{expired}); choose another name, or revoke that one first ({TOKENS_PAGE} in the "
            "dashboard)",
            field="name",
            details={"id": existing.pk},
        )
    held = mine.count()
    if held >= TOKENS_PER_USER:
        raise ApplicationError(
            f"you hold {held} API tokens, the most one user may have ({TOKENS_PER_USER}, "
            f"expired ones included); revoke one you no longer use under API tokens in the "
            f"dashboard ({TOKENS_PAGE}) or with `windtunnel tokens revoke NAME`, then try again",
            field="name",
            details={"held": held, "limit": TOKENS_PER_USER},
        )
    return _insert(user=user, name=name, expires_at=expires_at)


def api_token_create(*, user: AbstractBaseUser, name: str = "default") -> str:
    """The raw key of a new, unexpiring token for the portal's own scripts and tests (the
    demo, benchmarks, fixtures): named `name`, or `name (2)`, `name (3)`, … when the user has
    one so named already; not held to the cap."""
    with transaction.atomic():
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()
        taken = set(
            ApiToken.objects.filter(user_id=user.pk, name__startswith=name).values_list(
                "name", flat=True
            )
        )
        unique, number = name, 1
        while unique in taken:
            number += 1
            suffix = f" ({number})"
            unique = name[: ApiToken.NAME_MAX - len(suffix)] + suffix
        return _insert(user=user, name=unique, expires_at=None).key


def _insert(*, user: AbstractBaseUser, name: str, expires_at: datetime | None) -> IssuedToken:
    raw = ApiToken.generate()
    token = ApiToken.objects.create(
        user_id=user.pk,
        name=name,
        key_hash=hash_token(raw),
        key_prefix=raw[:PREFIX_LENGTH],
        expires_at=expires_at,
    )
    return IssuedToken(token=token, key=raw)


def api_token_revoke(*, user: AbstractBaseUser, token_id: int | str) -> ApiToken:
    """Revoke (delete) one of the user's tokens: it opens nothing from now on, and the
    websockets it opened are closed. Another user's token, or none, is a 404."""
    key = _token_id(token_id)
    token = ApiToken.objects.filter(user_id=user.pk, pk=key).first() if key else None
    if token is None:
        raise NotFound(
            f"you have no API token with id {token_id}; list yours with GET /api/v1/tokens/"
        )
    revoked = token.pk
    token.delete()
    token_ended(token_id=revoked)
    return token


def _token_id(value: int | str) -> int | None:
    text = str(value)
    if not text.isascii() or not text.isdigit():
        return None
    number = int(text)
    return number if 1 <= number <= ID_MAX else None
