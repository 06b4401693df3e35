"""Baking a VM image on a cloud: the recipe applied to a distribution cloud image.

A bake boots a **builder** server from the backend's `base_image` with the composer's
cloud-init recipe as its user data, waits until the recipe powers it off, snapshots it,
waits until the image service has the snapshot `active`, and deletes the builder (also on
failure and timeout). Same digest, no rebake: a bake first asks for an active image whose
property `windtunnel_digest` is the image's digest, and takes that.

A bake is a chain of short steps, not one long wait: `bake_step` looks at the cloud once
and answers a `BakeStep`: the bake's record to keep (a plain dict: phase, builder, snapshot,
deadlines), the log lines and progress of the step, and what happened: look again in
`delay` seconds, done with the image service's `image`, or failed with an `error` (the
builder and an unfinished snapshot deleted already). The caller keeps the record between
steps, writes the log, holds the locks and records the outcome (the portal:
backend/images/vm.py); nothing here keeps state or touches a database.

The cloud is a `VmImageHost` (vm_host.py): the calls a bake makes on a backend whose runs
boot VM images. The OpenStack driver is one.
"""

from __future__ import annotations

import base64
import dataclasses
import gzip
import logging
import math
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from orchestration.composer.vm_host import (
    META_BACKEND,
    META_DIGEST,
    META_IMAGE,
    META_KIND,
    VmImageHost,
    builder_name,
    glance_name,
)
from orchestration.errors import DriverError, SettingsError

__all__ = [
    "BOOT_POLL",
    "DEADLINE_MARGIN",
    "NOVA_USER_DATA_MAX",
    "RETRY_POLL",
    "SNAPSHOT_POLL",
    "WAIT_POLL",
    "BakeImage",
    "BakeSettings",
    "BakeStep",
    "bake_settings",
    "bake_step",
    "gzip_b64",
    "new_record",
]

log = logging.getLogger(__name__)

NOVA_USER_DATA_MAX = 65_535  # bytes of base64 user data Nova accepts

BOOT_POLL = 2.0  # seconds between looks while the builder boots
WAIT_POLL = 10.0  # … while the recipe runs (minutes)
SNAPSHOT_POLL = 3.0  # … while the image service receives the snapshot
RETRY_POLL = 15.0  # … after the cloud failed to answer
BEGIN_WINDOW = 300.0  # a bake that cannot even start within this fails
DEADLINE_MARGIN = 600.0  # the reaper spares a builder this long past its bake's deadline
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@ -]{0,254}$")


# --- settings --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class BakeSettings:
    """A backend's bake settings (docs/images.md)."""

    base_image: str
    bake_flavor: str
    bake_timeout: float
    snapshot_timeout: float
    snapshot_stall_grace: float
    min_disk_gb: float


def _setting_name(raw: Mapping[str, Any], key: str, what: str) -> str:
    value = raw.get(key) or ""
    if value and (not isinstance(value, str) or not _NAME.match(value)):
        raise SettingsError(
            key, f"{key} ({what}) must be a Glance/Nova name or id (letters, digits, ._:/@- )"
        )
    return value


def _setting_seconds(raw: Mapping[str, Any], key: str, default: float, lo: float) -> float:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not lo <= value <= 86_400:
        raise SettingsError(key, f"{key} must be a number of seconds from {lo:g} to 86400")
    return float(value)


def bake_settings(raw: Mapping[str, Any]) -> BakeSettings:
    """A backend's bake settings, checked; SettingsError names the field and the fix (its
    message starts with the setting's name)."""
    raw = raw if isinstance(raw, Mapping) else {}
    min_disk = raw.get("min_disk_gb", 0)
    if isinstance(min_disk, bool) or not isinstance(min_disk, int | float) or min_disk < 0:
        raise SettingsError("min_disk_gb", "min_disk_gb must be a number of GB ≥ 0")
    return BakeSettings(
        base_image=_setting_name(raw, "base_image", "the base cloud image"),
        bake_flavor=_setting_name(raw, "bake_flavor", "the bake flavor"),
        bake_timeout=_setting_seconds(raw, "bake_timeout", 3600, 5),
        snapshot_timeout=_setting_seconds(raw, "snapshot_timeout", 1800, 5),
        snapshot_stall_grace=_setting_seconds(raw, "snapshot_stall_grace", 120, 1),
        min_disk_gb=float(min_disk),
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class BakeImage:
    """The image to bake, and the backend (by its name in the portal) it is baked on."""

    digest: str
    name: str
    recipe: str  # cloud-init user data (composer.recipe, kind "vm")
    backend: str


def gzip_b64(text: str) -> str:
    """User data for Nova: the recipe gzipped (cloud-init unpacks gzip user data itself), then
    base64. The recipe's payloads are base64 text, which gzip packs back by about a quarter:
    room under Nova's 64 KB for the agent and the packages' files."""
    return base64.b64encode(gzip.compress(text.encode(), compresslevel=9, mtime=0)).decode()


def new_record(*, force: bool, now: float) -> dict[str, Any]:
    """The record of a bake that starts now (phase "begin"): its first step must start it
    within BEGIN_WINDOW; `expires` is when the leak reaper stops sparing its builder."""
    return {
        "phase": "begin",
        "force": force,
        "started": now,
        "deadline": now + BEGIN_WINDOW,
        "expires": now + BEGIN_WINDOW + DEADLINE_MARGIN,
    }


# --- one step -------------------------------------------------------------------------------------


@dataclasses.dataclass(kw_only=True)
class BakeStep:
    """What one step did. `delay`: look again in that many seconds; `image`: done, the image
    service's image (id, name, size); `error`: failed. `record` is the bake's record to keep
    for the next step (meaningless once the bake is over); `lines` the step's log lines;
    `progress` the bake's progress (0-1) when the step moved it."""

    record: dict[str, Any]
    lines: list[str] = dataclasses.field(default_factory=list)
    progress: float | None = None
    delay: float | None = None
    image: Any | None = None
    error: str | None = None


def _progress_waiting(elapsed: float) -> float:
    """0.15 → 0.75 while the recipe runs (a typical recipe takes minutes; never reaches 0.75)."""
    return 0.15 + 0.6 * (1 - math.exp(-elapsed / 300.0))


class _Bake:
    """One step of one bake: the phases, each looking at the cloud once."""

    def __init__(
        self,
        record: Mapping[str, Any],
        *,
        settings: Mapping[str, Any],
        image: BakeImage,
        host: VmImageHost,
        clock: Callable[[], float],
    ) -> None:
        self.out = BakeStep(record=dict(record))
        self.record = self.out.record
        self.settings = settings
        self.image = image
        self.host = host
        self.clock = clock

    def say(self, text: str) -> None:
        self.out.lines.append(text)

    def again(self, delay: float) -> BakeStep:
        self.out.delay = delay
        return self.out

    # -- outcomes --------------------------------------------------------------------------

    def done(self, image: Any, how: str) -> BakeStep:
        self._delete_builder()
        self.say(f"{how}: Glance image {image.id} ({getattr(image, 'name', '')}) is ready")
        self.out.image = image
        self.out.progress = 1.0
        return self.out

    def fail(self, message: str) -> BakeStep:
        self._delete_builder()
        self._delete_unfinished_snapshot()
        self.say(f"bake failed: {message}")
        self.out.error = message
        return self.out

    def _delete_builder(self) -> None:
        server = self.record.get("server")
        if not server:
            return
        try:
            self.host.delete_server(server, what="delete builder")
            self.say(f"builder {server} deleted")
        except DriverError as exc:
            self.say(f"could not delete builder {server} ({exc}); the leak reaper will")
        self.record.pop("server", None)

    def _delete_unfinished_snapshot(self) -> None:
        snap = self.record.get("snapshot")
        if not snap:
            return
        try:
            found = self.host.find_image(snap, what="get snapshot")
            if found is not None and found.status != "active":
                self.host.delete_image(snap, what="delete snapshot")
                self.say(f"unfinished snapshot {snap} ({found.status}) deleted")
        except DriverError as exc:
            self.say(f"could not delete the unfinished snapshot {snap}: {exc}")

    # -- phases ----------------------------------------------------------------------------

    def step(self) -> BakeStep:
        """The step of the record's phase; a cloud that did not answer is asked again after
        RETRY_POLL until the phase's deadline, any other failure ends the bake."""
        try:
            phase = self.record.get("phase")
            if phase == "begin":  # a new bake, or the cloud did not answer at the start
                return self.start(bool(self.record.get("force")))
            if phase in ("boot", "wait"):
                return self.watch()
            if phase == "snapshot":
                return self.check_snapshot()
            return self.fail(f"unknown bake phase {phase!r}")
        except SettingsError as exc:
            return self.fail(f"settings.{exc.message}")
        except DriverError as exc:
            deadline = float(self.record.get("snapshot_deadline") or self.record.get("deadline", 0))
            if exc.retryable and self.clock() < deadline:
                self.say(f"the cloud did not answer ({exc}); trying again in {RETRY_POLL:.0f} s")
                return self.again(RETRY_POLL)
            return self.fail(str(exc))
        except Exception as exc:  # noqa: BLE001 — a bake must never stay "building"
            log.exception("bake of %s on %s crashed", self.image.digest, self.image.backend)
            return self.fail(f"the bake crashed: {exc!r}")

    def start(self, force: bool) -> BakeStep:
        """Reuse an image of this digest, or boot the builder (phase begin)."""
        conf = bake_settings(self.settings)
        if not force:
            found = self.host.find_image_by_property(META_DIGEST, self.image.digest)
            if found is not None:
                self.say(f"Glance already has an active image of digest {self.image.digest}")
                return self.done(found, "no rebake")
        if not conf.base_image:
            return self.fail(
                "settings.base_image is not set: give the Glance name or id of the "
                "distribution cloud image to bake from (e.g. debian-12-genericcloud-amd64)"
            )
        bases = self.host.find_images(conf.base_image)
        if len(bases) > 1:
            return self.fail(
                f"settings.base_image: several Glance images are named {conf.base_image!r}: "
                "give the image id instead"
            )
        base = bases[0] if bases else None
        if base is None or base.status != "active":
            state = "missing" if base is None else base.status
            return self.fail(
                f"settings.base_image: no active image {conf.base_image!r} in this backend's "
                f"Glance ({state}); upload the distribution cloud image or fix the name"
            )
        user_data = gzip_b64(self.image.recipe)
        if not self.image.recipe.strip() or len(user_data) > NOVA_USER_DATA_MAX:
            return self.fail(
                f"the recipe is {len(user_data)} bytes of base64 user data; Nova accepts "
                f"1 to {NOVA_USER_DATA_MAX}: compose fewer packages per image"
            )
        try:
            flavor = self._flavor(conf, base)
            network = self.host.network_args()
        except DriverError as exc:
            if exc.retryable:
                raise
            return self.fail(str(exc))
        name = builder_name(digest=self.image.digest, backend=self.image.backend)
        existing = self.host.list_servers({"name": f"^{re.escape(name)}$"})
        if existing:  # a step that died after create: adopt its builder
            server = existing[0]
            self.say(f"builder {server.id} exists already ({server.status}): adopting it")
        else:
            server = self.host.create_server(
                {
                    "name": name,
                    "image_id": base.id,
                    "flavor_id": flavor.id,
                    "user_data": user_data,
                    "metadata": {META_KIND: "builder", META_IMAGE: self.image.digest},
                    **network,
                }
            )
            self.say(
                f"builder {server.id} ({name}) created from {base.name} ({base.id}), flavor "
                f"{flavor.name}, network {self.host.settings['network']}"
            )
        now = self.clock()
        self.record.update(
            phase="boot",
            server=server.id,
            deadline=now + conf.bake_timeout,
            expires=now + conf.bake_timeout + conf.snapshot_timeout + DEADLINE_MARGIN,
        )
        self.out.progress = 0.05
        return self.again(BOOT_POLL)

    def _flavor(self, conf: BakeSettings, base: Any) -> Any:
        if conf.bake_flavor:
            flavors = self.host.flavors()
            for f in flavors:
                if conf.bake_flavor in (f.name, f.id):
                    return f
            raise DriverError(
                f"settings.bake_flavor: no flavor {conf.bake_flavor!r} in this cloud "
                f"(there are {', '.join(sorted(f.name for f in flavors)) or 'none'})"
            )
        min_disk = max(conf.min_disk_gb, float(getattr(base, "min_disk", 0) or 0))
        found = self.host.fitting_flavor(cores=1, memory_gb=1.0, min_disk_gb=min_disk)
        if found is None:
            raise DriverError(
                f"no flavor has 1 vCPU, 1 GB and {min_disk:g} GB of disk to bake on: set "
                "settings.bake_flavor"
            )
        return found

    def watch(self) -> BakeStep:
        """Phases boot and wait: the builder boots, the recipe runs and powers it off."""
        conf = bake_settings(self.settings)
        server_id = self.record["server"]
        now = self.clock()
        server = self.host.get_server(server_id, what="get builder")
        if server is None:
            self.record.pop("server", None)
            return self.fail(f"the builder {server_id} is gone (deleted outside the portal?)")
        status = str(server.status or "").upper()
        started = self.record["started"]
        if status == "ERROR":
            fault = getattr(server, "fault", None) or {}
            detail = fault.get("message") if isinstance(fault, Mapping) else ""
            return self.fail(f"the builder went ERROR: {detail or 'Nova gave no detail'}")
        if self.record["phase"] == "boot" and status in ("ACTIVE", "SHUTOFF"):
            self.record.update(phase="wait", active_at=now)
            self.say(f"builder ACTIVE after {now - started:.1f} s")
            self.say(
                "waiting for the recipe to power the server off (bake_timeout "
                f"{conf.bake_timeout:.0f} s)"
            )
            self.out.progress = 0.15
        if status == "SHUTOFF":
            return self.snapshot(server, conf)
        if now > self.record["deadline"]:
            tail = self.host.console_tail(server_id, lines=20)
            return self.fail(
                f"the recipe did not power the server off within bake_timeout "
                f"({conf.bake_timeout:.0f} s; the builder is {status or 'BUILD'})"
                + (f"; the console's last lines:\n{tail}" if tail else "")
            )
        if self.record["phase"] == "wait":
            self.out.progress = _progress_waiting(now - self.record["active_at"])
            return self.again(WAIT_POLL)
        return self.again(BOOT_POLL)

    def snapshot(self, server: Any, conf: BakeSettings) -> BakeStep:
        now = self.clock()
        self.say(
            f"builder SHUTOFF after {now - self.record['started']:.1f} s: the recipe is done; "
            "snapshotting it"
        )
        name = glance_name(name=self.image.name, digest=self.image.digest)
        meta = {
            META_DIGEST: self.image.digest,
            META_IMAGE: self.image.name,
            META_BACKEND: self.image.backend,
        }
        glance = self.host.snapshot_server(server, name=name, metadata=meta)
        self.record.update(
            phase="snapshot",
            snapshot=glance.id,
            shutoff_at=now,
            snapshot_deadline=now + conf.snapshot_timeout,
        )
        self.say(f"snapshot {glance.id} ({name}) requested; waiting for Glance to have it")
        self.out.progress = 0.8
        return self.again(SNAPSHOT_POLL)

    def check_snapshot(self) -> BakeStep:
        """Phase snapshot: Nova uploads the disk into Glance; done when Glance says active."""
        conf = bake_settings(self.settings)
        snap = self.record["snapshot"]
        now = self.clock()
        glance = self.host.find_image(snap, what="get snapshot")
        if glance is None or glance.status in ("killed", "deleted", "pending_delete"):
            return self.fail(
                f"Glance lost the snapshot {snap} ({getattr(glance, 'status', 'gone')})"
            )
        if glance.status == "active":
            self.say(f"snapshot active after {now - self.record['shutoff_at']:.1f} s")
            return self.done(glance, f"baked in {now - self.record['started']:.1f} s")
        # Nova clears the server's task_state when its driver has finished the snapshot; a
        # real hypervisor has uploaded the disk by then. A snapshot still `queued` (no data)
        # long after is one that will never come (e.g. Nova's FakeDriver uploads nothing).
        task_state = self._task_state()
        if glance.status == "queued" and task_state is None:
            since = self.record.setdefault("nova_done_at", now)
            if now - since > conf.snapshot_stall_grace:
                return self.fail(
                    f"Nova finished the snapshot but uploaded no data: Glance image {snap} "
                    f"stayed queued for {now - since:.0f} s after the server's task_state "
                    "cleared (this compute driver cannot snapshot; e.g. Nova's FakeDriver "
                    "only sets task_state image_uploading). Upload or register the image "
                    "instead."
                )
        else:
            self.record.pop("nova_done_at", None)
        if now > self.record["snapshot_deadline"]:
            return self.fail(
                f"the snapshot {snap} was not active within snapshot_timeout "
                f"({conf.snapshot_timeout:.0f} s; Glance says {glance.status}, Nova's "
                f"task_state is {task_state})"
            )
        elapsed = now - self.record["shutoff_at"]
        self.out.progress = 0.8 + 0.15 * (1 - math.exp(-elapsed / 60.0))
        return self.again(SNAPSHOT_POLL)

    def _task_state(self) -> str | None:
        server = self.record.get("server")
        if not server:
            return None
        found = self.host.get_server(server, what="get builder")
        return (getattr(found, "task_state", None) or None) if found is not None else None


def bake_step(
    record: Mapping[str, Any],
    *,
    settings: Mapping[str, Any],
    image: BakeImage,
    host: VmImageHost,
    clock: Callable[[], float] = time.time,
) -> BakeStep:
    """One step of the bake of `image` on `host`, from its `record` (new_record() for a bake
    that starts; the step's own record after that) and the backend's raw `settings` (its
    bake settings are read with bake_settings at each step: an admin may fix them while a
    bake waits)."""
    return _Bake(record, settings=settings, image=image, host=host, clock=clock).step()
