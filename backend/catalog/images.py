"""Solver images as records: compose a package set into an Image row (found or created by
digest), find the image a study runs in, and say why runs wait for one.

The composer (`orchestration.composer`) resolves and hashes; the builds themselves (buildah,
VM bakes) are the `images` app's, started here by name (core.jobs, Job.BUILD_IMAGE). One
image per (kind, digest): composing the same closure again returns the existing image.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F

from catalog.choices import ImageKind, ImageStatus
from catalog.models import Backend, Image
from core import jobs
from core.exceptions import ApplicationError, Conflict, ErrorCode, NotFound
from core.jobs import Job
from orchestration.composer import (
    Buildah,
    BuildError,
    Catalog,
    Composition,
    ManifestError,
    ResolveError,
    compose,
    layer_digests,
    load_catalog,
)
from orchestration.planning.placement import DIGEST_RE

log = logging.getLogger(__name__)

USABLE_STATUSES = (ImageStatus.READY, ImageStatus.BUILDING, ImageStatus.PENDING)
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
        image_start_build(image)
        image.refresh_from_db()
    return image, created


def image_start_build(image: Image, *, force: bool = False) -> None:
    """Mark the image pending and start its build (after commit): a container image is built
    here, a VM image baked on the cloud backends (the images app decides)."""
    fields: dict[str, Any] = {"status": ImageStatus.PENDING, "progress": 0.0, "error": ""}
    if image.kind == ImageKind.VM:
        fields["build_log"] = (
            "VM images are baked by an OpenStack backend from the cloud-init recipe "
            "(boot the base cloud image with it, wait for it to power off, snapshot).\n"
        )
    Image.objects.filter(pk=image.pk).exclude(status=ImageStatus.BUILDING).update(**fields)
    jobs.enqueue(Job.BUILD_IMAGE, image.pk, force)


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
    image_start_build(image, force=image.status != ImageStatus.FAILED)
    image.refresh_from_db()
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
    def get(key: str) -> Any:
        return image.get(key) if isinstance(image, Mapping) else getattr(image, key)

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


def image_find(*, kind: str, ref: str) -> Image | None:
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
    *,
    spec: Mapping[str, Any],
    backend: Backend,
    image_kind: str | None,
    solver: str,
    prepare: list[list[str]],
) -> StudyImage | None:
    """The image of a study from its `image` / `packages` keys (docs/images.md).

    Backends that run images (`image_kind`: their driver's trait) always get one: without
    either key, the solver's package plus the packages providing the prepare utilities are
    composed.
    """
    kind = image_kind
    ref, packages = spec.get("image"), spec.get("packages")
    if ref not in (None, "") and packages not in (None, []):
        raise ApplicationError("give image or packages, not both", field="image")
    if kind is None:
        if ref not in (None, "") or packages not in (None, []):
            raise ApplicationError(
                f"backend {backend.name} ({backend.kind}) runs the OpenFOAM installed on its "
                "hosts; image and packages need a backend that runs images (container, "
                "openstack)",
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
        image = image_find(kind=kind, ref=ref)
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
    image: Image | None
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
        image_start_build(image)
        image.refresh_from_db()


def image_layers(*, image: Image) -> tuple[str, ...]:
    """The digests of the image's package layers, in install order (the composer's
    `layer_digests` of its closure)."""
    return layer_digests(kind=image.kind, packages=image.closure or [])


def image_digests(*, image: Image | None) -> tuple[str, ...]:
    """What a machine booted from (or holding) this image has in its cache: the image's
    digest and its layers' (warm-pool placement, docs/pools.md)."""
    if image is None:
        return ()
    return tuple(d for d in (image.digest, *image_layers(image=image)) if DIGEST_RE.match(d))


def image_reference(*, image: Image | None, backend: Backend) -> str | None:
    """What a driver needs to start this image on `backend` (None when it has none yet)."""
    if image is None:
        return None
    refs = image.references or {}
    return refs.get(backend.name) or refs.get(backend.kind)
