"""A tenant's limits: every tenant has a quota row from the moment it exists."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from core import jobs
from core.exceptions import ApplicationError
from core.jobs import Job
from quotas.models import Quota
from tenancy.choices import Role
from tenancy.models import Tenant
from tenancy.services import tenant_create, tenant_create_or_update

# What an operator may set (quota_update): at least the minimum, at most the maximum. The
# maxima are far past any machine the portal drives; they catch a typo (an extra 000).
QUOTA_BOUNDS: dict[str, tuple[float, float]] = {
    "cores": (1, 100_000),
    "memory_gb": (0.1, 1_000_000),
    "max_nodes": (1, 10_000),
    "max_runs": (1, 100_000),
    "max_queued_runs": (1, 1_000_000),
    "storage_gb": (0, 10_000_000),
    "core_hours_budget": (0, 1_000_000_000),
    "share_weight": (0.01, 10_000),
}
INTEGER_FIELDS = ("cores", "max_nodes", "max_runs", "max_queued_runs")
NULLABLE_FIELDS = ("core_hours_budget",)  # null: no budget

# Said with every quota an operator changes (the API's answer, the admin page).
QUOTA_APPLIES = (
    "A quota applies to admission from now on: runs already admitted or running keep what "
    "they hold, even when the new quota is below it; queued runs start as they fit the new "
    "quota."
)


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


@transaction.atomic
def tenant_open(
    *, name: str, display_name: str = "", limits: dict[str, Any] | None = None
) -> Tenant:
    """A new tenant with its quota (the defaults, then `limits`, checked as quota_update
    checks them); a name in use is a 409."""
    tenant = tenant_create(name=name, display_name=display_name)
    row = Quota.objects.create(tenant=tenant)
    if limits:
        quota_update(quota=row, limits=limits)
    return tenant


def quota_limits_check(*, limits: dict[str, Any]) -> dict[str, Any]:
    """The limits an operator gave, checked: known fields, numbers within QUOTA_BOUNDS,
    whole numbers where counted, null only for the budget. An ApplicationError names the
    field and the allowed range."""
    out: dict[str, Any] = {}
    for key, value in limits.items():
        if key not in QUOTA_BOUNDS:
            raise ApplicationError(
                f"unknown quota field {key!r}; known: {', '.join(QUOTA_BOUNDS)}", field=key
            )
        low, high = QUOTA_BOUNDS[key]
        if value is None:
            if key not in NULLABLE_FIELDS:
                raise ApplicationError(f"{key} needs a value from {low:g} to {high:g}", field=key)
            out[key] = None
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ApplicationError(f"{key} must be a number", field=key)
        if key in INTEGER_FIELDS and value != int(value):
            raise ApplicationError(f"{key} must be a whole number", field=key)
        if not low <= value <= high:
            raise ApplicationError(
                f"{key} must be from {low:g} to {high:g}, got {value:g}", field=key
            )
        out[key] = int(value) if key in INTEGER_FIELDS else float(value)
    return out


@transaction.atomic
def quota_update(*, quota: Quota, limits: dict[str, Any]) -> Quota:
    """Change a tenant's quota (any of its fields; core_hours_budget null = no budget).

    It applies to admission from now on (QUOTA_APPLIES): nothing running is stopped. The
    tenant is scheduled after commit, so a raised quota starts waiting runs at once."""
    checked = quota_limits_check(limits=limits)
    row = Quota.objects.select_for_update().get(pk=quota.pk)
    for key, value in checked.items():
        setattr(row, key, value)
    if row.max_queued_runs < row.max_runs:
        raise ApplicationError(
            f"max_queued_runs ({row.max_queued_runs}) must be at least max_runs "
            f"({row.max_runs}): runs that may run at once must be allowed in the queue",
            field="max_queued_runs" if "max_queued_runs" in checked else "max_runs",
        )
    row.full_clean()
    row.save()
    jobs.enqueue(Job.SCHEDULE_TENANT, row.tenant_id)
    return row
