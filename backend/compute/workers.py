"""What a Celery worker does once when it starts."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from catalog.models import Backend
from core.runtime import tune_gc
from orchestration.drivers.base import DriverError, driver_class


def worker_ready(**_: Any) -> None:
    """Warm up the drivers of every kind of enabled backend (the local driver's fork server:
    the first local run starts at once), then keep the garbage collector off the hot paths."""
    for kind in sorted(set(Backend.objects.filter(enabled=True).values_list("kind", flat=True))):
        try:
            driver_class(kind).warm_up(work_root=str(settings.RUNS_DIR))
        except DriverError:
            continue  # a backend of a kind this portal no longer has
    tune_gc()
