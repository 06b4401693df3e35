"""Solver images: compose from packages, build (buildah), rebuild, retire; a study's image.

Writes and reads on Image live here (services and selectors). The composer
(`orchestration.composer`) does the resolving, hashing and building; this module keeps the
Image rows, streams build output into them and connects images to studies and the scheduler.

One image per (kind, digest): composing the same closure again returns the existing image.
A build is the one long Celery task (`catalog.build_image`, a minute or two when nothing is
cached): it holds a PostgreSQL advisory lock on the image for its length, so a second task for
the same image (a double enqueue, or the broker redelivering after `visibility_timeout`)
returns at once; the composer's file lock makes builds of one digest exclusive across
processes too. A worker that dies mid-build leaves the row `building`; the redelivered task
(acks_late) finds the lock free and builds again: builds are idempotent (same digest → the
image that is there is reused).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import re
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, TextField, Value
from django.db.models.functions import Concat, Right
from django.utils import timezone

from catalog.choices import ImageKind, ImageStatus
from catalog.models import Backend, Image
from core.events import enqueue_on_commit
from core.exceptions import ApplicationError, Conflict, ErrorCode, NotFound
from orchestration.composer import (
    Buildah,
    BuildError,
    Catalog,
    Composition,
    ManifestError,
    ResolveError,
    compose,
    load_catalog,
)

log = logging.getLogger(__name__)

# backend kind → the kind of image its runs need
IMAGE_BACKEND_KINDS: dict[str, str] = {"container": ImageKind.CONTAINER, "openstack": ImageKind.VM}
USABLE_STATUSES = (ImageStatus.READY, ImageStatus.BUILDING, ImageStatus.PENDING)
LOG_MAX_CHARS = 1_000_000  # the build log keeps its last million characters
FLUSH_SECONDS = 1.0
_HEX = re.compile(r"^(sha256:)?([0-9a-f]{12,64})$")


# --- composing ---------------------------------------------------------------------------------


def packages_catalog() -> Catalog:
    try:
        return load_catalog(settings.WINDTUNNEL["PACKAGES_DIR"])
    except ManifestError as exc:
        raise ApplicationError(str(exc), field="packages") from exc


def _package_list(packages: Any, field: str = "packages") -> list[str]:
    if (
        not isinstance(packages, list | tuple)
        or not packages
        or not all(isinstance(p, str) and p.strip() for p in packages)
    ):
        raise ApplicationError(
            f"{field} must be a non-empty list of package names, e.g. [icofoam, meshing]",
            field=field,
        )
    return [p.strip() for p in packages]


def composition_for(*, packages: Iterable[str], kind: str = ImageKind.CONTAINER) -> Composition:
    """Resolve and hash a package set; resolution problems are 400s naming the chain."""
    names = _package_list(list(packages))
    try:
        return compose(names, packages_catalog(), kind=str(kind))
    except ResolveError as exc:
        raise ApplicationError(
            f"packages: {exc}", field="packages", details={"kind": exc.kind, "chains": exc.chains}
        ) from exc
    except ValueError as exc:
        raise ApplicationError(f"packages: {exc}", field="packages") from exc


@transaction.atomic
def image_compose(
    *, packages: Iterable[str], kind: str = ImageKind.CONTAINER, user=None, build: bool = True
) -> tuple[Image, bool]:
    """Find or create the image of this package set (by digest); start its build if needed.

    Returns (image, created). A failed or retired image of the same digest is built again.
    """
    if kind not in ImageKind.values:
        raise ApplicationError(
            f"kind must be one of {', '.join(ImageKind.values)}, got {kind!r}", field="kind"
        )
    composition = composition_for(packages=packages, kind=kind)
    image, created = Image.objects.get_or_create(
        kind=kind,
        digest=composition.digest,
        defaults={
            "name": composition.name,
            "packages": list(composition.requested),
            "closure": composition.packages,
            "solvers": list(composition.solvers),
            "recipe": composition.recipe,
            "status": ImageStatus.PENDING,
            "created_by": user if getattr(user, "is_authenticated", False) else None,
        },
    )
    if build and (created or image.status in (ImageStatus.FAILED, ImageStatus.RETIRED)):
        _start_build(image)
        image.refresh_from_db()
    return image, created


def _start_build(image: Image, *, force: bool = False) -> None:
    from catalog.tasks import build_image

    fields: dict[str, Any] = {"status": ImageStatus.PENDING, "progress": 0.0, "error": ""}
    if image.kind == ImageKind.VM:
        fields["build_log"] = (
            "VM images are baked by an OpenStack backend from the cloud-init recipe "
            "(boot the base cloud image with it, wait for it to power off, snapshot).\n"
        )
    Image.objects.filter(pk=image.pk).exclude(status=ImageStatus.BUILDING).update(**fields)
    if image.kind == ImageKind.CONTAINER:
        enqueue_on_commit(build_image, image.pk, force)
    elif image.kind == ImageKind.VM:
        from catalog.vm import vm_bake_enqueue

        vm_bake_enqueue(image=image, force=force)


# --- building ------------------------------------------------------------------------------------


class _LogStream:
    """Appends build output to Image.build_log about once a second (not per line)."""

    def __init__(self, image_id: int) -> None:
        self.image_id = image_id
        self.lines: list[str] = []
        self.value: float | None = None
        self.last = time.monotonic()
        self.lock = threading.Lock()

    def line(self, text: str) -> None:
        with self.lock:
            self.lines.append(text)
        if time.monotonic() - self.last >= FLUSH_SECONDS:
            self.flush()

    def progress(self, value: float) -> None:
        self.value = value

    def flush(self) -> None:
        with self.lock:
            chunk, self.lines = "".join(f"{x}\n" for x in self.lines), []
            self.last = time.monotonic()
        fields: dict[str, Any] = {}
        if chunk:
            fields["build_log"] = Right(
                Concat(F("build_log"), Value(chunk), output_field=TextField()), LOG_MAX_CHARS
            )
        if self.value is not None:
            fields["progress"] = min(self.value, 1.0)
        if fields:
            Image.objects.filter(pk=self.image_id).update(**fields)


def _lock_key(image_id: int) -> int:
    digest = hashlib.sha256(f"windtunnel-image-build:{image_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _try_lock(key: int) -> bool:
    with connection.cursor() as cur:
        cur.execute("SELECT pg_try_advisory_lock(%s)", [key])
        return bool(cur.fetchone()[0])


def _unlock(key: int) -> None:
    with connection.cursor() as cur:
        cur.execute("SELECT pg_advisory_unlock(%s)", [key])


def image_build(*, image_id: int, force: bool = False) -> str:
    """Build one image (the Celery task's body). Returns ready | failed | busy | skipped."""
    key = _lock_key(int(image_id))
    if not _try_lock(key):
        return "busy"  # another worker is building it right now
    try:
        image = Image.objects.filter(pk=image_id).first()
        if image is None or image.kind != ImageKind.CONTAINER:
            return "skipped"
        if image.status == ImageStatus.RETIRED or (image.status == ImageStatus.READY and not force):
            return "skipped"
        try:
            composition = composition_for(packages=image.packages, kind=image.kind)
        except ApplicationError as exc:
            _fail(image, str(exc))
            return "failed"
        if composition.digest != image.digest:
            _fail(
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
        stream = _LogStream(image.pk)
        try:
            result = Buildah().build(
                composition, log=stream.line, progress=stream.progress, force=force
            )
        except BuildError as exc:
            stream.flush()
            tail = "\n".join(exc.log_tail[-15:])
            _fail(image, f"{exc}" + (f"\n{tail}" if tail else ""))
            return "failed"
        except Exception as exc:  # noqa: BLE001 - a failed build must never stay "building"
            stream.flush()
            log.exception("build of image %s crashed", image.pk)
            _fail(image, f"the build crashed: {exc!r}")
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
        _wake_waiting(image)
        return "ready"
    finally:
        _unlock(key)


def _waiting_runs(image: Image):
    from studies.choices import RunState
    from studies.models import Simulation

    return Simulation.objects.filter(study__image_id=image.pk, state=RunState.PENDING)


def _wake_waiting(image: Image) -> None:
    """The image is ready: schedule every tenant whose runs waited for it."""
    from scheduler.tasks import schedule_tenant

    for tenant_id in set(_waiting_runs(image).values_list("tenant_id", flat=True)):
        enqueue_on_commit(schedule_tenant, tenant_id)


def _fail(image: Image, message: str) -> None:
    """The build failed: keep its log, and fail the runs that waited for it (they cannot start)."""
    from studies.choices import EndReason, RunState, WaitReason
    from studies.tasks import refresh_study

    now = timezone.now()
    Image.objects.filter(pk=image.pk).update(status=ImageStatus.FAILED, error=message[:20_000])
    waiting = _waiting_runs(image)
    study_ids = set(waiting.values_list("study_id", flat=True))
    first = message.splitlines()[0] if message else "unknown error"
    waiting.update(
        state=RunState.FAILED,
        end_reason=EndReason.DISPATCH_FAILED,
        message=f"image {image.name}@{image.digest[:19]}… failed to build: {first}"[:5000],
        wait_reason=WaitReason.NONE,
        wait_detail="",
        finished_at=now,
        updated_at=now,
    )
    for study_id in study_ids:
        enqueue_on_commit(refresh_study, str(study_id))
    log.warning("image %s (%s) failed to build: %s", image.pk, image.digest, first)


# --- admin operations ---------------------------------------------------------------------------


@transaction.atomic
def image_rebuild(*, image: Image) -> Image:
    """Build the same digest again from scratch (no layer cache), e.g. after a failure."""
    image = Image.objects.select_for_update().get(pk=image.pk)
    if image.status == ImageStatus.BUILDING:
        raise Conflict("this image is being built right now", code=ErrorCode.STATE)
    composition = composition_for(packages=image.packages, kind=image.kind)
    if composition.digest != image.digest:
        raise Conflict(
            f"the packages changed since this image was composed ({', '.join(image.packages)} now "
            f"make {composition.digest}); compose them again to get the new image",
            code=ErrorCode.STATE,
        )
    _start_build(image, force=image.status != ImageStatus.FAILED)
    image.refresh_from_db()
    return image


@transaction.atomic
def image_retire(*, image: Image) -> Image:
    """No new studies may use it; its container image is removed from local storage."""
    from studies.choices import ACTIVE_STATES
    from studies.models import Simulation

    image = Image.objects.select_for_update().get(pk=image.pk)
    active = Simulation.objects.filter(study__image_id=image.pk, state__in=ACTIVE_STATES).count()
    if active:
        raise Conflict(
            f"{active} queued or running run(s) use this image; cancel them or let them finish first",
            code=ErrorCode.STATE,
        )
    if image.status == ImageStatus.BUILDING:
        raise Conflict("this image is being built right now", code=ErrorCode.STATE)
    ref = (image.references or {}).get("container")
    image.status = ImageStatus.RETIRED
    image.save(update_fields=["status", "updated_at"])
    if ref:
        transaction.on_commit(lambda: Buildah().remove(ref))
    return image


# --- reads ----------------------------------------------------------------------------------------


def image_list_visible_to(*, user, kind: str | None = None):
    """Staff see every image; users see the ready ones."""
    qs = Image.objects.order_by("name", "-built_at", "-id")
    if not user.is_staff:
        qs = qs.filter(status=ImageStatus.READY)
    if kind:
        qs = qs.filter(kind=kind)
    return qs


def image_get(*, user, image_id: Any) -> Image:
    try:
        image = image_list_visible_to(user=user).filter(pk=int(image_id)).first()
    except (TypeError, ValueError):
        image = None
    if image is None:
        raise NotFound(f"No image with id {image_id!r}.")
    return image


def image_log_tail(image: Image, lines: int = 200) -> list[str]:
    return image.build_log.splitlines()[-max(0, min(lines, 5000)) :] if lines else []


def image_label(image: Image) -> str:
    return f"{image.name}@{image.digest[:19]}…"


def image_wait_detail(image: Image | Mapping[str, Any]) -> str:
    get = image.get if isinstance(image, Mapping) else lambda k: getattr(image, k)
    label = f"{get('name')}@{str(get('digest'))[:19]}…"
    status = get("status")
    if status == ImageStatus.BUILDING:
        return f"image {label} is building ({int(round(100 * (get('progress') or 0)))}%)"
    return f"image {label} is {ImageStatus(status).label.lower()}"


# --- studies ------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class StudyImage:
    """The image a study runs in: an existing Image, or a composition to build on submit."""

    kind: str
    image: Image | None
    composition: Composition | None
    package_names: tuple[str, ...]  # the closure
    env: Mapping[str, str]

    @property
    def label(self) -> str:
        if self.image is not None:
            return image_label(self.image)
        assert self.composition is not None
        return self.composition.display


def _find_image(*, kind: str, ref: str) -> Image | None:
    qs = Image.objects.filter(kind=kind)
    match = _HEX.match(ref.strip().lower())
    if match:
        found = qs.filter(digest__startswith=f"sha256:{match.group(2)}").order_by("-id").first()
        if found:
            return found
    ready_first = qs.filter(name=ref).order_by(
        # ready, then building/pending, then the rest; newest first
        F("built_at").desc(nulls_last=True),
        "-id",
    )
    for status in (ImageStatus.READY, ImageStatus.BUILDING, ImageStatus.PENDING):
        found = ready_first.filter(status=status).first()
        if found:
            return found
    return ready_first.first()


def study_image_resolve(
    *, spec: Mapping[str, Any], backend: Backend, solver: str, prepare: list[list[str]]
) -> StudyImage | None:
    """The image of a study from its `image` / `packages` keys (docs/images.md).

    Backends that run images (container, openstack) always get one: without either key, the
    solver's package plus the packages providing the prepare utilities are composed.
    """
    kind = IMAGE_BACKEND_KINDS.get(backend.kind)
    ref, packages = spec.get("image"), spec.get("packages")
    if ref not in (None, "") and packages not in (None, []):
        raise ApplicationError("give image or packages, not both", field="image")
    if kind is None:
        if ref not in (None, "") or packages not in (None, []):
            raise ApplicationError(
                f"backend {backend.name} ({backend.kind}) runs the OpenFOAM installed on its "
                "hosts; image and packages need a container or openstack backend",
                field="image" if ref else "packages",
            )
        return None
    catalog = packages_catalog()
    needed = [m.name for m in catalog.providers(solver)[:1]]
    for argv in prepare:
        providers = catalog.providers(argv[0])
        if providers and not any(p.name in needed for p in providers):
            needed.append(providers[0].name)
    if ref not in (None, ""):
        if not isinstance(ref, str):
            raise ApplicationError("image must be an image name or digest", field="image")
        image = _find_image(kind=kind, ref=ref)
        if image is None:
            raise ApplicationError(
                f"no {kind} image named {ref!r}; list them with GET /api/v1/images/, or name "
                "packages instead to compose one",
                field="image",
            )
        if image.status not in USABLE_STATUSES:
            raise ApplicationError(
                f"image {image_label(image)} is {image.status}; choose a ready image (or compose "
                "it again from its packages)",
                field="image",
            )
        if solver not in (image.solvers or []):
            raise ApplicationError(
                f"image {image_label(image)} provides {', '.join(image.solvers) or 'no solver'}, "
                f"not {solver}",
                field="solver",
            )
        names = tuple(p["name"] for p in image.closure or [])
        env: dict[str, str] = {}
        for name in names:
            manifest = catalog.latest(name)
            env.update(manifest.env if manifest else {})
        return StudyImage(kind=kind, image=image, composition=None, package_names=names, env=env)
    asked = _package_list(packages) if packages not in (None, []) else needed
    composition = composition_for(
        packages=[*asked, *[n for n in needed[1:] if n not in asked]], kind=kind
    )
    if solver not in composition.solvers:
        raise ApplicationError(
            f"packages {', '.join(asked)} provide {', '.join(composition.solvers) or 'no solver'}, "
            f"not {solver}; add {needed[0] if needed else 'a package providing it'}",
            field="packages",
        )
    image = Image.objects.filter(kind=kind, digest=composition.digest).first()
    return StudyImage(
        kind=kind,
        image=image,
        composition=composition,
        package_names=tuple(m.name for m in composition.closure),
        env=dict(composition.env),
    )


def study_image_ensure(*, choice: StudyImage | None, user=None) -> Image | None:
    """On submit: the study's image exists and is ready or on its way (composed on demand)."""
    if choice is None:
        return None
    if choice.composition is not None:
        image, _ = image_compose(packages=choice.composition.requested, kind=choice.kind, user=user)
    else:
        image = choice.image
    if image is not None:
        image_ensure_present(image=image)
    return image


def image_ensure_present(*, image: Image) -> None:
    """A ready container image missing from this host's storage (removed by hand, a new
    machine) is built again (same digest, so from the layer cache when it can)."""
    if image.kind != ImageKind.CONTAINER or image.status != ImageStatus.READY:
        return
    try:
        present = Buildah().find(image.digest) is not None
    except BuildError as exc:
        log.warning("cannot check image %s in local storage: %s", image.pk, exc)
        return
    if not present:
        log.warning("image %s (%s) is gone from local storage: rebuilding", image.pk, image.digest)
        _start_build(image)
        image.refresh_from_db()


def image_reference(*, image: Image | None, backend: Backend) -> str | None:
    """What a driver needs to start this image on `backend` (None when it has none yet)."""
    if image is None:
        return None
    refs = image.references or {}
    return refs.get(backend.name) or refs.get(backend.kind)
