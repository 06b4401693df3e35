"""The pilot on its own against a stand-in portal (stdlib HTTP on loopback): when the portal
stops answering, the pilot keeps trying for its grace period, then exits (docs/pools.md,
*Faults*). The real pilot process, real HTTP; the portal's side is tested in
backend/e2e/test_pools.py."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class Portal(BaseHTTPRequestHandler):
    calls: list[str] = []

    def do_POST(self) -> None:  # noqa: N802 — http.server's name
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        what = self.path.rstrip("/").rsplit("/", 1)[-1]
        Portal.calls.append(what)
        body: dict[str, object] = {}
        if what == "register":
            body = {"heartbeat_interval": 0.2, "poll_interval": 0.2}
        elif what == "lease":
            body = {"runs": []}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def test_a_pilot_that_cannot_reach_the_portal_exits_after_its_grace_period(tmp_path: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Portal)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    grace = 3.0
    config = {
        "portal_url": f"http://127.0.0.1:{server.server_address[1]}",
        "worker_id": "00000000-0000-4000-8000-000000000001",
        "token": "t",
        "cores": 1,
        "work_root": str(tmp_path),
        "grace": grace,
    }
    (tmp_path / "pilot.json").write_text(json.dumps(config))
    pilot = subprocess.Popen(
        [sys.executable, "-m", "orchestration.agent.pilot", str(tmp_path / "pilot.json")],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        while Portal.calls.count("heartbeat") < 2:  # registered and beating
            assert pilot.poll() is None, pilot.communicate()[0]
            time.sleep(0.1)
        server.shutdown()
        server.server_close()  # the portal is gone: connections refused from now on
        gone = time.monotonic()
        out, _ = pilot.communicate(timeout=120)
        waited = time.monotonic() - gone
    finally:
        if pilot.poll() is None:
            pilot.kill()
    assert pilot.returncode == 3, out
    assert "portal unreachable past the grace period" in out
    assert waited >= grace - 0.5, f"exited {waited:.1f} s after the portal went: before its grace"
