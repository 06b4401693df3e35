"""A real VM boots and runs its user data: the cloud image of scripts/build-cloud-image (built
once, then reused from its cache) under QEMU in software emulation, cloud-init reading a
NoCloud seed. The guest fetches a token from an HTTP server of this test through its one
forwarded address and posts it back, and cannot reach the host's other loopback ports.

One boot: about a CPU-minute (plus ~2.5 min for the image when it is not cached yet)."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from orchestration.agent.procs import alive
from orchestration.vm import GUEST_HOST_ADDRESS, VmError, boot

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "scripts/build-cloud-image"
TOOLS = ("qemu-system-x86_64", "qemu-img", "cloud-localds", "mmdebstrap", "mkfs.ext4", "socat")
BUILD_TIMEOUT = 1200
BOOT_TIMEOUT = 600


class Recorder:
    """A loopback HTTP server: GET /token answers the token, POST /report keeps the body; every
    request is recorded."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.requests: list[tuple[str, str]] = []
        self.reports: list[str] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                recorder.requests.append(("GET", self.path))
                if self.path == "/token":
                    self._answer(200, recorder.token.encode())
                else:
                    self._answer(404, b"")

            def do_POST(self) -> None:
                recorder.requests.append(("POST", self.path))
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode(errors="replace")
                if self.path == "/report":
                    recorder.reports.append(body)
                self._answer(204 if self.path == "/report" else 404, b"")

            def log_message(self, *_: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def base_image() -> Path:
    missing = [t for t in TOOLS if not shutil.which(t)]
    if missing and (os.geteuid() != 0 or not shutil.which("apt-get")):
        pytest.skip(
            f"QEMU / mmdebstrap not installed ({', '.join(missing)}), and this is not root on a "
            "Debian host where scripts/build-cloud-image could install them"
        )
    started = time.monotonic()
    result = subprocess.run(  # at low priority: the suite's other tests run beside it
        ["nice", "-n", "19", str(BUILD)],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        check=False,
    )
    took = time.monotonic() - started
    if result.returncode != 0:
        pytest.fail(
            f"scripts/build-cloud-image failed ({result.returncode}):\n{result.stderr[-3000:]}"
        )
    folder = Path(result.stdout.strip().splitlines()[-1])
    print(f"\n[real-vm] image {folder} ready in {took:.1f} s (reused when cached)")
    for line in result.stderr.splitlines():
        print(f"[real-vm]   {line}")
    still_missing = [t for t in TOOLS if not shutil.which(t)]
    if still_missing:
        pytest.skip(f"not installed after scripts/build-cloud-image: {', '.join(still_missing)}")
    return folder


@pytest.fixture
def servers() -> Iterator[tuple[Recorder, Recorder]]:
    """The forwarded service and another loopback service the guest must not reach."""
    forwarded, other = Recorder(secrets.token_hex(16)), Recorder("not-for-the-guest")
    yield forwarded, other
    forwarded.close()
    other.close()


def user_data(other_port: int) -> str:
    service = f"http://{GUEST_HOST_ADDRESS}"
    # 10.0.2.2 is QEMU's alias of the host's loopback: restrict=on must keep it closed, and so
    # must every port of GUEST_HOST_ADDRESS that is not forwarded
    direct = [
        f"http://10.0.2.2:{other_port}/token",
        f"http://{GUEST_HOST_ADDRESS}:{other_port}/token",
    ]
    probes = "\n".join(
        f"""    if curl -s -m 5 -o /dev/null {url}; then echo "WT-DIRECT reached {url}"; \
else echo "WT-DIRECT blocked {url}"; fi > /dev/ttyS0"""
        for url in direct
    )
    return f"""#cloud-config
runcmd:
  - |
    echo "WT-USERDATA-START uptime=$(cut -d' ' -f1 /proc/uptime)" > /dev/ttyS0
    token=$(curl -sS -m 10 {service}/token) || token=FAIL
    echo "WT-TOKEN $token" > /dev/ttyS0
    if curl -sS -m 10 --data-binary "$token" {service}/report; then posted=ok; else posted=FAIL; fi
    echo "WT-POSTED $posted" > /dev/ttyS0
{probes}
    echo "WT-ROOT $(df -m / | tail -1 | tr -s ' ' | cut -d' ' -f2,3)" > /dev/ttyS0
    echo "WT-USERDATA-DONE uptime=$(cut -d' ' -f1 /proc/uptime)" > /dev/ttyS0
"""


def qemu_processes_under(folder: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if "qemu-system" in cmdline and str(folder) in cmdline and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def test_vm_boots_fetches_a_token_through_its_forward_and_reaches_nothing_else(
    base_image: Path, servers: tuple[Recorder, Recorder], tmp_path: Path
) -> None:
    forwarded, other = servers
    work = tmp_path / "vm"
    vm = boot(
        base_image,
        user_data=user_data(other.port),
        work_dir=work,
        forward={80: forwarded.port},
        cpus=1,
        memory_mb=1024,
        timeout=BOOT_TIMEOUT + 60,
        niceness=19,  # the emulation yields the CPU to the suite's tests that run beside it
    )
    qemu_pid = None
    try:
        done = vm.wait_for("WT-USERDATA-DONE", timeout=BOOT_TIMEOUT)
        boot_seconds = time.monotonic() - vm.started
        qemu_pid = vm.qemu_pid
        console = vm.console()
        print(f"[real-vm] QEMU start to the user data's last line: {boot_seconds:.1f} s ({done})")
        print("\n".join(f"[real-vm]   {line}" for line in console.splitlines() if "WT-" in line))

        assert f"WT-TOKEN {forwarded.token}" in console, vm.console_tail()
        assert forwarded.reports == [forwarded.token], (forwarded.requests, vm.console_tail())
        assert "WT-POSTED ok" in console
        assert "WT-DIRECT blocked" in console and "WT-DIRECT reached" not in console, (
            vm.console_tail()
        )
        assert other.requests == []
    finally:
        vm.stop()

    assert qemu_pid is not None and not alive(qemu_pid)
    assert qemu_processes_under(work) == []
    assert not vm.files.overlay.exists() and not vm.files.seed.exists()


@pytest.mark.parametrize(
    ("forward", "name"),
    [({80: 0}, None), ({70000: 8080}, None), ({80: 8080}, "no spaces"), ({80: 8080}, "-x")],
)
def test_boot_refuses_bad_ports_and_names_before_starting_anything(
    tmp_path: Path, forward: dict[int, int], name: str | None
) -> None:
    image = tmp_path / "image"
    image.mkdir()
    (image / "image.json").write_text('{"digest": "d", "packages": []}')
    for part in ("disk.qcow2", "vmlinuz", "initrd.img"):
        (image / part).write_bytes(b"")
    with pytest.raises(ValueError):
        boot(
            image, user_data="#cloud-config\n", work_dir=tmp_path / "vm", forward=forward, name=name
        )
    assert not (tmp_path / "vm" / "root.qcow2").exists()


def test_boot_refuses_a_folder_that_is_no_image(tmp_path: Path) -> None:
    with pytest.raises(VmError, match="not a built cloud image"):
        boot(tmp_path, user_data="#cloud-config\n", work_dir=tmp_path / "vm")
