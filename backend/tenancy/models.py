import hashlib
import secrets
from datetime import UTC, datetime

from django.conf import settings
from django.db import models

from core.models import TimeStamped
from tenancy.choices import Role


class Tenant(TimeStamped):
    name = models.SlugField(max_length=64, unique=True)
    display_name = models.CharField(max_length=200, blank=True)
    is_active = models.BooleanField(
        default=True,
        help_text="a deactivated tenant's members cannot use the API; its runs already queued "
        "or running go on",
    )

    def __str__(self) -> str:
        return self.name


class Membership(TimeStamped):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "tenant"], name="uniq_membership")]

    def __str__(self) -> str:
        return f"{self.user} in {self.tenant} ({self.role})"


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


#: where a user makes and revokes API tokens in the dashboard (messages point there)
TOKENS_PAGE = "/settings/tokens"


def utc_text(moment: datetime) -> str:
    """A moment as messages give it: `2026-05-01 12:00 UTC`."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


class ApiToken(TimeStamped):
    """A personal API token. Only its SHA-256 is stored; the raw key is shown once. A user's
    tokens have names of their own (signing in again with a name replaces that token); one
    with `expires_at` opens nothing from then on (tenancy.authentication)."""

    PREFIX = "wt_"
    NAME_MAX = 100

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=NAME_MAX, default="default")
    key_hash = models.CharField(max_length=64, unique=True)
    key_prefix = models.CharField(max_length=12)
    last_used_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "name"], name="uniq_api_token_name")]

    @classmethod
    def generate(cls) -> str:
        return cls.PREFIX + secrets.token_urlsafe(32)

    def expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now

    def __str__(self) -> str:
        return f"{self.key_prefix}… ({self.user})"
