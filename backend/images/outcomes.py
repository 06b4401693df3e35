"""What a build's end means for the runs that wait for its image."""

from __future__ import annotations

import logging

from catalog.choices import ImageStatus
from catalog.models import Image
from core import jobs
from core.jobs import Job
from studies.choices import RunState
from studies.models import Run
from studies.transitions import runs_fail_waiting_for_image

log = logging.getLogger(__name__)


def wake_waiting(image: Image) -> None:
    """The image is ready: schedule every tenant whose runs waited for it."""
    waiting = Run.objects.filter(study__image_id=image.pk, state=RunState.PENDING)
    for tenant_id in set(waiting.values_list("tenant_id", flat=True)):
        jobs.enqueue(Job.SCHEDULE_TENANT, tenant_id)


def fail(image: Image, message: str) -> None:
    """The build failed: keep its log, and fail the runs that waited for it (they cannot
    start), each through its transition (fenced, published live)."""
    Image.objects.filter(pk=image.pk).update(status=ImageStatus.FAILED, error=message[:20_000])
    first = message.splitlines()[0] if message else "unknown error"
    runs_fail_waiting_for_image(
        image_id=image.pk,
        message=f"image {image.name}@{image.digest[:19]}… failed to build: {first}",
    )
    log.warning("image %s (%s) failed to build: %s", image.pk, image.digest, first)
