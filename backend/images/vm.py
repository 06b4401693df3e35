"""VM images on cloud backends: bake, upload, register (docs/images.md).

A VM image is the composer's cloud-init recipe applied to a distribution cloud image. Three
ways put it into a backend's Glance, each ending with `Image.references[backend.name]` = the
Glance image id and the image `ready`:

- **bake** (`vm_bake_step`, driven by the Celery task `images.bake_vm_image`): the step
  machine of orchestration/composer/bake.py (boot a builder from the backend's `base_image`
  with the recipe as user data, wait until the recipe powers it off, snapshot it, wait until
  Glance has the snapshot `active`, delete the builder; same digest, no rebake). A bake is a
  chain of short steps, not one long task: each step looks at the cloud once and answers how
  many seconds until the next look; the task enqueues itself again with that countdown. This
  module is the portal's side of a step: the advisory lock per image and backend, the bake's
  record in `Image.bakes[backend.name]` (in PostgreSQL: a worker restart loses nothing), the
  chain id (a step of another chain is a duplicate and stops), the build log, the progress
  and the outcome (the image ready, or failed with the runs that waited for it).
- **upload** (`vm_image_upload`): an admin's prepared qcow2/raw disk, streamed to Glance.
- **register** (`vm_image_register`): an image already in the backend's Glance.

Every cloud call goes through the backend's `VmImageHost` (compute.drivers.vm_image_host).
The builder is deleted whenever a bake ends, also on failure and timeout. A builder whose
bake record is gone or past its deadline (a lost chain, a failed delete) is a leak:
`builders_in_progress()` tells the leak reaper (dispatch.leaks) which builders to spare.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from typing import IO, Any, NamedTuple

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from catalog.choices import ImageKind, ImageStatus
from catalog.images import image_label
from catalog.models import Backend, Image
from compute.drivers import DriverError, traits_of, vm_image_host
from core import jobs
from core.db import advisory_lock
from core.exceptions import ApplicationError, Conflict, ErrorCode
from core.jobs import Job
from images.log_stream import LogStream
from images.outcomes import fail, wake_waiting
from orchestration.composer.bake import BakeImage, BakeStep, bake_step, new_record
from orchestration.composer.vm_host import META_BACKEND, META_DIGEST, META_IMAGE, glance_name

log = logging.getLogger(__name__)

META_UPLOAD = "windtunnel_upload"  # marks an upload's image, to delete it when the upload fails
STALE_CHAIN = 600.0  # a bake whose next step is this overdue lost its chain (see vm_bake_step)
QCOW2_MAGIC = b"QFI\xfb"
DISK_FORMATS = ("qcow2", "raw")
_GLANCE_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@ -]{0,254}$")


# --- reads ------------------------------------------------------------------------------------


def builders_in_progress() -> set[str]:
    """Server ids of the builders of bakes still running (the leak reaper spares them)."""
    now = time.time()
    ids: set[str] = set()
    for bakes in Image.objects.exclude(bakes={}).values_list("bakes", flat=True):
        for record in (bakes or {}).values():
            if record.get("server") and float(record.get("expires", 0)) > now:
                ids.add(str(record["server"]))
    return ids


def vm_backends() -> list[Backend]:
    """The enabled backends whose runs boot VM images (their driver's image_kind)."""
    return [
        b
        for b in Backend.objects.filter(enabled=True).order_by("name")
        if traits_of(b).image_kind == ImageKind.VM
    ]


# --- baking ------------------------------------------------------------------------------------


def vm_bake_enqueue(*, image: Image, force: bool = False) -> list[str]:
    """Start bakes of a VM image on every enabled VM backend that can bake (has a
    base_image) and does not have the image yet (or every one, with force). The backends."""
    stream = LogStream(image.pk)
    names = []
    for backend in vm_backends():
        if not force and (image.references or {}).get(backend.name):
            continue
        if not (backend.settings or {}).get("base_image"):
            stream.line(
                f"[{backend.name}] no settings.base_image: set it (the Glance name or id of a "
                "Debian 12 cloud image) to bake here, or upload or register the image "
                f"(POST /api/v1/admin/images/{image.pk}/upload/ or …/register/)"
            )
            continue
        names.append(backend.name)
        jobs.enqueue(Job.BAKE_VM_IMAGE, image.pk, backend.pk, force)
    if not names:
        stream.line(
            "no OpenStack backend bakes it: the image stays pending until one with "
            "settings.base_image exists (then rebuild it) or an admin uploads or registers it"
        )
    stream.flush()
    return names


class NextStep(NamedTuple):
    delay: float  # seconds until the next step
    chain: str  # the bake's chain id: pass it to the next step


def vm_bake_step(
    *, image_id: int, backend_id: int, force: bool = False, chain: str = ""
) -> NextStep | None:
    """One step of the bake of `image_id` on `backend_id`: when and with which chain id to
    take the next, or None when the bake is over (ready, failed, or nothing to do).

    A step without a chain id starts a bake (or does nothing while one runs, unless that
    one's chain is lost: overdue by STALE_CHAIN, when this call adopts it); a step with a
    chain id other than the bake's is a duplicate and does nothing."""
    with advisory_lock(f"windtunnel-image-bake:{int(image_id)}:{int(backend_id)}") as held:
        if not held:
            return None  # the step of another chain is running; that chain goes on
        # read under the lock: the record is what the last step left
        image = Image.objects.filter(pk=image_id).first()
        backend = Backend.objects.filter(pk=backend_id).first()
        if (
            image is None
            or backend is None
            or image.kind != ImageKind.VM
            or traits_of(backend).image_kind != ImageKind.VM
        ):
            return None
        stream = LogStream(image.pk)
        record = (image.bakes or {}).get(backend.name)
        now = time.time()
        if record is None:
            if image.status == ImageStatus.RETIRED:
                return None
            if not force and (image.references or {}).get(backend.name):
                return None
            record = {**new_record(force=force, now=now), "chain": uuid.uuid4().hex}
            _bake_starts(image)
            stream.line(f"[{backend.name}] bake of {image_label(image)} starts")
        elif chain != record.get("chain"):
            overdue = now - float(record.get("next", 0))
            if chain or overdue < STALE_CHAIN:
                return None  # a duplicate (double enqueue, redelivery): the bake's chain goes on
            record = {**record, "chain": uuid.uuid4().hex}  # the chain was lost: adopt the bake
            stream.line(
                f"[{backend.name}] picking up a bake whose steps stopped {overdue:.0f} s ago"
            )
        step = _take_step(image, backend, record)
        return _keep_step(image, backend, step, stream)


def _bake_starts(image: Image) -> None:
    if image.status != ImageStatus.READY:  # ready elsewhere: runs there go on
        Image.objects.filter(pk=image.pk).update(
            status=ImageStatus.BUILDING, build_started_at=timezone.now(), progress=0.02, error=""
        )


def _take_step(image: Image, backend: Backend, record: dict[str, Any]) -> BakeStep:
    """bake_step on the backend's cloud. Building the host touches no cloud (the connection
    is made by its first call), so what fails here fails the bake at once."""
    try:
        host = vm_image_host(backend)
    except Exception as exc:  # noqa: BLE001 — a bake must never stay "building"
        message = str(exc) if isinstance(exc, DriverError) else f"the bake crashed: {exc!r}"
        return BakeStep(record=record, lines=[f"bake failed: {message}"], error=message)
    bake = BakeImage(
        digest=image.digest, name=image.name, recipe=image.recipe, backend=backend.name
    )
    return bake_step(record, settings=backend.settings or {}, image=bake, host=host)


def _keep_step(
    image: Image, backend: Backend, step: BakeStep, stream: LogStream
) -> NextStep | None:
    """Write what a step did: its log lines and progress, then its record for the next step,
    or the bake's outcome."""
    for text in step.lines:
        stream.line(f"[{backend.name}] {text}")
    if step.progress is not None and image.status != ImageStatus.READY:
        stream.progress(step.progress)  # ready elsewhere: runs there go on
    if step.delay is not None:
        record = {**step.record, "next": time.time() + step.delay}
        _set_record(image.pk, backend.name, record)
        stream.flush()
        return NextStep(step.delay, str(record["chain"]))
    stream.flush()
    if step.image is not None:
        _set_reference(image.pk, backend.name, step.image.id, getattr(step.image, "size", None))
        wake_waiting(image)
        return None
    message = step.error or "the bake ended without an image"
    _set_record(image.pk, backend.name, None)
    image = Image.objects.get(pk=image.pk)
    if (image.references or {}) and not image.bakes:
        # another backend has the image: it stays usable there
        Image.objects.filter(pk=image.pk).update(status=ImageStatus.READY)
    elif not image.bakes:
        fail(image, f"baking on backend {backend.name} failed: {message}")
    log.warning("bake of image %s on %s failed: %s", image.pk, backend.name, message)
    return None


def _set_record(image_id: int, backend_name: str, record: dict[str, Any] | None) -> None:
    with transaction.atomic():
        image = Image.objects.select_for_update().only("bakes").get(pk=image_id)
        bakes = dict(image.bakes or {})
        if record is None:
            bakes.pop(backend_name, None)
        else:
            bakes[backend_name] = record
        Image.objects.filter(pk=image_id).update(bakes=bakes)


def _set_reference(image_id: int, backend_name: str, glance_id: str, size: int | None) -> None:
    """The backend has the image: it is ready (also while bakes on other backends go on)."""
    with transaction.atomic():
        image = Image.objects.select_for_update().only("references", "bakes").get(pk=image_id)
        fields: dict[str, Any] = {
            "references": {**(image.references or {}), backend_name: glance_id},
            "bakes": {k: v for k, v in (image.bakes or {}).items() if k != backend_name},
            "status": ImageStatus.READY,
            "progress": 1.0,
            "built_at": timezone.now(),
            "error": "",
        }
        if size:
            fields["size_bytes"] = size
        Image.objects.filter(pk=image_id).update(**fields)


# --- upload and register ---------------------------------------------------------------------


def _openstack_backend(name: Any) -> Backend:
    if not isinstance(name, str) or not name:
        raise ApplicationError(
            "backend: give the name of the OpenStack backend whose Glance gets the image",
            field="backend",
        )
    backend = Backend.objects.filter(name=name).first()
    if backend is None:
        raise ApplicationError(
            f"backend: no backend named {name!r}; list them with GET /api/v1/admin/backends/",
            field="backend",
        )
    if traits_of(backend).image_kind != ImageKind.VM:
        raise ApplicationError(
            f"backend: {name} is a {backend.kind} backend; VM images live in the Glance of a "
            "backend that boots them (openstack)",
            field="backend",
        )
    return backend


def _vm_image_for_glance(image: Image, backend: Backend) -> None:
    if image.kind != ImageKind.VM:
        raise ApplicationError(
            f"image {image_label(image)} is a {image.kind} image; only VM images go to Glance",
            field="image",
        )
    if image.status == ImageStatus.RETIRED:
        raise Conflict(f"image {image_label(image)} is retired", code=ErrorCode.STATE)
    if backend.name in (image.bakes or {}):
        raise Conflict(
            f"a bake of this image on {backend.name} is running; wait for it to end",
            code=ErrorCode.STATE,
        )


def _cloud_error(backend: Backend, exc: DriverError) -> ApplicationError:
    if exc.retryable:
        return ApplicationError(
            f"the cloud of backend {backend.name} did not answer ({exc}); try again later, or "
            f"check the backend (POST /api/v1/admin/backends/{backend.name}/check/)",
            code=ErrorCode.BACKEND_UNAVAILABLE,
            status=503,
        )
    return ApplicationError(
        f"the cloud of backend {backend.name} refused: {exc}",
        code=ErrorCode.BACKEND_UNAVAILABLE,
        status=502,
    )


def _record(image: Image, backend: Backend, glance: Any, how: str) -> Image:
    _set_reference(image.pk, backend.name, glance.id, getattr(glance, "size", None))
    stream = LogStream(image.pk)
    stream.line(f"[{backend.name}] {how}: Glance image {glance.id} ({glance.name})")
    stream.flush()
    image.refresh_from_db()
    wake_waiting(image)
    return image


def vm_image_register(*, image: Image, backend_name: Any, glance_image: Any) -> Image:
    """Use an image already in the backend's Glance (by id or name); it must be active."""
    backend = _openstack_backend(backend_name)
    _vm_image_for_glance(image, backend)
    if not isinstance(glance_image, str) or not _GLANCE_REF.match(glance_image):
        raise ApplicationError(
            "glance_image: give the id or name of an image in the backend's Glance",
            field="glance_image",
        )
    try:
        found = vm_image_host(backend).find_images(glance_image)
    except DriverError as exc:
        raise _cloud_error(backend, exc) from exc
    if len(found) > 1:
        raise ApplicationError(
            f"several Glance images are named {glance_image!r}: give the image id instead",
            field="glance_image",
        )
    if not found:
        raise ApplicationError(
            f"glance_image: no image {glance_image!r} in the Glance of backend {backend.name} "
            "(that its project can see); give the id or name from `openstack image list`",
            field="glance_image",
        )
    if found[0].status != "active":
        raise ApplicationError(
            f"glance_image: image {glance_image!r} is {found[0].status}, not active; wait until "
            "Glance has all of its data, or upload it again",
            field="glance_image",
        )
    return _record(image, backend, found[0], "registered")


def sniff_disk_format(head: bytes) -> str:
    return "qcow2" if head[:4] == QCOW2_MAGIC else "raw"


def upload_max_bytes() -> int:
    return int(settings.WINDTUNNEL.get("VM_IMAGE_UPLOAD_MAX_BYTES", 20 * 1024**3))


def vm_image_upload(
    *, image: Image, backend_name: Any, data: IO[bytes], size: int, disk_format: Any = None
) -> Image:
    """Stream a prepared disk (qcow2 or raw) into the backend's Glance as this image."""
    backend = _openstack_backend(backend_name)
    _vm_image_for_glance(image, backend)
    limit = upload_max_bytes()
    if size <= 0:
        raise ApplicationError(
            "file: the upload is empty; send the disk as the body or as the form field file",
            field="file",
            code=ErrorCode.UPLOAD,
        )
    if size > limit:
        raise ApplicationError(
            f"file: {size} bytes is over the limit of {limit} "
            "(WINDTUNNEL_VM_IMAGE_UPLOAD_MAX_BYTES); upload it to Glance directly and register it",
            field="file",
            code=ErrorCode.UPLOAD,
            status=413,
        )
    head = data.read(4)
    data.seek(0)
    found_format = sniff_disk_format(head)
    if disk_format in (None, ""):
        disk_format = found_format
    if disk_format not in DISK_FORMATS:
        raise ApplicationError(
            f"disk_format: must be one of {', '.join(DISK_FORMATS)}, got {disk_format!r}",
            field="disk_format",
        )
    if disk_format != found_format:
        hint = (
            "it starts with the qcow2 magic; pass disk_format=qcow2"
            if found_format == "qcow2"
            else "it has no qcow2 header (QFI\\xfb); pass disk_format=raw, or convert it with "
            "`qemu-img convert -O qcow2`"
        )
        raise ApplicationError(
            f"disk_format: the file is not {disk_format}: {hint}", field="disk_format"
        )
    marker = uuid.uuid4().hex
    properties = {
        META_DIGEST: image.digest,
        META_IMAGE: image.name,
        META_BACKEND: backend.name,
        META_UPLOAD: marker,
    }
    try:
        host = vm_image_host(backend)
        created = host.upload_image(
            name=glance_name(name=image.name, digest=image.digest),
            data=data,
            size=size,
            disk_format=disk_format,
            properties=properties,
        )
        glance = host.get_image(created.id)
    except DriverError as exc:
        _delete_partial_upload(backend, marker)
        raise _cloud_error(backend, exc) from exc
    if glance.status != "active":
        _delete_partial_upload(backend, marker)
        raise ApplicationError(
            f"Glance did not accept the disk (the image is {glance.status} after the upload)",
            code=ErrorCode.BACKEND_UNAVAILABLE,
            status=502,
        )
    return _record(image, backend, glance, f"uploaded ({size} bytes, {disk_format})")


def _delete_partial_upload(backend: Backend, marker: str) -> None:
    try:
        vm_image_host(backend).delete_images_by_property(META_UPLOAD, marker)
    except Exception as exc:  # noqa: BLE001 — best effort; the answer already says it failed
        log.warning("cannot delete the partial upload %s on %s: %s", marker, backend.name, exc)
