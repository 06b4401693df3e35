"""Reads of a tenant's quota."""

from __future__ import annotations

from django.conf import settings
from django.db import connection

from quotas.fit import run_disk_gb
from quotas.models import Quota


def run_disk_budget_gb(*, tenant_id: int) -> float:
    """The disk budget a run of the tenant starts with (quotas.fit.run_disk_gb): the
    deployment's WINDTUNNEL_RUN_DISK_GB, capped by the tenant's storage quota (every tenant
    has a quota row; the defaults stand in for a missing one). One statement without the
    ORM: dispatch reads it for every batch of runs."""
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT storage_gb FROM {Quota._meta.db_table} WHERE tenant_id = %s", [tenant_id]
        )
        row = cur.fetchone()
    quota = Quota(storage_gb=row[0]) if row else Quota()
    return run_disk_gb(quota=quota, default_gb=settings.WINDTUNNEL["RUN_DISK_GB"])
