"""The bake step machine (composer/bake.py) on the loopback control plane of
scripts/start-openstack, with the OpenStack driver as its VmImageHost.

The fake compute driver boots nothing: a builder goes ACTIVE and stays so. The tests drive
`bake_step` as the portal does (the record of one step is the input of the next) and check
what the cloud holds after each outcome. The whole bake, snapshot included, is driven through
the portal in backend/images/tests/test_vm.py.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from orchestration.composer.bake import BakeImage, BakeStep, bake_step, new_record
from orchestration.composer.vm_host import META_DIGEST, VmImageHost, builder_name
from orchestration.drivers.base import build_driver
from orchestration.tests.conftest import OpenStackCloud

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("cluster")]

BACKEND = "os-bake-test"
RECIPE = "#cloud-config\npower_state:\n  mode: poweroff\n"


@pytest.fixture(scope="module")
def admin(openstack_cloud: OpenStackCloud) -> Iterator[Any]:
    conn = openstack_cloud.connect("admin")
    yield conn
    conn.close()


@pytest.fixture(scope="module")
def tenant(openstack_cloud: OpenStackCloud) -> Iterator[Any]:
    conn = openstack_cloud.connect("tenant")
    yield conn
    conn.close()


def _settings(cloud: OpenStackCloud, **extra: Any) -> dict[str, Any]:
    return {
        "cloud": cloud.facts["clouds"]["tenant"],
        "clouds_yaml": cloud.facts["clouds_yaml"],
        "network": "none",
        "base_image": cloud.facts["image"]["name"],
        "bake_timeout": 60,
        "api_timeout": 10,
        **extra,
    }


@pytest.fixture
def host(openstack_cloud: OpenStackCloud) -> VmImageHost:
    driver = build_driver("openstack", _settings(openstack_cloud))
    assert isinstance(driver, VmImageHost)
    return driver


@pytest.fixture
def image(admin: Any, tenant: Any) -> Iterator[BakeImage]:
    """An image of a digest of its own (no-rebake goes by digest); its builder and Glance
    images deleted afterwards, whatever the test left."""
    digest = f"sha256:{secrets.token_hex(32)}"
    yield BakeImage(digest=digest, name="bake-test", recipe=RECIPE, backend=BACKEND)
    name = builder_name(digest=digest, backend=BACKEND)
    for server in admin.compute.servers(all_projects=True, name=f"^{name}$"):
        admin.compute.delete_server(server, ignore_missing=True)
    response = tenant.image.get("/images", params={META_DIGEST: digest})
    for item in response.json().get("images", []):
        tenant.image.delete_image(item["id"], ignore_missing=True)


def _builders(admin: Any, image: BakeImage) -> list[Any]:
    name = builder_name(digest=image.digest, backend=image.backend)
    return [
        s
        for s in admin.compute.servers(all_projects=True, name=f"^{name}$")
        if s.status not in ("DELETED", "SOFT_DELETED")
    ]


def _gone(admin: Any, server_id: str, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = admin.compute.find_server(server_id, ignore_missing=True)
        if found is None or found.status in ("DELETED", "SOFT_DELETED"):
            return True
        time.sleep(0.3)
    return False


def _drive(
    first: BakeStep,
    take: Callable[[dict[str, Any]], BakeStep],
    until: Callable[[BakeStep], bool],
    timeout: float = 60,
) -> BakeStep:
    """Take steps (sooner than their delay) from `first` until `until(step)` holds or the
    bake is over."""
    deadline = time.monotonic() + timeout
    step = first
    while step.delay is not None and not until(step):
        assert time.monotonic() < deadline, f"the bake did not get on: {step}"
        time.sleep(min(step.delay, 0.3))
        step = take(step.record)
    return step


def test_a_bake_takes_an_active_image_of_the_same_digest_and_boots_no_builder(
    openstack_cloud: OpenStackCloud, host: VmImageHost, image: BakeImage, tenant: Any, admin: Any
) -> None:
    disk = b"\0" * 64 * 1024
    uploaded = tenant.image.create_image(
        f"windtunnel-{image.name}-reused",
        data=disk,
        disk_format="raw",
        container_format="bare",
        allow_duplicates=True,
        validate_checksum=False,
        meta={META_DIGEST: image.digest},
    )
    step = bake_step(
        new_record(force=False, now=time.time()),
        settings=_settings(openstack_cloud),
        image=image,
        host=host,
    )
    assert step.error is None and step.delay is None, step.lines
    assert step.image is not None and step.image.id == uploaded.id
    assert step.image.size == len(disk) and step.progress == 1.0
    assert step.lines == [
        f"Glance already has an active image of digest {image.digest}",
        f"no rebake: Glance image {uploaded.id} ({uploaded.name}) is ready",
    ]
    assert _builders(admin, image) == []


def test_a_builder_that_goes_error_fails_the_bake_and_is_deleted(
    openstack_cloud: OpenStackCloud, host: VmImageHost, image: BakeImage, admin: Any
) -> None:
    settings = _settings(openstack_cloud)

    def take(record: dict[str, Any]) -> BakeStep:
        return bake_step(record, settings=settings, image=image, host=host)

    first = take(new_record(force=False, now=time.time()))
    assert first.delay is not None and first.record["phase"] == "boot", first.lines
    server_id = first.record["server"]
    assert [s.id for s in _builders(admin, image)] == [server_id]
    builder = admin.compute.get_server(server_id)
    assert builder.metadata == {"windtunnel_kind": "builder", "windtunnel_image": image.digest}
    assert builder.flavor["original_name"] == "wt.small"  # the smallest with 1 vCPU and 1 GB
    assert first.lines[0].startswith(f"builder {server_id} (")
    waiting = _drive(first, take, until=lambda s: s.record.get("phase") == "wait")
    assert waiting.error is None and "waiting for the recipe" in waiting.lines[-1]

    admin.compute.reset_server_state(server_id, "error")
    failed = take(waiting.record)
    assert failed.delay is None and failed.image is None
    assert failed.error is not None and failed.error.startswith("the builder went ERROR")
    assert f"builder {server_id} deleted" in failed.lines
    assert failed.lines[-1] == f"bake failed: {failed.error}"
    assert _gone(admin, server_id)


def test_a_recipe_past_bake_timeout_fails_and_the_builder_is_deleted(
    openstack_cloud: OpenStackCloud, host: VmImageHost, image: BakeImage, admin: Any
) -> None:
    """The clock is the test's: the bake's deadline passes without waiting for it."""
    settings = _settings(openstack_cloud, bake_timeout=30)
    now = [time.time()]

    def take(record: dict[str, Any]) -> BakeStep:
        return bake_step(record, settings=settings, image=image, host=host, clock=lambda: now[0])

    first = take(new_record(force=True, now=now[0]))
    server_id = first.record["server"]
    waiting = _drive(first, take, until=lambda s: s.record.get("phase") == "wait")
    now[0] += 31
    failed = take(waiting.record)
    assert failed.error is not None
    assert failed.error.startswith(
        "the recipe did not power the server off within bake_timeout (30 s; the builder is ACTIVE"
    )
    assert f"builder {server_id} deleted" in failed.lines
    assert _gone(admin, server_id)


def test_a_missing_base_image_fails_naming_the_setting_before_any_builder(
    openstack_cloud: OpenStackCloud, host: VmImageHost, image: BakeImage, admin: Any
) -> None:
    step = bake_step(
        new_record(force=False, now=time.time()),
        settings=_settings(openstack_cloud, base_image="no-such-cloud-image"),
        image=image,
        host=host,
    )
    assert step.error is not None
    assert step.error.startswith("settings.base_image: no active image 'no-such-cloud-image'")
    assert _builders(admin, image) == []


def test_bad_bake_settings_fail_the_bake_naming_the_setting(
    openstack_cloud: OpenStackCloud, host: VmImageHost, image: BakeImage
) -> None:
    step = bake_step(
        new_record(force=False, now=time.time()),
        settings=_settings(openstack_cloud, bake_timeout="soon"),
        image=image,
        host=host,
    )
    assert step.error is not None and step.error.startswith("settings.bake_timeout")
    assert step.lines == [f"bake failed: {step.error}"]
