from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet
from rest_framework.exceptions import PermissionDenied

from tenancy.choices import Role
from tenancy.models import ApiToken, Membership, Tenant

# the user's tenant, kept on the user object (a request's user) once looked up
_TENANT_CACHE = "_windtunnel_tenant"


def tenant_for_user(*, user: AbstractBaseUser | AnonymousUser) -> Tenant | None:
    """The tenant a user acts in (a user belongs to one tenant; the first if several)."""
    if not user or not user.is_authenticated:
        return None
    if hasattr(user, _TENANT_CACHE):
        cached: Tenant | None = getattr(user, _TENANT_CACHE)
        return cached
    membership = (
        Membership.objects.select_related("tenant").filter(user_id=user.pk).order_by("id").first()
    )
    tenant = membership.tenant if membership else None
    setattr(user, _TENANT_CACHE, tenant)
    return tenant


def tenant_for_member(*, user: AbstractBaseUser | AnonymousUser) -> Tenant:
    """The tenant of a user the API's default permission (IsTenantMember) let in; a 403 for
    a user in no tenant, should a view without that permission ask (DRF's PermissionDenied:
    core.exceptions loads DRF's views, whose settings load that permission, which loads this)."""
    tenant = tenant_for_user(user=user)
    if tenant is None:
        raise PermissionDenied("You belong to no tenant; ask an admin to add you to one.")
    return tenant


def user_is_tenant_admin(*, user) -> bool:
    if getattr(user, "is_superuser", False):
        return True
    return Membership.objects.filter(user=user, role=Role.ADMIN).exists()


def api_token_list(*, user: AbstractBaseUser) -> QuerySet[ApiToken]:
    """The user's API tokens, newest first (a user holds at most tokens.TOKENS_PER_USER)."""
    return ApiToken.objects.filter(user_id=user.pk).order_by("-created_at", "-id")
