from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import transaction

from core.exceptions import ApplicationError, Conflict, ErrorCode
from tenancy.choices import Role
from tenancy.credentials import tenant_deactivated, users_ended
from tenancy.models import Membership, Tenant

# tokens have a module of their own; the portal's scripts and tests make theirs with this
from tenancy.tokens import api_token_create as api_token_create


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


# --- operators: tenants and their members (administration's API) ---------------------------


def _name_taken(name: str, *, other_than: int | None = None) -> bool:
    qs = Tenant.objects.filter(name=name)
    if other_than is not None:
        qs = qs.exclude(pk=other_than)
    return qs.exists()


@transaction.atomic
def tenant_create(*, name: str, display_name: str = "") -> Tenant:
    """A new tenant (no members yet; its quota: quotas.services.tenant_open)."""
    if _name_taken(name):
        raise Conflict(
            f"a tenant named {name!r} exists already; choose another name",
            code=ErrorCode.CONFLICT,
        )
    return Tenant.objects.create(name=name, display_name=display_name or name)


@transaction.atomic
def tenant_update(
    *,
    tenant: Tenant,
    name: str | None = None,
    display_name: str | None = None,
    is_active: bool | None = None,
) -> Tenant:
    """Rename a tenant (its slug and/or its display name), deactivate or activate it.

    A deactivated tenant's members are refused by the API (tenancy.permissions) and their
    open websockets are closed; runs it already queued or started go on."""
    tenant = Tenant.objects.select_for_update().get(pk=tenant.pk)
    if name is not None and name != tenant.name:
        if _name_taken(name, other_than=tenant.pk):
            raise Conflict(
                f"a tenant named {name!r} exists already; choose another name",
                code=ErrorCode.CONFLICT,
            )
        tenant.name = name
    if display_name is not None:
        tenant.display_name = display_name or tenant.name
    if is_active is not None:
        if tenant.is_active and not is_active:
            users_ended(
                user_ids=tenant.memberships.values_list("user_id", flat=True),
                reason=tenant_deactivated(tenant.name),
            )
        tenant.is_active = is_active
    tenant.save()
    return tenant


def user_find(*, ref: str) -> User:
    """An existing user by username, or by e-mail address (when exactly one has it)."""
    ref = ref.strip()
    users = get_user_model().objects
    user = users.filter(username=ref).first()
    if user is None and "@" in ref:
        matches = list(users.filter(email__iexact=ref)[:2])
        if len(matches) > 1:
            raise ApplicationError(
                f"more than one user has the e-mail address {ref!r}; give the username instead",
                field="user",
            )
        user = matches[0] if matches else None
    if user is None:
        raise ApplicationError(
            f"no user with the username or e-mail address {ref!r}; the user must exist "
            "(create accounts in the Django admin, or let them sign in once)",
            field="user",
        )
    return user


def _owners_left(membership: Membership) -> int:
    """The tenant's admins other than this membership."""
    return (
        Membership.objects.filter(tenant_id=membership.tenant_id, role=Role.ADMIN)
        .exclude(pk=membership.pk)
        .count()
    )


def _refuse_last_owner(membership: Membership, what: str) -> None:
    if membership.role == Role.ADMIN and _owners_left(membership) == 0:
        raise ApplicationError(
            f"{membership.user} is the last admin of tenant {membership.tenant.name}: {what} "
            "would leave it without one. Make another member an admin first.",
            field="role",
        )


@transaction.atomic
def membership_add(*, tenant: Tenant, user_ref: str, role: Role) -> Membership:
    """Add an existing user (username or e-mail) to the tenant with a role. A user acts in
    one tenant, so a member of another tenant is refused (remove them there first)."""
    user = user_find(ref=user_ref)
    elsewhere = (
        Membership.objects.filter(user=user).exclude(tenant=tenant).select_related("tenant")
    ).first()
    if elsewhere is not None:
        raise Conflict(
            f"{user} is a member of tenant {elsewhere.tenant.name}; a user works in one tenant, "
            "so remove them there first",
            code=ErrorCode.CONFLICT,
            field="user",
        )
    if Membership.objects.filter(user=user, tenant=tenant).exists():
        raise Conflict(
            f"{user} is a member of {tenant.name} already; change their role instead",
            code=ErrorCode.CONFLICT,
            field="user",
        )
    return Membership.objects.create(user=user, tenant=tenant, role=role)


@transaction.atomic
def membership_set_role(*, membership: Membership, role: Role) -> Membership:
    """Change a member's role; the tenant's last admin stays an admin."""
    # the tenant's memberships locked, so two demotions at once cannot both pass the check
    list(Membership.objects.select_for_update().filter(tenant_id=membership.tenant_id))
    membership = Membership.objects.select_related("user", "tenant").get(pk=membership.pk)
    if role != Role.ADMIN:
        _refuse_last_owner(membership, f"making them a {role}")
    membership.role = role
    membership.save(update_fields=["role", "updated_at"])
    return membership


@transaction.atomic
def membership_remove(*, membership: Membership) -> None:
    """Take a member out of the tenant (their open websockets closed); never its last
    admin."""
    list(Membership.objects.select_for_update().filter(tenant_id=membership.tenant_id))
    membership = Membership.objects.select_related("user", "tenant").get(pk=membership.pk)
    _refuse_last_owner(membership, "removing them")
    membership.delete()
    users_ended(user_ids=[membership.user_id])
