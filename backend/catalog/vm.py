"""VM images on OpenStack backends: bake, upload, register (docs/images.md).

A VM image is the composer's cloud-init recipe applied to a distribution cloud image. Three
ways put it into a backend's Glance, each ending with `Image.references[backend.name]` = the
Glance image id and the image `ready`:

- **bake** (`vm_bake_step`, driven by the Celery task `catalog.bake_vm_image`): boot a
  builder server from the backend's `base_image` with the recipe as user data, wait until the
  recipe powers it off, snapshot it, wait until Glance has the snapshot `active`, delete the
  builder. A bake is a chain of short steps, not one long task: each step looks at the cloud
  once, records where the bake is in `Image.bakes[backend.name]`, and answers how many
  seconds until the next look; the task enqueues itself again with that countdown. So no
  worker is held for the recipe's minutes, a worker restart loses nothing (the record is in
  PostgreSQL), and a step is idempotent (an advisory lock per image and backend; a step
  that arrives before its time is a duplicate chain and stops).
- **upload** (`vm_image_upload`): an admin's prepared qcow2/raw disk, streamed to Glance.
- **register** (`vm_image_register`): an image already in the backend's Glance.

Same digest, no rebake: a bake first asks Glance for an active image whose property
`windtunnel_digest` is the image's digest (every bake and upload sets it) and records that.

The builder is deleted whenever a bake ends, also on failure and timeout. A builder whose
bake record is gone or past its deadline (a lost chain, a failed delete) is a leak:
`builders_in_progress()` tells the leak reaper (catalog.cloud) which builders to spare.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
import re
import time
import uuid
from collections.abc import Callable, Mapping
from typing import IO, Any, NamedTuple

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from catalog.choices import BackendKind, ImageKind, ImageStatus
from catalog.images import _fail, _LogStream, _try_lock, _unlock, _wake_waiting, image_label
from catalog.models import Backend, Image
from core.crypto import decrypt_json
from core.events import enqueue_on_commit
from core.exceptions import ApplicationError, Conflict, ErrorCode
from orchestration.drivers.base import DriverError, get_driver
from orchestration.drivers.openstack import smallest_flavor

log = logging.getLogger(__name__)

META_KIND = "windtunnel_kind"  # = orchestration.drivers.openstack.META_KIND
META_DIGEST = "windtunnel_digest"
META_IMAGE = "windtunnel_image"
NOVA_USER_DATA_MAX = 65_535  # bytes of base64 user data Nova accepts

BOOT_POLL = 2.0  # seconds between looks while the builder boots
WAIT_POLL = 10.0  # … while the recipe runs (minutes)
SNAPSHOT_POLL = 3.0  # … while Glance receives the snapshot
RETRY_POLL = 15.0  # … after the cloud failed to answer
BEGIN_WINDOW = 300.0  # a bake that cannot even start within this fails
DEADLINE_MARGIN = 600.0  # the reaper spares a builder this long past its bake's deadline
STALE_CHAIN = 600.0  # a bake whose next step is this overdue lost its chain (see vm_bake_step)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@ -]{0,254}$")
QCOW2_MAGIC = b"QFI\xfb"
DISK_FORMATS = ("qcow2", "raw")


# --- settings --------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class BakeSettings:
    base_image: str
    bake_flavor: str
    bake_timeout: float
    snapshot_timeout: float
    snapshot_stall_grace: float
    min_disk_gb: float


def _setting_name(raw: Mapping[str, Any], key: str, what: str) -> str:
    value = raw.get(key) or ""
    if value and (not isinstance(value, str) or not _NAME.match(value)):
        raise ApplicationError(
            f"settings.{key}: {what} must be a Glance/Nova name or id (letters, digits, ._:/@- )",
            field=f"settings.{key}",
        )
    return value


def _setting_seconds(raw: Mapping[str, Any], key: str, default: float, lo: float) -> float:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not lo <= value <= 86_400:
        raise ApplicationError(
            f"settings.{key}: must be a number of seconds from {lo:g} to 86400",
            field=f"settings.{key}",
        )
    return float(value)


def bake_settings(raw: Mapping[str, Any]) -> BakeSettings:
    """A backend's bake settings, checked; the ApplicationError names the field and the fix."""
    raw = raw if isinstance(raw, Mapping) else {}
    min_disk = raw.get("min_disk_gb", 0)
    if isinstance(min_disk, bool) or not isinstance(min_disk, int | float) or min_disk < 0:
        raise ApplicationError(
            "settings.min_disk_gb: must be a number of GB ≥ 0", field="settings.min_disk_gb"
        )
    return BakeSettings(
        base_image=_setting_name(raw, "base_image", "the base cloud image"),
        bake_flavor=_setting_name(raw, "bake_flavor", "the bake flavor"),
        bake_timeout=_setting_seconds(raw, "bake_timeout", 3600, 5),
        snapshot_timeout=_setting_seconds(raw, "snapshot_timeout", 1800, 5),
        snapshot_stall_grace=_setting_seconds(raw, "snapshot_stall_grace", 120, 1),
        min_disk_gb=float(min_disk),
    )


def _driver(backend: Backend):
    opts = dict(backend.settings or {})
    if backend.secrets:
        opts["secrets"] = decrypt_json(backend.secrets)
    return get_driver(BackendKind.OPENSTACK, opts)


def _hex(digest: str) -> str:
    return digest.split(":", 1)[-1]


def builder_name(image: Image, backend: Backend) -> str:
    return f"wt-bake-{_hex(image.digest)[:12]}-{backend.name}"


def glance_name(image: Image) -> str:
    return f"windtunnel-{image.name}-{_hex(image.digest)[:12]}"


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


def _find_by_digest(driver, digest: str) -> Any | None:
    """An active Glance image carrying this digest (Glance filters on any property)."""
    from openstack import exceptions as os_exc

    def query() -> list[dict[str, Any]]:
        response = driver.conn.image.get(
            "/images", params={META_DIGEST: digest, "status": "active", "limit": 5}
        )
        os_exc.raise_from_response(response)
        return response.json().get("images", [])

    found = driver._call("find image by digest", query)
    if not found:
        return None
    return driver._call("get image", lambda: driver.conn.image.get_image(found[0]["id"]))


def _find_glance(driver, ref: str) -> Any | None:
    from openstack import exceptions as os_exc

    try:
        return driver._call(
            "find image", lambda: driver.conn.image.find_image(ref, ignore_missing=True)
        )
    except os_exc.DuplicateResource as exc:
        raise ApplicationError(
            f"several Glance images are named {ref!r}: give the image id instead",
            field="glance_image",
        ) from exc


# --- baking ------------------------------------------------------------------------------------


def vm_bake_enqueue(*, image: Image, force: bool = False) -> list[str]:
    """Start bakes of a VM image on every enabled OpenStack backend that can bake (has a
    base_image) and does not have the image yet (or every one, with force). The backends."""
    from catalog.tasks import bake_vm_image

    stream = _LogStream(image.pk)
    names = []
    for backend in Backend.objects.filter(kind=BackendKind.OPENSTACK, enabled=True).order_by(
        "name"
    ):
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
        enqueue_on_commit(bake_vm_image, image.pk, backend.pk, force)
    if not names:
        stream.line(
            "no OpenStack backend bakes it: the image stays pending until one with "
            "settings.base_image exists (then rebuild it) or an admin uploads or registers it"
        )
    stream.flush()
    return names


def _bake_lock_key(image_id: int, backend_id: int) -> int:
    digest = hashlib.sha256(f"windtunnel-image-bake:{image_id}:{backend_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


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


def _progress_waiting(elapsed: float) -> float:
    """0.15 → 0.75 while the recipe runs (a typical recipe takes minutes; never reaches 0.75)."""
    return 0.15 + 0.6 * (1 - math.exp(-elapsed / 300.0))


class _Bake:
    """One step of one bake; `record` is the row's bake record for this backend."""

    def __init__(self, image: Image, backend: Backend, record: dict[str, Any] | None) -> None:
        self.image = image
        self.backend = backend
        self.record = dict(record or {})
        self.stream = _LogStream(image.pk)
        self.driver: Any = None
        self.clock: Callable[[], float] = time.time

    def say(self, text: str) -> None:
        self.stream.line(f"[{self.backend.name}] {text}")

    def progress(self, value: float) -> None:
        if self.image.status != ImageStatus.READY:  # ready elsewhere: runs there go on
            self.stream.progress(value)

    def save(self, next_in: float) -> float:
        self.record["next"] = self.clock() + next_in
        _set_record(self.image.pk, self.backend.name, self.record)
        self.stream.flush()
        return next_in

    # -- outcomes --------------------------------------------------------------------------

    def done(self, glance: Any, how: str) -> None:
        self._delete_builder()
        size = getattr(glance, "size", None)
        self.say(f"{how}: Glance image {glance.id} ({getattr(glance, 'name', '')}) is ready")
        self.stream.flush()
        _set_reference(self.image.pk, self.backend.name, glance.id, size)
        _wake_waiting(self.image)

    def fail(self, message: str) -> None:
        self._delete_builder()
        self._delete_unfinished_snapshot()
        self.say(f"bake failed: {message}")
        self.stream.flush()
        _set_record(self.image.pk, self.backend.name, None)
        image = Image.objects.get(pk=self.image.pk)
        if (image.references or {}) and not image.bakes:
            # another backend has the image: it stays usable there
            Image.objects.filter(pk=image.pk).update(status=ImageStatus.READY)
        elif not image.bakes:
            _fail(image, f"baking on backend {self.backend.name} failed: {message}")
        log.warning("bake of image %s on %s failed: %s", image.pk, self.backend.name, message)

    def _delete_builder(self) -> None:
        server = self.record.get("server")
        if not server or self.driver is None:
            return
        try:
            self.driver._call(
                "delete builder",
                lambda: self.driver.conn.compute.delete_server(server, ignore_missing=True),
            )
            self.say(f"builder {server} deleted")
        except DriverError as exc:
            self.say(f"could not delete builder {server} ({exc}); the leak reaper will")
        self.record.pop("server", None)

    def _delete_unfinished_snapshot(self) -> None:
        snap = self.record.get("snapshot")
        if not snap or self.driver is None:
            return
        try:
            found = self.driver._call(
                "get snapshot",
                lambda: self.driver.conn.image.find_image(snap, ignore_missing=True),
            )
            if found is not None and found.status != "active":
                self.driver._call(
                    "delete snapshot",
                    lambda: self.driver.conn.image.delete_image(snap, ignore_missing=True),
                )
                self.say(f"unfinished snapshot {snap} ({found.status}) deleted")
        except DriverError as exc:
            self.say(f"could not delete the unfinished snapshot {snap}: {exc}")

    def _console_tail(self, lines: int = 20) -> str:
        server = self.record.get("server")
        try:
            out = self.driver._call(
                "console log",
                lambda: self.driver.conn.compute.get_server_console_output(server, length=lines),
                retries=(),
            )
        except DriverError:
            return ""
        text = (out or {}).get("output", "") if isinstance(out, Mapping) else str(out or "")
        return "\n".join(text.splitlines()[-lines:])

    # -- phases -----------------------------------------------------------------------------

    def begin(self, force: bool) -> float | None:
        now = self.clock()
        self.record = {
            "phase": "begin",
            "force": force,
            "chain": uuid.uuid4().hex,
            "started": now,
            "deadline": now + BEGIN_WINDOW,
            "expires": now + BEGIN_WINDOW + DEADLINE_MARGIN,
        }
        if self.image.status != ImageStatus.READY:
            Image.objects.filter(pk=self.image.pk).update(
                status=ImageStatus.BUILDING,
                build_started_at=timezone.now(),
                progress=0.02,
                error="",
            )
        self.say(f"bake of {image_label(self.image)} starts")
        return self.start(force)

    def start(self, force: bool) -> float | None:
        """Reuse an image of this digest, or boot the builder (phase begin)."""
        try:
            conf = bake_settings(self.backend.settings or {})
        except ApplicationError as exc:
            self.fail(exc.message)
            return None
        if not force:
            found = _find_by_digest(self.driver, self.image.digest)
            if found is not None:
                self.say(f"Glance already has an active image of digest {self.image.digest}")
                self.done(found, "no rebake")
                return None
        if not conf.base_image:
            self.fail(
                "settings.base_image is not set: give the Glance name or id of the "
                "distribution cloud image to bake from (e.g. debian-12-genericcloud-amd64)"
            )
            return None
        base = _find_glance(self.driver, conf.base_image)
        if base is None or base.status != "active":
            state = "missing" if base is None else base.status
            self.fail(
                f"settings.base_image: no active image {conf.base_image!r} in this backend's "
                f"Glance ({state}); upload the distribution cloud image or fix the name"
            )
            return None
        user_data = _gzip_b64(self.image.recipe)
        if not self.image.recipe.strip() or len(user_data) > NOVA_USER_DATA_MAX:
            self.fail(
                f"the recipe is {len(user_data)} bytes of base64 user data; Nova accepts "
                f"1 to {NOVA_USER_DATA_MAX}: compose fewer packages per image"
            )
            return None
        try:
            flavor = self._flavor(conf, base)
            network = self.driver._network_args()
        except DriverError as exc:
            if exc.retryable:
                raise
            self.fail(str(exc))
            return None
        name = builder_name(self.image, self.backend)
        existing = self.driver._servers({"name": f"^{re.escape(name)}$"})
        if existing:  # a step that died after create: adopt its builder
            server = existing[0]
            self.say(f"builder {server.id} exists already ({server.status}): adopting it")
        else:
            args = {
                "name": name,
                "image_id": base.id,
                "flavor_id": flavor.id,
                "user_data": user_data,
                "metadata": {
                    META_KIND: "builder",
                    META_IMAGE: self.image.digest,
                },
                **network,
            }
            server = self.driver._call(
                "create builder",
                lambda: self.driver.conn.compute.create_server(**args),
                retries=(),
            )
            self.say(
                f"builder {server.id} ({name}) created from {base.name} ({base.id}), flavor "
                f"{flavor.name}, network {self.driver.settings['network']}"
            )
        now = self.clock()
        self.record.update(
            phase="boot",
            server=server.id,
            deadline=now + conf.bake_timeout,
            expires=now + conf.bake_timeout + conf.snapshot_timeout + DEADLINE_MARGIN,
        )
        self.progress(0.05)
        return self.save(BOOT_POLL)

    def _flavor(self, conf: BakeSettings, base: Any) -> Any:
        flavors = self.driver._flavors()
        if conf.bake_flavor:
            for f in flavors:
                if conf.bake_flavor in (f.name, f.id):
                    return f
            raise DriverError(
                f"settings.bake_flavor: no flavor {conf.bake_flavor!r} in this cloud "
                f"(there are {', '.join(sorted(f.name for f in flavors)) or 'none'})"
            )
        min_disk = max(conf.min_disk_gb, float(getattr(base, "min_disk", 0) or 0))
        found = smallest_flavor(flavors, cores=1, memory_gb=1.0, min_disk_gb=min_disk)
        if found is None:
            raise DriverError(
                f"no flavor has 1 vCPU, 1 GB and {min_disk:g} GB of disk to bake on: set "
                "settings.bake_flavor"
            )
        return found

    def watch(self) -> float | None:
        """Phases boot and wait: the builder boots, the recipe runs and powers it off."""
        from openstack import exceptions as os_exc

        conf = bake_settings(self.backend.settings or {})
        server_id = self.record["server"]
        now = self.clock()
        try:
            server = self.driver._call(
                "get builder", lambda: self.driver.conn.compute.get_server(server_id)
            )
        except os_exc.ResourceNotFound:
            self.record.pop("server", None)
            self.fail(f"the builder {server_id} is gone (deleted outside the portal?)")
            return None
        status = str(server.status or "").upper()
        started = self.record["started"]
        if status == "ERROR":
            fault = getattr(server, "fault", None) or {}
            detail = fault.get("message") if isinstance(fault, Mapping) else ""
            self.fail(f"the builder went ERROR: {detail or 'Nova gave no detail'}")
            return None
        if self.record["phase"] == "boot" and status in ("ACTIVE", "SHUTOFF"):
            self.record.update(phase="wait", active_at=now)
            self.say(f"builder ACTIVE after {now - started:.1f} s")
            self.say(
                "waiting for the recipe to power the server off (bake_timeout "
                f"{conf.bake_timeout:.0f} s)"
            )
            self.progress(0.15)
        if status == "SHUTOFF":
            return self.snapshot(server, conf)
        if now > self.record["deadline"]:
            tail = self._console_tail()
            self.fail(
                f"the recipe did not power the server off within bake_timeout "
                f"({conf.bake_timeout:.0f} s; the builder is {status or 'BUILD'})"
                + (f"; the console's last lines:\n{tail}" if tail else "")
            )
            return None
        if self.record["phase"] == "wait":
            self.progress(_progress_waiting(now - self.record["active_at"]))
            return self.save(WAIT_POLL)
        return self.save(BOOT_POLL)

    def snapshot(self, server: Any, conf: BakeSettings) -> float:
        now = self.clock()
        self.say(
            f"builder SHUTOFF after {now - self.record['started']:.1f} s: the recipe is done; "
            "snapshotting it"
        )
        name = glance_name(self.image)
        meta = {
            META_DIGEST: self.image.digest,
            META_IMAGE: self.image.name,
            "windtunnel_backend": self.backend.name,
        }
        glance = self.driver._call(
            "snapshot builder",
            lambda: self.driver.conn.compute.create_server_image(
                server, name=name, metadata=meta, wait=False
            ),
            retries=(),
        )
        self.record.update(
            phase="snapshot",
            snapshot=glance.id,
            shutoff_at=now,
            snapshot_deadline=now + conf.snapshot_timeout,
        )
        self.say(f"snapshot {glance.id} ({name}) requested; waiting for Glance to have it")
        self.progress(0.8)
        return self.save(SNAPSHOT_POLL)

    def check_snapshot(self) -> float | None:
        """Phase snapshot: Nova uploads the disk into Glance; done when Glance says active."""
        conf = bake_settings(self.backend.settings or {})
        snap = self.record["snapshot"]
        now = self.clock()
        glance = self.driver._call(
            "get snapshot", lambda: self.driver.conn.image.find_image(snap, ignore_missing=True)
        )
        if glance is None or glance.status in ("killed", "deleted", "pending_delete"):
            self.fail(f"Glance lost the snapshot {snap} ({getattr(glance, 'status', 'gone')})")
            return None
        if glance.status == "active":
            self.say(f"snapshot active after {now - self.record['shutoff_at']:.1f} s")
            self.done(glance, f"baked in {now - self.record['started']:.1f} s")
            return None
        # Nova clears the server's task_state when its driver has finished the snapshot; a
        # real hypervisor has uploaded the disk by then. A snapshot still `queued` (no data)
        # long after is one that will never come (e.g. Nova's FakeDriver uploads nothing).
        task_state = self._task_state()
        if glance.status == "queued" and task_state is None:
            since = self.record.setdefault("nova_done_at", now)
            if now - since > conf.snapshot_stall_grace:
                self.fail(
                    f"Nova finished the snapshot but uploaded no data: Glance image {snap} "
                    f"stayed queued for {now - since:.0f} s after the server's task_state "
                    "cleared (this compute driver cannot snapshot; e.g. Nova's FakeDriver "
                    "only sets task_state image_uploading). Upload or register the image "
                    "instead."
                )
                return None
        else:
            self.record.pop("nova_done_at", None)
        if now > self.record["snapshot_deadline"]:
            self.fail(
                f"the snapshot {snap} was not active within snapshot_timeout "
                f"({conf.snapshot_timeout:.0f} s; Glance says {glance.status}, Nova's "
                f"task_state is {task_state})"
            )
            return None
        elapsed = now - self.record["shutoff_at"]
        self.progress(0.8 + 0.15 * (1 - math.exp(-elapsed / 60.0)))
        return self.save(SNAPSHOT_POLL)

    def _task_state(self) -> str | None:
        server = self.record.get("server")
        if not server:
            return None
        from openstack import exceptions as os_exc

        try:
            found = self.driver._call(
                "get builder", lambda: self.driver.conn.compute.get_server(server)
            )
        except os_exc.ResourceNotFound:
            return None
        return getattr(found, "task_state", None) or None


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
    delay = _step(image_id=image_id, backend_id=backend_id, force=force, chain=chain)
    if delay is None:
        return None
    bakes = Image.objects.filter(pk=image_id).values_list("bakes", flat=True).first() or {}
    backend_name = Backend.objects.filter(pk=backend_id).values_list("name", flat=True).first()
    record = bakes.get(backend_name) or {}
    return NextStep(delay, record.get("chain", "")) if record else None


def _step(*, image_id: int, backend_id: int, force: bool, chain: str) -> float | None:
    key = _bake_lock_key(int(image_id), int(backend_id))
    if not _try_lock(key):
        return None  # the step of another chain is running; that chain goes on
    try:
        # read under the lock: the record is what the last step left
        image = Image.objects.filter(pk=image_id).first()
        backend = Backend.objects.filter(pk=backend_id).first()
        if (
            image is None
            or backend is None
            or image.kind != ImageKind.VM
            or backend.kind != BackendKind.OPENSTACK
        ):
            return None
        record = (image.bakes or {}).get(backend.name)
        bake = _Bake(image, backend, record)
        if record is None:
            if image.status == ImageStatus.RETIRED:
                return None
            if not force and (image.references or {}).get(backend.name):
                return None
        elif chain != record.get("chain"):
            overdue = bake.clock() - float(record.get("next", 0))
            if chain or overdue < STALE_CHAIN:
                return None  # a duplicate (double enqueue, redelivery): the bake's chain goes on
            bake.record["chain"] = uuid.uuid4().hex  # the chain was lost: adopt the bake
            bake.say(f"picking up a bake whose steps stopped {overdue:.0f} s ago")
        try:
            bake.driver = _driver(backend)
            if record is None:
                return bake.begin(force)
            phase = record.get("phase")
            if phase == "begin":  # the cloud did not answer at the start: again
                return bake.start(bool(record.get("force", force)))
            if phase in ("boot", "wait"):
                return bake.watch()
            if phase == "snapshot":
                return bake.check_snapshot()
            bake.fail(f"unknown bake phase {phase!r}")
            return None
        except ApplicationError as exc:
            bake.fail(exc.message)
            return None
        except DriverError as exc:
            deadline = float(bake.record.get("snapshot_deadline") or bake.record.get("deadline", 0))
            if exc.retryable and bake.clock() < deadline:
                bake.say(f"the cloud did not answer ({exc}); trying again in {RETRY_POLL:.0f} s")
                return bake.save(RETRY_POLL)
            bake.fail(str(exc))
            return None
        except Exception as exc:  # noqa: BLE001 — a bake must never stay "building"
            log.exception("bake of image %s on %s crashed", image.pk, backend.name)
            bake.fail(f"the bake crashed: {exc!r}")
            return None
    finally:
        _unlock(key)


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
    if backend.kind != BackendKind.OPENSTACK:
        raise ApplicationError(
            f"backend: {name} is a {backend.kind} backend; VM images live in an OpenStack "
            "backend's Glance",
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
    stream = _LogStream(image.pk)
    stream.line(f"[{backend.name}] {how}: Glance image {glance.id} ({glance.name})")
    stream.flush()
    image.refresh_from_db()
    _wake_waiting(image)
    return image


def vm_image_register(*, image: Image, backend_name: Any, glance_image: Any) -> Image:
    """Use an image already in the backend's Glance (by id or name); it must be active."""
    backend = _openstack_backend(backend_name)
    _vm_image_for_glance(image, backend)
    if not isinstance(glance_image, str) or not _NAME.match(glance_image):
        raise ApplicationError(
            "glance_image: give the id or name of an image in the backend's Glance",
            field="glance_image",
        )
    try:
        driver = _driver(backend)
        found = _find_glance(driver, glance_image)
    except DriverError as exc:
        raise _cloud_error(backend, exc) from exc
    if found is None:
        raise ApplicationError(
            f"glance_image: no image {glance_image!r} in the Glance of backend {backend.name} "
            "(that its project can see); give the id or name from `openstack image list`",
            field="glance_image",
        )
    if found.status != "active":
        raise ApplicationError(
            f"glance_image: image {glance_image!r} is {found.status}, not active; wait until "
            "Glance has all of its data, or upload it again",
            field="glance_image",
        )
    return _record(image, backend, found, "registered")


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
    meta = {
        META_DIGEST: image.digest,
        META_IMAGE: image.name,
        "windtunnel_backend": backend.name,
        "windtunnel_upload": marker,
    }
    try:
        driver = _driver(backend)
        created = driver._call(
            "upload image",
            lambda: driver.conn.image.create_image(
                name=glance_name(image),
                data=data,
                size=size,
                disk_format=disk_format,
                container_format="bare",
                allow_duplicates=True,
                validate_checksum=False,
                meta=meta,
            ),
            retries=(),
        )
        glance = driver._call("get image", lambda: driver.conn.image.get_image(created.id))
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
        driver = _driver(backend)
        response = driver.conn.image.get("/images", params={"windtunnel_upload": marker})
        for item in response.json().get("images", []):
            driver.conn.image.delete_image(item["id"], ignore_missing=True)
    except Exception as exc:  # noqa: BLE001 — best effort; the answer already says it failed
        log.warning("cannot delete the partial upload %s on %s: %s", marker, backend.name, exc)


def _gzip_b64(text: str) -> str:
    """User data for Nova: the recipe gzipped (cloud-init unpacks gzip user data itself), then
    base64. The recipe's payloads are base64 text, which gzip packs back by about a quarter:
    room under Nova's 64 KB for the agent and the packages' files."""
    import base64
    import gzip

    return base64.b64encode(gzip.compress(text.encode(), compresslevel=9, mtime=0)).decode()
