"""Reads of a tenant's quota."""

from __future__ import annotations

from django.conf import settings

from quotas.fit import run_disk_gb
from quotas.models import Quota


def run_disk_budget_gb(*, tenant_id: int) -> float:
    """The disk budget a run of the tenant starts with (quotas.fit.run_disk_gb): the
    deployment's WINDTUNNEL_RUN_DISK_GB, capped by the tenant's storage quota (every tenant
    has a quota row; the defaults stand in for a missing one)."""
    quota = Quota.objects.filter(tenant_id=tenant_id).only("storage_gb").first() or Quota()
    return run_disk_gb(quota=quota, default_gb=settings.WINDTUNNEL["RUN_DISK_GB"])
