"""Cloud backends' project limits, read by a periodic task, never by the scheduler.

A periodic task reads each cloud backend's project limits into `Backend.cloud_limits`;
admission treats them as a cap on that backend (quotas.fit: the effective limit is the
smaller of the portal's and the cloud's; runs held by the cloud's wait with the reason
"cloud project limit").
"""

from __future__ import annotations

import logging
from typing import Any

from django.utils import timezone

from catalog.models import Backend
from compute.drivers import DriverError, driver_for, supports
from core import jobs
from core.jobs import Job
from orchestration.drivers.capabilities import CloudLimited

log = logging.getLogger(__name__)


def cloud_limits_refresh(*, backend: Backend) -> dict[str, Any] | None:
    """Read the project's compute limits into the backend row; None when the cloud failed."""
    try:
        limits = driver_for(backend).cloud_limits().to_dict()
    except DriverError as exc:
        Backend.objects.filter(pk=backend.pk).update(cloud_error=str(exc)[:2000])
        log.warning("cannot read the limits of %s: %s", backend.name, exc)
        return None
    changed = limits != (backend.cloud_limits or {})
    Backend.objects.filter(pk=backend.pk).update(
        cloud_limits=limits, cloud_limits_at=timezone.now(), cloud_error=""
    )
    backend.cloud_limits = limits
    if changed:  # a raised limit may let queued runs in now
        jobs.enqueue(Job.SCHEDULE_ALL)
    return limits


def cloud_backends() -> list[Backend]:
    """The enabled backends that sit in a cloud project with limits of its own."""
    return [b for b in Backend.objects.filter(enabled=True) if supports(b, CloudLimited)]


def cloud_limits_refresh_all() -> int:
    return sum(cloud_limits_refresh(backend=b) is not None for b in cloud_backends())
