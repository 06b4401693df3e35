"""The pilot says what its worker's cache holds (docs/pools.md, *Placement*): the real pilot
process against a stand-in portal (stdlib HTTP on loopback). Its register and heartbeats
carry the boot image's digests from pilot.json, then also the digests a lease answer names
(the images of runs it ran), which it keeps in cache.json, so a restarted pilot still
reports them. The portal's side (storing and validating them) is tested in
backend/dispatch/tests/test_placement.py."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


BOOT = [digest("boot-image"), digest("boot-layer-1")]
RAN = digest("an image a run used")


class Portal(BaseHTTPRequestHandler):
    bodies: list[tuple[str, dict[str, Any]]] = []

    def do_POST(self) -> None:  # noqa: N802 — http.server's name
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        what = self.path.rstrip("/").rsplit("/", 1)[-1]
        Portal.bodies.append((what, body))
        answer: dict[str, object] = {"stop": False}
        if what == "register":
            answer = {"stop": False, "heartbeat_interval": 0.2, "poll_interval": 0.2}
        elif what == "lease":
            answer = {"stop": False, "runs": [], "cache": [RAN]}
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def _pilot(config_path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "orchestration.agent.pilot", str(config_path)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _until(pilot: subprocess.Popen[str], ok: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        assert pilot.poll() is None, pilot.communicate()[0]
        assert time.monotonic() < deadline, Portal.bodies[-5:]
        time.sleep(0.1)


def test_the_pilot_reports_its_boot_image_and_the_images_its_runs_used(tmp_path: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Portal)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    config = {
        "portal_url": f"http://127.0.0.1:{server.server_address[1]}",
        "worker_id": "00000000-0000-4000-8000-000000000002",
        "token": "t",
        "cores": 1,
        "work_root": str(tmp_path),
        "grace": 30,
        "cache": BOOT,
    }
    (tmp_path / "pilot.json").write_text(json.dumps(config))
    try:
        pilot = _pilot(tmp_path / "pilot.json")
        _until(pilot, lambda: any(w == "register" for w, _ in Portal.bodies))
        register = next(b for w, b in Portal.bodies if w == "register")
        assert register["cache"] == BOOT  # what the worker booted from

        def beat_with_ran() -> bool:
            return any(w == "heartbeat" and RAN in b.get("cache", []) for w, b in Portal.bodies)

        _until(pilot, beat_with_ran)  # a lease named RAN: the next heartbeats report it
        beat = next(b for w, b in Portal.bodies if w == "heartbeat" and RAN in b["cache"])
        assert beat["cache"] == [*BOOT, RAN]
        assert json.loads((tmp_path / "cache.json").read_text()) == {"digests": [RAN]}
        pilot.terminate()
        pilot.communicate(timeout=30)

        # a pilot started again on the same worker reports what its record holds at once
        Portal.bodies.clear()
        pilot = _pilot(tmp_path / "pilot.json")
        _until(pilot, lambda: any(w == "register" for w, _ in Portal.bodies))
        register = next(b for w, b in Portal.bodies if w == "register")
        assert register["cache"] == [*BOOT, RAN]
    finally:
        if pilot.poll() is None:
            pilot.kill()
        server.shutdown()
        server.server_close()
