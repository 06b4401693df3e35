"""The loopback cloud boots real servers: on the libvirt compute host (zone wt-real, QEMU's
emulation), from the base cloud image in Glance (kernel, ramdisk, disk), a server goes
ACTIVE, cloud-init runs its user data from the config drive, and the guest reaches the one
host service relayed to it and nothing else of the host; deleted, it leaves no VM behind. A
server that names no zone stays on the fake compute host."""

from __future__ import annotations

import base64
import http.server
import os
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from orchestration.tests.conftest import OpenStackCloud
from orchestration.vm.relay import GuestRelay

pytestmark = [
    pytest.mark.slow,
    pytest.mark.xdist_group("cluster"),
    # libvirt's system connection and network namespaces need root
    pytest.mark.skipif(os.geteuid() != 0, reason="real VMs need root (libvirt, ip netns)"),
]


def _real(openstack_cloud: OpenStackCloud) -> dict[str, Any]:
    real = openstack_cloud.facts.get("real")
    if not real:
        pytest.skip(
            "the loopback cloud has no real compute host (scripts/start-openstack starts it "
            "unless WT_NO_REAL_VMS=1; its log says why it did not)"
        )
    return real


class _Heard(http.server.BaseHTTPRequestHandler):
    heard: list[str]

    def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
        self.heard.append(self.path)
        body = b"hello guest\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def host_service() -> Iterator[tuple[int, list[str]]]:
    """A host service on loopback: its port and the paths it was asked for."""
    heard: list[str] = []

    class Handler(_Heard):
        pass

    Handler.heard = heard
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], heard
    server.shutdown()
    server.server_close()


def _user_data(relay_url: str, other_port: int) -> str:
    """The guest asks the relayed service, then tries another host port it must not reach."""
    script = f"""#!/bin/sh
echo WT-USERDATA-START > /dev/ttyS0
if curl -s -m 5 http://10.77.1.1:{other_port}/ >/dev/null 2>&1; then other=reached; else other=blocked; fi
curl -s -m 30 --retry 5 --retry-all-errors "{relay_url}/hello?from=$(hostname)&other=$other"
echo WT-USERDATA-DONE > /dev/ttyS0
"""
    return base64.b64encode(script.encode()).decode()


def _domains() -> set[str]:
    done = subprocess.run(
        ["virsh", "-c", "qemu:///system", "list", "--all", "--name"],
        capture_output=True,
        text=True,
        check=True,
    )
    return {line for line in done.stdout.split() if line.startswith("instance-")}


def test_a_server_in_the_real_zone_boots_runs_its_user_data_and_reaches_only_its_relay(
    openstack_cloud: OpenStackCloud, host_service: tuple[int, list[str]]
) -> None:
    real = _real(openstack_cloud)
    port, heard = host_service
    tenant = openstack_cloud.connect("tenant")
    before = _domains()
    name = f"wt-real-{uuid.uuid4().hex[:8]}"
    with GuestRelay(netns=real["netns"], address=real["gateway"], target=port) as relay:
        created = time.monotonic()
        server = tenant.compute.create_server(
            name=name,
            flavor_id=real["flavor"]["id"],
            image_id=real["image"]["id"],
            networks=[{"uuid": real["network"]["id"]}],
            availability_zone=real["zone"],
            user_data=_user_data(relay.url, port + 1),
        )
        try:
            server = tenant.compute.wait_for_server(server, status="ACTIVE", wait=180)
            active_s = time.monotonic() - created
            admin = openstack_cloud.connect("admin")
            assert admin.compute.get_server(server.id).compute_host == real["host"]
            assert len(_domains() - before) == 1  # a real VM, not the fake driver's record
            deadline = time.monotonic() + 420
            while not heard and time.monotonic() < deadline:
                time.sleep(1)
            console = tenant.compute.get_server_console_output(server)["output"]
            assert heard, f"the guest never called home; its console's tail:\n{console[-3000:]}"
            assert heard[0].startswith(f"/hello?from={name}")
            assert heard[0].endswith("other=blocked")  # the host's other ports are out of reach
            assert "WT-USERDATA-START" in console
            print(
                f"ACTIVE in {active_s:.1f} s, user data ran {time.monotonic() - created:.0f} s after create"
            )
        finally:
            tenant.compute.delete_server(server, ignore_missing=True)
            tenant.compute.wait_for_delete(server, wait=120)
    deadline = time.monotonic() + 60
    while _domains() - before and time.monotonic() < deadline:
        time.sleep(1)
    assert not _domains() - before, "the deleted server's VM is still defined in libvirt"


def test_a_server_naming_no_zone_stays_on_the_fake_host(openstack_cloud: OpenStackCloud) -> None:
    _real(openstack_cloud)
    tenant = openstack_cloud.connect("tenant")
    facts = openstack_cloud.facts
    before = _domains()
    server = tenant.compute.create_server(
        name=f"wt-fake-{uuid.uuid4().hex[:8]}",
        flavor_id=facts["flavors"][0]["id"],
        image_id=facts["image"]["id"],
        networks="none",
    )
    try:
        server = tenant.compute.wait_for_server(server, status="ACTIVE", wait=120)
        admin = openstack_cloud.connect("admin")
        assert admin.compute.get_server(server.id).compute_host == facts["compute_host"]
        assert _domains() == before
    finally:
        tenant.compute.delete_server(server, ignore_missing=True)
        tenant.compute.wait_for_delete(server, wait=120)


def test_a_server_whose_image_never_boots_shows_why_on_its_console(
    openstack_cloud: OpenStackCloud,
) -> None:
    """The console's tail the driver reads for an admin (a pool worker that never registers
    is a failed boot that quotes it): a disk without the root filesystem the kernel looks for
    stops the boot in the initramfs, and its complaint is on the console."""
    from orchestration.drivers.openstack import OpenStackDriver

    real = _real(openstack_cloud)
    admin = openstack_cloud.connect("admin")
    base = admin.image.get_image(real["image"]["id"]).to_dict()
    properties = {**base.get("properties", {}), **base}
    name = f"wt-noboot-{uuid.uuid4().hex[:8]}"
    broken = admin.image.create_image(
        name,
        data=b"\0" * 1024 * 1024,  # no filesystem labelled wtroot on it
        disk_format="raw",
        container_format="bare",
        visibility="public",
        kernel_id=properties["kernel_id"],
        ramdisk_id=properties["ramdisk_id"],
        os_command_line=properties["os_command_line"],
    )
    tenant = openstack_cloud.connect("tenant")
    driver = OpenStackDriver(
        cloud="windtunnel-tenant", clouds_yaml=openstack_cloud.facts["clouds_yaml"]
    )
    server = tenant.compute.create_server(
        name=name,
        flavor_id=real["flavor"]["id"],
        image_id=broken.id,
        networks="none",
        availability_zone=real["zone"],
    )
    try:
        tenant.compute.wait_for_server(server, status="ACTIVE", wait=180)
        deadline, tail = time.monotonic() + 300, ""
        while time.monotonic() < deadline and "does not exist" not in tail:
            time.sleep(3)
            tail = driver.console_tail(server.id, lines=40)
        assert "ALERT!  LABEL=wtroot does not exist.  Dropping to a shell!" in tail, tail
    finally:
        tenant.compute.delete_server(server, ignore_missing=True)
        tenant.compute.wait_for_delete(server, wait=120)
        admin.image.delete_image(broken, ignore_missing=True)
