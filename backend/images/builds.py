"""Image builds: container images with buildah, VM images baked on cloud backends (vm.py).

A build is the one long Celery task (`images.build_image`, a minute or two when nothing is
cached): it holds a PostgreSQL advisory lock on the image for its length, so a second task for
the same image (a double enqueue, or the broker redelivering after `visibility_timeout`)
returns at once; the composer's file lock makes builds of one digest exclusive across
processes too. A worker that dies mid-build leaves the row `building`; the redelivered task
(acks_late) finds the lock free and builds again: builds are idempotent (same digest → the
image that is there is reused). A failed build fails the runs that waited for the image
(through their transitions); a ready one wakes their tenants' schedulers.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from catalog.choices import ImageKind, ImageStatus
from catalog.images import composition_for, image_label
from catalog.models import Image
from core.db import advisory_lock
from core.exceptions import ApplicationError, Conflict, ErrorCode
from images.log_stream import LogStream
from images.outcomes import fail, wake_waiting
from images.vm import vm_bake_enqueue
from orchestration.composer import Buildah, BuildError
from studies.choices import HOLDING_STATES
from studies.models import Run
from studies.transitions import runs_fail_waiting_for_image

log = logging.getLogger(__name__)


def image_build(*, image_id: int, force: bool = False) -> str:
    """Build one image (the Celery task's body): a container image here, a VM image by bakes
    on the cloud backends. Returns ready | failed | busy | skipped | baking."""
    image = Image.objects.filter(pk=image_id).first()
    if image is not None and image.kind == ImageKind.VM:
        return "baking" if vm_bake_enqueue(image=image, force=force) else "skipped"
    with advisory_lock(f"windtunnel-image-build:{int(image_id)}") as held:
        if not held:
            return "busy"  # another worker is building it right now
        return _build_container(image_id=int(image_id), force=force)


def _build_container(*, image_id: int, force: bool) -> str:
    image = Image.objects.filter(pk=image_id).first()
    if image is None or image.kind != ImageKind.CONTAINER:
        return "skipped"
    if image.status == ImageStatus.RETIRED or (image.status == ImageStatus.READY and not force):
        return "skipped"
    try:
        composition = composition_for(packages=image.packages, kind=image.kind)
    except ApplicationError as exc:
        fail(image, str(exc))
        return "failed"
    if composition.digest != image.digest:
        fail(
            image,
            f"the packages changed since this image was composed: {', '.join(image.packages)} "
            f"now make {composition.digest}, not {image.digest}. Compose them again "
            "(POST /api/v1/images/) to get the new image.",
        )
        return "failed"
    Image.objects.filter(pk=image.pk).update(
        status=ImageStatus.BUILDING,
        progress=0.0,
        build_log="",
        error="",
        build_started_at=timezone.now(),
    )
    stream = LogStream(image.pk)
    try:
        result = Buildah().build(
            composition, log=stream.line, progress=stream.progress, force=force
        )
    except BuildError as exc:
        stream.flush()
        tail = "\n".join(exc.log_tail[-15:])
        fail(image, f"{exc}" + (f"\n{tail}" if tail else ""))
        return "failed"
    except Exception as exc:  # noqa: BLE001 - a failed build must never stay "building"
        stream.flush()
        log.exception("build of image %s crashed", image.pk)
        fail(image, f"the build crashed: {exc!r}")
        return "failed"
    stream.progress(1.0)
    stream.flush()
    references = {**(image.references or {}), "container": result.ref}
    Image.objects.filter(pk=image.pk).update(
        status=ImageStatus.READY,
        progress=1.0,
        size_bytes=result.size_bytes,
        references=references,
        built_at=timezone.now(),
        error="",
    )
    wake_waiting(image)
    return "ready"


@transaction.atomic
def image_retire(*, image: Image) -> Image:
    """No new runs may use it; its container image is removed from local storage.

    Runs holding it (admitted, provisioning, running) keep it: retiring waits until they end
    (a 409 says how many). Runs queued for it fail with a message that says why and what to
    do (through their transition: fenced, published live)."""
    image = Image.objects.select_for_update().get(pk=image.pk)
    holding = Run.objects.filter(study__image_id=image.pk, state__in=HOLDING_STATES).count()
    if holding:
        raise Conflict(
            f"{holding} run(s) are starting or running in this image; let them finish or "
            "cancel them first",
            code=ErrorCode.STATE,
        )
    if image.status == ImageStatus.BUILDING:
        raise Conflict("this image is being built right now", code=ErrorCode.STATE)
    ref = (image.references or {}).get("container")
    image.status = ImageStatus.RETIRED
    image.save(update_fields=["status", "updated_at"])
    runs_fail_waiting_for_image(
        image_id=image.pk,
        message=f"image {image_label(image)} was retired by an operator before this run "
        "started; clone the study and choose another image (or name its packages to compose "
        "a new one)",
    )
    if ref:
        transaction.on_commit(lambda: Buildah().remove(ref))
    return image
