"""VM images on an OpenStack backend: bake, upload, register (images/vm.py), against the
loopback control plane of scripts/start-openstack (Keystone, Glance, Nova with the FakeDriver).

The fake cloud runs no guest and writes no disk, so the tests play two parts:
- the VM's: a fake server never runs cloud-init, so the test reads the builder's user data
  back (admin, microversion ≥ 2.3), checks it is the recipe, and stops the server as the
  recipe's `power_state: poweroff` would;
- the hypervisor's: Nova's FakeDriver.snapshot() only sets the server's task_state to
  image_uploading and returns, uploading nothing, so Glance keeps the snapshot `queued`
  (no disk_format, no data) forever. libvirt would upload the disk; the test uploads the base
  image's bytes into the snapshot in its place. Without that help the bake sees the stall and
  fails with that reason (test_a_snapshot_the_cloud_never_fills_fails_with_the_reason).

Bakes are driven step by step here (vm_bake_step), as the Celery task would, without a worker.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from catalog import images
from catalog.choices import ImageKind, ImageStatus
from catalog.images import composition_for
from catalog.models import Backend, Image
from core import jobs
from core.jobs import Job
from images import builds, vm
from images.tasks import bake_vm_image
from orchestration.composer.bake import BOOT_POLL
from orchestration.composer.vm_host import META_DIGEST

ROOT = Path(__file__).resolve().parents[3]
# WT_OPENSTACK_DIR: a control plane of its own (scripts/start-openstack honours it too)
CLOUD_JSON = Path(os.environ.get("WT_OPENSTACK_DIR") or ROOT / ".data" / "openstack") / "cloud.json"

pytestmark = [
    pytest.mark.skipif(
        not CLOUD_JSON.is_file(),
        reason="no OpenStack control plane (scripts/start-openstack writes .data/openstack/cloud.json)",
    ),
    pytest.mark.xdist_group("cluster"),
]


def _cloud() -> dict:
    return json.loads(CLOUD_JSON.read_text())


def _connect(who: str):
    import openstack

    c = _cloud()
    return openstack.connection.Connection(
        auth=c[who], region_name=c["region"], compute_api_version="2.79"
    )


@pytest.fixture(scope="module")
def admin():
    return _connect("admin")


@pytest.fixture(scope="module")
def project():
    return _connect("tenant")


def _settings(**extra) -> dict:
    c = _cloud()
    return {
        "cloud": c["clouds"]["tenant"],
        "clouds_yaml": c["clouds_yaml"],
        "network": "none",
        "base_image": c["image"]["name"],
        "bake_timeout": 120,
        "api_timeout": 10,
        **extra,
    }


@pytest.fixture
def make_backend(db):
    def make(name: str = "os-bake", **extra) -> Backend:
        return Backend.objects.create(
            name=name,
            kind="openstack",
            settings=_settings(**extra),
            cores=8,
            memory_gb=16,
        )

    return make


@pytest.fixture
def vm_image(db, project, admin):
    """A VM image with the real recipe of a composition and a digest of its own, so runs of
    this file never find each other's Glance images (no-rebake goes by digest)."""
    composition = composition_for(packages=["icofoam"], kind=ImageKind.VM)
    image = Image.objects.create(
        name=composition.name,
        kind=ImageKind.VM,
        digest=f"sha256:{secrets.token_hex(32)}",
        packages=list(composition.requested),
        closure=composition.packages,
        solvers=list(composition.solvers),
        recipe=composition.recipe,
    )
    yield image
    # whatever a failed test left: the builder, snapshots, uploads of this digest
    prefix = f"wt-bake-{image.digest[7:19]}"
    for server in admin.compute.servers(all_projects=True, name=f"^{prefix}"):
        admin.compute.delete_server(server, ignore_missing=True)
    response = project.image.get("/images", params={META_DIGEST: image.digest})
    for item in response.json().get("images", []):
        project.image.delete_image(item["id"], ignore_missing=True)


def _record(image: Image, backend: Backend) -> dict:
    return (Image.objects.get(pk=image.pk).bakes or {}).get(backend.name) or {}


def drive(
    image: Image,
    backend: Backend,
    *,
    until: Callable[[dict], bool] | None = None,
    timeout: float = 90,
    chain: str = "",
) -> str | None:
    """Take bake steps (as the Celery task would, sooner) until `until(record)` holds (then
    the chain id to go on with) or the bake is over (None)."""
    deadline = time.monotonic() + timeout
    step = vm.vm_bake_step(image_id=image.pk, backend_id=backend.pk, chain=chain)
    while step is not None:
        if until is not None and until(_record(image, backend)):
            return step.chain
        assert time.monotonic() < deadline, f"the bake did not get on: {_record(image, backend)}"
        time.sleep(min(step.delay, 0.3))
        step = vm.vm_bake_step(image_id=image.pk, backend_id=backend.pk, chain=step.chain)
    return None


def drive_until(
    image: Image, backend: Backend, until: Callable[[dict], bool], *, chain: str = ""
) -> str:
    """drive() until `until(record)` holds: the chain id to go on with (the bake must not
    end first)."""
    found = drive(image, backend, until=until, chain=chain)
    assert found is not None, Image.objects.get(pk=image.pk).build_log
    return found


def _gone(conn, server_id: str) -> bool:
    from openstack import exceptions as os_exc

    try:
        server = conn.compute.get_server(server_id)
    except os_exc.ResourceNotFound:
        return True
    return server.status in ("DELETED", "SOFT_DELETED")


def _wait_gone(conn, server_id: str, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _gone(conn, server_id):
            return True
        time.sleep(0.3)
    return False


def _play_the_hypervisor(project, snapshot_id: str) -> float:
    """Upload the base image's bytes into the queued snapshot, as libvirt's snapshot() would.
    Returns the seconds it took."""
    started = time.monotonic()
    snap = project.image.get_image(snapshot_id)
    assert snap.status == "queued" and snap.disk_format is None, (
        "the fake cloud now fills snapshots itself: drop this stand-in",
        snap.status,
    )
    base = project.image.find_image(_cloud()["image"]["name"])
    disk = project.image.download_image(base).content
    project.image.update_image(snapshot_id, disk_format="raw", container_format="bare")
    response = project.image.put(
        f"/images/{snapshot_id}/file",
        data=disk,
        headers={"Content-Type": "application/octet-stream"},
    )
    assert response.status_code == 204, response.text
    return time.monotonic() - started


# -- baking ----------------------------------------------------------------------------------------


def test_a_bake_boots_the_recipe_snapshots_the_powered_off_builder_and_records_it(
    vm_image, make_backend, admin, project
) -> None:
    backend = make_backend()
    t0 = time.monotonic()
    chain = drive_until(vm_image, backend, lambda r: r.get("phase") == "wait")
    record = _record(vm_image, backend)
    server_id = record["server"]
    active_s = record["active_at"] - record["started"]
    assert vm_image.pk and Image.objects.get(pk=vm_image.pk).status == ImageStatus.BUILDING
    assert server_id in vm.builders_in_progress()  # the leak reaper spares it

    # the VM's part: the builder runs the recipe, then powers itself off
    builder = admin.compute.get_server(server_id)
    assert builder.name == f"wt-bake-{vm_image.digest[7:19]}-{backend.name}"
    assert builder.metadata == {"windtunnel_kind": "builder", "windtunnel_image": vm_image.digest}
    # gzipped user data: cloud-init unpacks it (the recipe's payloads are base64 text)
    assert gzip.decompress(base64.b64decode(builder.user_data)).decode() == vm_image.recipe
    assert builder.flavor["original_name"] == "wt.small"  # the smallest with 1 vCPU and 1 GB
    project.compute.stop_server(server_id)

    chain = drive_until(vm_image, backend, lambda r: r.get("phase") == "snapshot", chain=chain)
    record = _record(vm_image, backend)
    snap_started = time.monotonic()
    upload_s = _play_the_hypervisor(project, record["snapshot"])
    assert drive(vm_image, backend, chain=chain) is None
    snapshot_s = time.monotonic() - snap_started
    total_s = time.monotonic() - t0

    image = Image.objects.get(pk=vm_image.pk)
    assert image.status == ImageStatus.READY and image.progress == 1.0 and image.built_at
    assert image.references == {backend.name: record["snapshot"]}
    assert image.bakes == {} and server_id not in vm.builders_in_progress()
    snap = project.image.get_image(record["snapshot"])
    assert snap.status == "active" and snap.properties[META_DIGEST] == vm_image.digest
    assert snap.name == f"windtunnel-{image.name}-{vm_image.digest[7:19]}"
    assert image.size_bytes == snap.size
    for line in (
        "builder ACTIVE after",
        "waiting for the recipe to power the server off",
        "builder SHUTOFF after",
        "snapshot active after",
        f"builder {server_id} deleted",
    ):
        assert line in image.build_log, image.build_log
    assert _wait_gone(admin, server_id), "the builder must be deleted when the bake ends"
    print(
        f"\nTIMING builder create→ACTIVE {active_s:.1f} s; snapshot (request → active, with the "
        f"test's {upload_s:.2f} s upload) {snapshot_s:.1f} s; bake {total_s:.1f} s"
    )

    # same digest again: Glance has it, no builder boots
    Image.objects.filter(pk=image.pk).update(references={}, status=ImageStatus.PENDING)
    before = {s.id for s in admin.compute.servers(all_projects=True, name="^wt-bake-")}
    assert vm.vm_bake_step(image_id=image.pk, backend_id=backend.pk) is None
    after = {s.id for s in admin.compute.servers(all_projects=True, name="^wt-bake-")}
    assert after <= before
    image.refresh_from_db()
    assert image.status == ImageStatus.READY
    assert image.references == {backend.name: record["snapshot"]}
    assert "no rebake" in image.build_log


def test_the_task_takes_one_step_and_enqueues_the_next_and_duplicates_do_nothing(
    vm_image, make_backend, admin, monkeypatch
) -> None:
    backend = make_backend()
    queued: list[tuple] = []
    monkeypatch.setattr(
        bake_vm_image,
        "apply_async",
        lambda args, kwargs, countdown: queued.append((args, kwargs, countdown)),
    )
    bake_vm_image(vm_image.pk, backend.pk)  # the first step: the builder is created
    chain = _record(vm_image, backend)["chain"]
    assert queued == [((vm_image.pk, backend.pk), {"chain": chain}, BOOT_POLL)]
    # a second enqueue (no chain) while the bake runs, and a stale chain: both stop at once
    bake_vm_image(vm_image.pk, backend.pk)
    bake_vm_image(vm_image.pk, backend.pk, chain="old")
    assert len(queued) == 1
    servers = list(
        admin.compute.servers(all_projects=True, name=f"^wt-bake-{vm_image.digest[7:19]}")
    )
    assert len(servers) == 1


def test_a_builder_that_goes_error_is_deleted_and_the_image_fails_with_the_reason(
    vm_image, make_backend, admin
) -> None:
    backend = make_backend()
    chain = drive_until(vm_image, backend, lambda r: r.get("phase") == "wait")
    server_id = _record(vm_image, backend)["server"]
    admin.compute.reset_server_state(server_id, "error")
    assert drive(vm_image, backend, chain=chain) is None
    image = Image.objects.get(pk=vm_image.pk)
    assert image.status == ImageStatus.FAILED and image.bakes == {}
    assert "the builder went ERROR" in image.error
    assert "bake failed: the builder went ERROR" in image.build_log
    assert _wait_gone(admin, server_id)


def test_a_recipe_that_never_powers_off_times_out_and_the_builder_is_deleted(
    vm_image, make_backend, admin
) -> None:
    backend = make_backend(bake_timeout=5)
    started = time.monotonic()
    assert drive(vm_image, backend, timeout=60) is None
    image = Image.objects.get(pk=vm_image.pk)
    assert image.status == ImageStatus.FAILED
    assert "did not power the server off within bake_timeout (5 s" in image.build_log
    assert time.monotonic() - started < 40
    server_id = next(
        line.split()[2] for line in image.build_log.splitlines() if "] builder " in line
    )
    assert _wait_gone(admin, server_id)
    assert server_id not in vm.builders_in_progress()


def test_a_snapshot_the_cloud_never_fills_fails_with_the_reason(
    vm_image, make_backend, admin, project
) -> None:
    """Nova's FakeDriver finishes a snapshot without uploading a byte: the bake must not wait
    for snapshot_timeout, and must not call it ready."""
    backend = make_backend(snapshot_stall_grace=2)
    chain = drive_until(vm_image, backend, lambda r: r.get("phase") == "wait")
    server_id = _record(vm_image, backend)["server"]
    project.compute.stop_server(server_id)
    chain = drive_until(vm_image, backend, lambda r: r.get("phase") == "snapshot", chain=chain)
    snapshot_id = _record(vm_image, backend)["snapshot"]
    assert drive(vm_image, backend, chain=chain, timeout=60) is None
    image = Image.objects.get(pk=vm_image.pk)
    assert image.status == ImageStatus.FAILED
    assert "Nova finished the snapshot but uploaded no data" in image.error
    assert f"Glance image {snapshot_id} stayed queued" in image.error
    assert f"unfinished snapshot {snapshot_id} (queued) deleted" in image.build_log
    assert project.image.find_image(snapshot_id, ignore_missing=True) is None
    assert _wait_gone(admin, server_id)


def test_a_missing_base_image_fails_the_bake_naming_the_setting(vm_image, make_backend) -> None:
    backend = make_backend(base_image="no-such-cloud-image")
    assert vm.vm_bake_step(image_id=vm_image.pk, backend_id=backend.pk) is None
    image = Image.objects.get(pk=vm_image.pk)
    assert image.status == ImageStatus.FAILED
    assert "settings.base_image: no active image 'no-such-cloud-image'" in image.error


def test_a_vm_image_build_enqueues_a_bake_on_each_openstack_backend_with_a_base_image(
    db, make_backend, monkeypatch
) -> None:
    baking = make_backend("os-bakes")
    make_backend("os-nobase", base_image="")
    calls: list[tuple] = []
    monkeypatch.setattr(jobs, "enqueue", lambda job, *a, **kw: calls.append((job, *a)))
    image, created = images.image_compose(packages=["icofoam"], kind=ImageKind.VM)
    assert created
    assert calls == [(Job.BUILD_IMAGE, image.pk, False)]
    calls.clear()
    assert builds.image_build(image_id=image.pk) == "baking"  # the build task's body
    assert calls == [(Job.BAKE_VM_IMAGE, image.pk, baking.pk, False)]
    image.refresh_from_db()
    assert "[os-nobase] no settings.base_image" in image.build_log


# -- upload and register -----------------------------------------------------------------------------


def test_upload_of_a_raw_disk_makes_a_glance_image_and_the_image_ready(
    staff, vm_image, make_backend, project
) -> None:
    backend = make_backend()
    disk = b"\0" * 512 * 1024
    r = staff.post(
        f"/api/v1/admin/images/{vm_image.pk}/upload/?backend={backend.name}&disk_format=raw",
        data=disk,
        content_type="application/octet-stream",
    )
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["status"] == "ready"
    glance_id = body["references"][backend.name]
    glance = project.image.get_image(glance_id)
    assert glance.status == "active" and glance.size == len(disk)
    assert glance.disk_format == "raw" and glance.container_format == "bare"
    assert glance.properties[META_DIGEST] == vm_image.digest
    # …so a bake of the same digest reuses it
    Image.objects.filter(pk=vm_image.pk).update(references={}, status=ImageStatus.PENDING)
    assert vm.vm_bake_step(image_id=vm_image.pk, backend_id=backend.pk) is None
    assert Image.objects.get(pk=vm_image.pk).references == {backend.name: glance_id}


def test_upload_checks_format_size_and_backend(staff, vm_image, make_backend, settings) -> None:
    backend = make_backend()
    url = f"/api/v1/admin/images/{vm_image.pk}/upload/"
    qcow2 = vm.QCOW2_MAGIC + b"\0" * 1020
    r = staff.post(
        f"{url}?backend={backend.name}&disk_format=raw",
        data=qcow2,
        content_type="application/octet-stream",
    )
    assert r.status_code == 400 and r.json()["field"] == "disk_format"
    assert "pass disk_format=qcow2" in r.json()["message"]
    r = staff.post(
        f"{url}?backend={backend.name}",
        {"file": _named(b"\1" * 1024), "disk_format": "qcow2"},
        format="multipart",
    )
    assert r.status_code == 400 and r.json()["field"] == "disk_format"
    r = staff.post(
        f"{url}?backend={backend.name}&disk_format=vmdk",
        data=b"\1" * 1024,
        content_type="application/octet-stream",
    )
    assert r.status_code == 400 and "must be one of qcow2, raw" in r.json()["message"]
    r = staff.post(f"{url}?backend=nope", data=b"\1", content_type="application/octet-stream")
    assert r.status_code == 400 and r.json()["field"] == "backend"
    assert "no backend named 'nope'" in r.json()["message"]
    settings.WINDTUNNEL = {**settings.WINDTUNNEL, "VM_IMAGE_UPLOAD_MAX_BYTES": 100}
    r = staff.post(
        f"{url}?backend={backend.name}", data=b"\1" * 1024, content_type="application/octet-stream"
    )
    assert r.status_code == 413 and r.json()["field"] == "file"
    assert Image.objects.get(pk=vm_image.pk).status == ImageStatus.PENDING


def _named(data: bytes):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile("disk.img", data, content_type="application/octet-stream")


def test_register_records_an_active_glance_image_and_names_a_missing_one(
    staff, vm_image, make_backend, project
) -> None:
    backend = make_backend()
    url = f"/api/v1/admin/images/{vm_image.pk}/register/"
    r = staff.post(url, {"backend": backend.name, "glance_image": "no-such-image"}, format="json")
    assert r.status_code == 400
    assert r.json()["field"] == "glance_image"
    assert "no image 'no-such-image'" in r.json()["message"]
    r = staff.post(url, {"backend": backend.name, "glance_image": "wt-base"}, format="json")
    assert r.status_code == 200, r.content
    base = project.image.find_image("wt-base")
    assert r.json()["status"] == "ready"
    assert r.json()["references"] == {backend.name: base.id}
    r = staff.post(url, {"backend": "nope", "glance_image": "wt-base"}, format="json")
    assert r.status_code == 400 and r.json()["field"] == "backend"
    r = staff.post(url, {"glance_image": "wt-base"}, format="json")
    assert r.status_code == 400 and r.json()["field"] == "backend"


def test_register_answers_503_when_the_cloud_is_unreachable(
    staff, vm_image, monkeypatch, tmp_path
) -> None:
    clouds = tmp_path / "clouds.yaml"
    auth = {**_cloud()["tenant"], "auth_url": "http://127.0.0.1:9/v3"}  # nothing listens
    clouds.write_text(json.dumps({"clouds": {"down": {"auth": auth, "region_name": "RegionOne"}}}))
    Backend.objects.create(
        name="os-down",
        kind="openstack",
        settings={"cloud": "down", "clouds_yaml": str(clouds), "network": "none", "api_timeout": 2},
        cores=1,
        memory_gb=1,
    )
    real = vm.vm_image_host

    def no_waiting(b):
        host: Any = real(b)  # the driver: its sleep is the clock's, replaced
        host.sleep = lambda s: None  # no waits between retries
        return host

    monkeypatch.setattr(vm, "vm_image_host", no_waiting)
    r = staff.post(
        f"/api/v1/admin/images/{vm_image.pk}/register/",
        {"backend": "os-down", "glance_image": "wt-base"},
        format="json",
    )
    assert r.status_code == 503, r.content
    assert r.json()["code"] == "backend_unavailable"
    assert "the cloud of backend os-down did not answer" in r.json()["message"]


def test_upload_and_register_are_for_staff(api, vm_image) -> None:
    r = api.post(
        f"/api/v1/admin/images/{vm_image.pk}/register/",
        {"backend": "x", "glance_image": "y"},
        format="json",
    )
    assert r.status_code == 403
