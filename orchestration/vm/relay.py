"""A host service made reachable to real VMs, and nothing else of the host.

The loopback cloud's guests (scripts/openstack/real-compute.sh) sit on a bridge whose only
other port leads into a network namespace holding the gateway address. A relay listens
there, on the gateway address and a port, and carries each connection over a Unix socket
(path-bound: it crosses network namespaces) to one service on the host's loopback, such as
the portal's ingest. Two socat processes, started and stopped together.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

__all__ = ["GuestRelay", "RelayError"]


class RelayError(RuntimeError):
    """The relay cannot start (what is missing is named)."""


class GuestRelay:
    """`address:port` inside network namespace `netns` → 127.0.0.1:`target` on the host."""

    def __init__(self, *, netns: str, address: str, target: int, port: int | None = None) -> None:
        self.netns, self.address, self.target = netns, address, target
        self.port = port or target
        self._dir = Path(tempfile.mkdtemp(prefix="wt-relay-"))
        self._socket = self._dir / "relay.sock"
        self._procs: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        return f"http://{self.address}:{self.port}"

    def __enter__(self) -> GuestRelay:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        for tool in ("socat", "ip"):
            if shutil.which(tool) is None:
                raise RelayError(f"the guest relay needs {tool} (Debian: apt-get install {tool})")
        host_side = [
            "socat",
            f"UNIX-LISTEN:{self._socket},fork,unlink-early,mode=600",
            f"TCP:127.0.0.1:{self.target}",
        ]
        guest_side = [
            "ip", "netns", "exec", self.netns,
            "socat",
            f"TCP-LISTEN:{self.port},bind={self.address},fork,reuseaddr",
            f"UNIX-CONNECT:{self._socket}",
        ]  # fmt: skip
        for argv in (host_side, guest_side):
            self._procs.append(
                subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, process_group=0
                )
            )
        deadline = time.monotonic() + 10
        while not self._listening():
            if any(proc.poll() is not None for proc in self._procs) or time.monotonic() > deadline:
                self.stop()
                raise RelayError(
                    f"the guest relay on {self.address}:{self.port} in namespace {self.netns} "
                    "did not start (is the real compute's network up? scripts/start-openstack)"
                )
            time.sleep(0.05)

    def _listening(self) -> bool:
        done = subprocess.run(
            ["ip", "netns", "exec", self.netns, "ss", "-Hltn", f"src {self.address}:{self.port}"],
            capture_output=True,
            text=True,
            check=False,
        )
        return self._socket.exists() and bool(done.stdout.strip())

    def stop(self) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, 15)
                except ProcessLookupError:
                    pass
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, 9)
                    proc.wait()
        self._procs.clear()
        shutil.rmtree(self._dir, ignore_errors=True)
