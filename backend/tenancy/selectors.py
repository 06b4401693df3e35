from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from tenancy.choices import Role
from tenancy.models import Membership, Tenant


def tenant_for_user(*, user: AbstractBaseUser | AnonymousUser) -> Tenant | None:
    """The tenant a user acts in (a user belongs to one tenant; the first if several)."""
    if not user or not user.is_authenticated:
        return None
    cached = getattr(user, "_windtunnel_tenant", False)
    if cached is not False:
        return cached
    membership = (
        Membership.objects.select_related("tenant").filter(user=user).order_by("id").first()
    )
    tenant = membership.tenant if membership else None
    user._windtunnel_tenant = tenant  # type: ignore[union-attr]
    return tenant


def user_is_tenant_admin(*, user) -> bool:
    if getattr(user, "is_superuser", False):
        return True
    return Membership.objects.filter(user=user, role=Role.ADMIN).exists()
