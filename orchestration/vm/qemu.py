"""Boot a cloud image (scripts/build-cloud-image) under QEMU with a NoCloud seed.

`boot()` makes a copy-on-write overlay of the image's disk (the image is never written), a
NoCloud seed holding the user data (`cloud-localds`), and starts `qemu-system-x86_64 -accel tcg`
(software emulation: no KVM needed) with the serial console written to a file. The guest's only
network is QEMU's user networking with `restrict=on`: it reaches nothing but the host loopback
ports given in `forward`, each at GUEST_HOST_ADDRESS:<guest port> (relayed by a `socat` per
connection: the host's service may start after the VM). The returned `Vm` waits for a line in
the console, shows the console's tail and stops the VM (kill, then its files removed).

QEMU runs under `timeout` in a process group of its own: it dies after `timeout` seconds even
when whoever booted it does not live to stop it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

from orchestration.agent.procs import alive

__all__ = ["GUEST_HOST_ADDRESS", "BaseImage", "Vm", "VmError", "VmFiles", "boot"]

# the address inside the guest's network at which the forwarded host ports answer
GUEST_HOST_ADDRESS = "10.0.2.100"
QEMU = "qemu-system-x86_64"
_POLL = 0.2


class VmError(Exception):
    """The VM could not be started, or did not show what was awaited (the console's tail is in
    the message)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class BaseImage:
    """A folder made by scripts/build-cloud-image: disk, kernel, initrd and their record."""

    folder: Path
    disk: Path
    kernel: Path
    initrd: Path
    cmdline: str
    digest: str
    packages: tuple[str, ...]

    @classmethod
    def load(cls, folder: Path | str) -> BaseImage:
        folder = Path(folder).resolve()
        try:
            record = json.loads((folder / "image.json").read_text())
        except (OSError, ValueError) as error:
            raise VmError(f"{folder} is not a built cloud image: {error}") from error
        image = cls(
            folder=folder,
            disk=folder / "disk.qcow2",
            kernel=folder / "vmlinuz",
            initrd=folder / "initrd.img",
            cmdline=str(record.get("kernel_cmdline") or "root=LABEL=wtroot ro console=ttyS0"),
            digest=str(record.get("digest", "")),
            packages=tuple(str(p) for p in record.get("packages", ())),
        )
        for path in (image.disk, image.kernel, image.initrd):
            if not path.is_file():
                raise VmError(f"{folder} is not a built cloud image: {path.name} is missing")
        return image


@dataclasses.dataclass(frozen=True, kw_only=True)
class VmFiles:
    """Where one VM's files are: its overlay disk, seed, console log and QEMU's pid file."""

    work_dir: Path
    overlay: Path
    seed: Path
    user_data: Path
    meta_data: Path
    console: Path
    pidfile: Path

    @classmethod
    def under(cls, work_dir: Path) -> VmFiles:
        return cls(
            work_dir=work_dir,
            overlay=work_dir / "root.qcow2",
            seed=work_dir / "seed.iso",
            user_data=work_dir / "user-data",
            meta_data=work_dir / "meta-data",
            console=work_dir / "console.log",
            pidfile=work_dir / "qemu.pid",
        )


class Vm:
    """A running VM (from `boot`). `stop()` kills it and removes its overlay and seed; a `with`
    block stops it at the end."""

    def __init__(
        self, *, name: str, files: VmFiles, process: subprocess.Popen[bytes], started: float
    ) -> None:
        self.name = name
        self.files = files
        self._process = process
        self.started = started  # time.monotonic() when QEMU was started

    def __enter__(self) -> Vm:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._process.poll() is None

    @property
    def qemu_pid(self) -> int | None:
        """QEMU's own process id (it runs under `timeout`), once QEMU has written it."""
        try:
            return int(self.files.pidfile.read_text().strip())
        except (OSError, ValueError):
            return None

    def console(self) -> str:
        try:
            raw = self.files.console.read_bytes()
        except FileNotFoundError:
            return ""
        return raw.decode("utf-8", "replace").replace("\r", "")

    def console_tail(self, lines: int = 40) -> str:
        return "\n".join(self.console().splitlines()[-lines:])

    def wait_for(self, marker: str | re.Pattern[str], *, timeout: float) -> str:
        """The first console line containing `marker` (a string, or a pattern searched for),
        waiting up to `timeout` seconds; VmError if the VM stops or the time runs out first."""
        pattern = marker if isinstance(marker, re.Pattern) else re.compile(re.escape(marker))
        deadline = time.monotonic() + timeout
        while True:
            for line in self.console().splitlines():
                if pattern.search(line):
                    return line
            if not self.running:
                raise VmError(
                    f"VM {self.name} stopped (exit {self._process.returncode}) before "
                    f"{pattern.pattern!r} in its console; its tail:\n{self.console_tail()}"
                )
            if time.monotonic() >= deadline:
                raise VmError(
                    f"no {pattern.pattern!r} in VM {self.name}'s console within {timeout:.0f} s; "
                    f"its tail:\n{self.console_tail()}"
                )
            time.sleep(_POLL)

    def stop(self, *, keep_console: bool = True) -> None:
        """Kill QEMU (and the `timeout` above it), wait for it, remove the overlay, the seed
        and the user data. The console log stays unless keep_console=False."""
        if self._process.poll() is None:
            try:
                os.killpg(self._process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._process.wait()
        qemu_pid = self.qemu_pid
        if qemu_pid is not None:
            _wait_gone(qemu_pid, timeout=10)
        removed = [
            self.files.overlay,
            self.files.seed,
            self.files.user_data,
            self.files.meta_data,
            self.files.pidfile,
        ]
        if not keep_console:
            removed.append(self.files.console)
        for path in removed:
            path.unlink(missing_ok=True)


def boot(
    image_dir: Path | str,
    *,
    user_data: str,
    work_dir: Path | str,
    forward: Mapping[int, int] | None = None,
    cpus: int = 1,
    memory_mb: int = 1024,
    disk_gb: int = 8,
    timeout: float = 900,
    name: str | None = None,
    quiet: bool = True,
    niceness: int = 0,
) -> Vm:
    """Start a VM of the image in `image_dir` running `user_data` (cloud-init) from a NoCloud
    seed. `forward` maps a guest port on GUEST_HOST_ADDRESS to a port on the host's 127.0.0.1
    (each guest connection is relayed by a `socat` of its own). The VM is killed after
    `timeout` seconds at the latest. Its files go to `work_dir` (made if missing). `quiet`:
    the kernel's own messages stay out of the console (systemd's and cloud-init's do not).
    `niceness` (0 to 19): how readily the emulation yields the CPU to the host's own work."""
    image = BaseImage.load(image_dir)
    work = Path(work_dir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    files = VmFiles.under(work)
    name = name or f"wt-vm-{uuid.uuid4().hex[:8]}"
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9-]{0,62}", name):
        raise ValueError(f"not a host name: {name!r}")
    if cpus < 1 or memory_mb < 128 or disk_gb < 1 or timeout <= 0 or not 0 <= niceness <= 19:
        raise ValueError(
            "cpus >= 1, memory_mb >= 128, disk_gb >= 1, timeout > 0 and niceness 0 to 19"
        )
    # QEMU's option syntax separates by commas: a path holding one would be read as options
    for path in (image.disk, image.kernel, image.initrd, work):
        if "," in str(path):
            raise ValueError(f"a comma in a path QEMU reads: {path}")
    guestfwd = []
    for guest_port, host_port in sorted((forward or {}).items()):
        for port in (guest_port, host_port):
            if not (isinstance(port, int) and 0 < port < 65536):
                raise ValueError(f"not a TCP port: {port!r}")
        # `cmd:` spawns the relay (no shell) for each of the guest's connections; a chardev
        # (`-tcp:127.0.0.1:PORT`) would be one connection for QEMU's whole life, made at start
        relay = f"socat STDIO TCP:127.0.0.1:{host_port}"
        guestfwd.append(f"guestfwd=tcp:{GUEST_HOST_ADDRESS}:{guest_port}-cmd:{relay}")
    qemu = shutil.which(QEMU)
    tools = (QEMU, "qemu-img", "cloud-localds", "socat", "timeout")
    missing = [t for t in tools if not shutil.which(t)]
    if missing or qemu is None:
        raise VmError(
            f"not installed: {', '.join(missing)} (scripts/build-cloud-image installs them)"
        )

    files.console.unlink(missing_ok=True)
    files.pidfile.unlink(missing_ok=True)
    files.user_data.write_text(user_data)
    files.meta_data.write_text(f"instance-id: {name}-{uuid.uuid4().hex}\nlocal-hostname: {name}\n")
    _run(["cloud-localds", str(files.seed), str(files.user_data), str(files.meta_data)])
    _run(
        [
            "qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2",
            "-b", str(image.disk), str(files.overlay), f"{disk_gb}G",
        ]
    )  # fmt: skip
    nic = ",".join(["user", "model=virtio-net-pci", "restrict=on", *guestfwd])
    argv = [
        *(["nice", "-n", str(niceness)] if niceness else []),
        "timeout", "--signal=KILL", f"{timeout:.0f}",
        qemu, "-name", name,
        "-accel", "tcg", "-cpu", "max", "-smp", str(cpus), "-m", str(memory_mb),
        "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
        "-serial", f"file:{files.console}",
        "-pidfile", str(files.pidfile),
        "-kernel", str(image.kernel), "-initrd", str(image.initrd),
        "-append", f"{image.cmdline} quiet" if quiet else image.cmdline,
        "-drive", f"file={files.overlay},if=virtio,format=qcow2,cache=unsafe",
        "-drive", f"file={files.seed},if=virtio,format=raw,readonly=on",
        "-nic", nic,
    ]  # fmt: skip
    log = (work / "qemu.log").open("wb")
    try:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stop() kills timeout and QEMU
        )
    finally:
        log.close()
    vm = Vm(name=name, files=files, process=process, started=time.monotonic())
    time.sleep(0.5)
    if not vm.running:
        output = (work / "qemu.log").read_text(errors="replace").strip()
        vm.stop()
        raise VmError(f"QEMU did not start (exit {process.returncode}): {output[-2000:]}")
    return vm


def _run(argv: list[str]) -> None:
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise VmError(f"{argv[0]} failed (exit {result.returncode}): {result.stderr.strip()}")


def _wait_gone(pid: int, *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
