"""A tenant's limits: every tenant has a quota row from the moment it exists."""

from __future__ import annotations

from django.db import transaction

from quotas.models import Quota
from tenancy.choices import Role
from tenancy.models import Tenant
from tenancy.services import tenant_create_or_update


@transaction.atomic
def tenant_provision(
    *,
    name: str,
    username: str | None = None,
    password: str | None = None,
    role: Role = Role.ADMIN,
    quota: dict[str, float | int | None] | None = None,
) -> Tenant:
    """A tenant ready to use: created (or updated), optionally a user in it, and its quota
    (defaults, then what `quota` sets; None values are left as they are)."""
    tenant = tenant_create_or_update(name=name, username=username, password=password, role=role)
    quota_set(tenant=tenant, limits=quota or {})
    return tenant


def quota_set(*, tenant: Tenant, limits: dict[str, float | int | None]) -> Quota:
    """The tenant's quota row, created with the defaults when missing, then the given limits
    applied and checked (a ValidationError names the field)."""
    row, _ = Quota.objects.get_or_create(tenant=tenant)
    changed = {k: v for k, v in limits.items() if v is not None}
    if changed:
        for key, value in changed.items():
            setattr(row, key, value)
        row.full_clean()
        row.save()
    return row
