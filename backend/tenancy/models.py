import hashlib
import secrets

from django.conf import settings
from django.db import models

from core.models import TimeStamped
from tenancy.choices import Role


class Tenant(TimeStamped):
    name = models.SlugField(max_length=64, unique=True)
    display_name = models.CharField(max_length=200, blank=True)

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


class ApiToken(TimeStamped):
    """A personal API token. Only its SHA-256 is stored; the raw key is shown once."""

    PREFIX = "wt_"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, default="default")
    key_hash = models.CharField(max_length=64, unique=True)
    key_prefix = models.CharField(max_length=12)
    last_used_at = models.DateTimeField(null=True, blank=True)

    @classmethod
    def generate(cls) -> str:
        return cls.PREFIX + secrets.token_urlsafe(32)

    def __str__(self) -> str:
        return f"{self.key_prefix}… ({self.user})"
