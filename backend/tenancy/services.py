from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import transaction

from tenancy.choices import Role
from tenancy.models import ApiToken, Membership, Tenant, hash_token


@transaction.atomic
def tenant_create_or_update(
    *,
    name: str,
    username: str | None = None,
    password: str | None = None,
    role: Role = Role.ADMIN,
) -> Tenant:
    """Create (or update) a tenant and, optionally, a user in it (its quota:
    quotas.services.tenant_provision)."""
    tenant, _ = Tenant.objects.get_or_create(name=name, defaults={"display_name": name})
    if username:
        user_model = get_user_model()
        user, created = user_model.objects.get_or_create(username=username)
        if password:
            user.set_password(password)
            user.save()
        elif created:
            user.set_unusable_password()
            user.save()
        Membership.objects.update_or_create(user=user, tenant=tenant, defaults={"role": role})
    return tenant


def api_token_create(*, user, name: str = "default") -> str:
    """Create a token and return the raw key (shown once; only its hash is stored)."""
    raw = ApiToken.generate()
    ApiToken.objects.create(user=user, name=name, key_hash=hash_token(raw), key_prefix=raw[:10])
    return raw
