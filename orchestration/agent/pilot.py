"""The pilot: a warm pool worker's loop (docs/pools.md).

`python -m orchestration.agent.pilot pilot.json` registers the worker with the portal, then
leases runs (as many as fit its free cores), runs each exactly as a run's own server would
(`python -m orchestration.agent run.json`, the run's attempt and token in run.json), tells the
portal when one ends (release) and asks for the next. Its heartbeat says which attempts it
holds; the answer names attempts it must stop (cancelled, requeued elsewhere) and whether to
stop altogether (drained, lost). Every call carries the worker's bearer token; a 409 means
the portal no longer counts this worker: it stops its runs and exits. When the portal cannot
be reached for `grace` seconds it does the same (the portal has requeued its runs by then).

Its register and heartbeat say what the worker's local cache holds (placement sends runs of
an image to a worker that holds it): the digests of its boot image and layers (`cache` in
pilot.json) and those of the images of runs it has run, which a lease answer names and the
pilot keeps in a small record (`cache.json` beside the runs, the newest CACHE_MAX).

Stdlib only, no Django. The messages are `$defs` Pilot* of the agent messages' JSON Schema
(backend/ingest/schemas/agent-messages.json).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Pilot", "PilotGone", "main"]

STOP_GRACE = 10.0  # s between SIGTERM and SIGKILL of a run's agent
CACHE_MAX = 256  # digests reported at most (the portal's bound)


class PilotGone(Exception):
    """409: the portal no longer counts this worker (lost, drained, deleted)."""


class Unreachable(Exception):
    """The portal did not answer (network, 5xx): try again, within the grace period."""


@dataclass
class Lease:
    run_id: str
    attempt: int
    cores: int
    proc: subprocess.Popen[bytes]
    stopping_since: float | None = None


@dataclass
class Pilot:
    config: dict[str, Any]
    leases: dict[str, Lease] = field(default_factory=dict)
    last_ok: float = field(default_factory=time.monotonic)

    # -- the portal ----------------------------------------------------------------------

    def call(self, what: str, body: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.config['portal_url'].rstrip('/')}/api/v1/ingest/workers/{self.config['worker_id']}/{what}/"
        request = urllib.request.Request(
            url,
            data=json.dumps(body).encode(),
            method="POST",
            headers={
                "Content-Type": "application/json",
                "Authorization": f"Bearer {self.config['token']}",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=15) as response:
                answer: dict[str, Any] = json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            if exc.code == 409:
                raise PilotGone(exc.read().decode(errors="replace")[:500]) from None
            if exc.code >= 500 or exc.code == 429:
                raise Unreachable(f"{what}: HTTP {exc.code}") from None
            detail = exc.read()[:500]
            raise SystemExit(f"pilot: {what} refused: HTTP {exc.code} {detail!r}") from None
        except (OSError, ValueError) as exc:
            raise Unreachable(f"{what}: {exc}") from None
        self.last_ok = time.monotonic()
        return answer

    def unreachable_too_long(self) -> bool:
        return time.monotonic() - self.last_ok > float(self.config.get("grace", 120.0))

    # -- the cache -------------------------------------------------------------------------

    def cache_record(self) -> Path:
        return Path(self.config["work_root"]) / "cache.json"

    def cache_held(self) -> list[str]:
        """Digests the worker's cache holds: the boot image's, then those of runs it ran
        (newest last), at most CACHE_MAX (the boot image's kept)."""
        boot = [str(d) for d in self.config.get("cache") or []]
        try:
            ran = json.loads(self.cache_record().read_text()).get("digests", [])
        except (OSError, ValueError, AttributeError):
            ran = []
        held = list(dict.fromkeys([*boot, *(str(d) for d in ran)]))
        return held[: len(boot)] + held[len(boot) :][-max(0, CACHE_MAX - len(boot)) :]

    def cache_add(self, digests: list[str]) -> None:
        """Record digests of images of runs this worker ran (a lease answer's `cache`)."""
        if not digests:
            return
        try:
            ran = json.loads(self.cache_record().read_text()).get("digests", [])
        except (OSError, ValueError, AttributeError):
            ran = []
        ran = [d for d in ran if d not in digests] + list(dict.fromkeys(digests))
        path = self.cache_record()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"digests": ran[-CACHE_MAX:]}))
        tmp.replace(path)

    # -- runs ----------------------------------------------------------------------------

    def free_cores(self) -> int:
        return int(self.config["cores"]) - sum(x.cores for x in self.leases.values())

    def start(self, spec: dict[str, Any]) -> None:
        """Run a leased attempt as a run's own server does: run.json, then the agent."""
        root = self.config["work_root"]
        work = f"{root}/{spec['run_id']}/attempt-{spec['attempt']}"
        spec = {
            **spec,
            "work_dir": work,
            "case_dir": f"{work}/source",
            "fetch_case": True,
            "final_timeout": 600,
        }
        Path(work).mkdir(parents=True, exist_ok=True, mode=0o700)
        path = Path(work) / "run.json"
        path.write_text(json.dumps(spec))
        path.chmod(0o600)
        log = (Path(work) / "agent.log").open("ab")
        proc = subprocess.Popen(
            [sys.executable, "-m", "orchestration.agent", str(path)],
            cwd=work,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        cores = int(spec.get("processes") or 1)
        self.leases[spec["run_id"]] = Lease(spec["run_id"], int(spec["attempt"]), cores, proc)
        print(f"pilot: run {spec['run_id']} attempt {spec['attempt']} started", flush=True)

    def stop(self, lease: Lease) -> None:
        """SIGTERM to the run's agent (it reports `cancelled` if it still may), SIGKILL later."""
        if lease.stopping_since is None:
            lease.stopping_since = time.monotonic()
            _signal(lease.proc, signal.SIGTERM)
        elif time.monotonic() - lease.stopping_since > STOP_GRACE:
            _signal(lease.proc, signal.SIGKILL)

    def stop_all(self) -> None:
        for lease in self.leases.values():
            self.stop(lease)
        deadline = time.monotonic() + STOP_GRACE
        while any(x.proc.poll() is None for x in self.leases.values()):
            if time.monotonic() > deadline:
                for lease in self.leases.values():
                    _signal(lease.proc, signal.SIGKILL)
                break
            time.sleep(0.2)

    def ended(self) -> list[Lease]:
        done = [x for x in self.leases.values() if x.proc.poll() is not None]
        for lease in done:
            del self.leases[lease.run_id]
        return done

    # -- the loop ------------------------------------------------------------------------

    def run(self) -> int:
        answer = self._retrying(
            "register", {"cores": int(self.config["cores"]), "cache": self.cache_held()}
        )
        if answer is None:
            return 3
        heartbeat_every = float(answer.get("heartbeat_interval", 5.0))
        poll_every = float(answer.get("poll_interval", 1.0))
        released: list[dict[str, Any]] = []
        next_beat = next_poll = 0.0
        while True:
            now = time.monotonic()
            for lease in self.ended():
                code = lease.proc.returncode
                released.append(
                    {"run_id": lease.run_id, "attempt": lease.attempt, "exit_code": code}
                )
            try:
                while released:
                    self.call("release", released[0])
                    released.pop(0)
                if now >= next_beat:
                    next_beat = now + heartbeat_every
                    beat = self.call(
                        "heartbeat",
                        {
                            "runs": [
                                {"run_id": x.run_id, "attempt": x.attempt}
                                for x in self.leases.values()
                            ],
                            "cache": self.cache_held(),
                        },
                    )
                    stop = {(x["run_id"], x["attempt"]) for x in beat.get("cancel", [])}
                    for lease in self.leases.values():
                        if (lease.run_id, lease.attempt) in stop:
                            self.stop(lease)
                    if beat.get("stop") and not self.leases:
                        print("pilot: the portal stopped this worker", flush=True)
                        return 0
                if now >= next_poll and self.free_cores() > 0:
                    next_poll = now + poll_every
                    lease_answer = self.call("lease", {"free_cores": self.free_cores()})
                    self.cache_add(list(lease_answer.get("cache") or []))
                    for spec in lease_answer.get("runs", []):
                        self.start(spec)
                    if lease_answer.get("runs"):
                        next_poll = now  # more may be waiting
            except PilotGone as exc:
                print(f"pilot: the portal no longer counts this worker: {exc}", flush=True)
                self.stop_all()
                return 0
            except Unreachable as exc:
                if self.unreachable_too_long():
                    print(f"pilot: portal unreachable past the grace period: {exc}", flush=True)
                    self.stop_all()
                    return 3
            for lease in self.leases.values():
                if lease.stopping_since is not None:
                    self.stop(lease)
            time.sleep(0.2)

    def _retrying(self, what: str, body: dict[str, Any]) -> dict[str, Any] | None:
        while True:
            try:
                return self.call(what, body)
            except PilotGone as exc:
                print(f"pilot: {what} refused: {exc}", flush=True)
                return None
            except Unreachable as exc:
                if self.unreachable_too_long():
                    print(f"pilot: portal unreachable past the grace period: {exc}", flush=True)
                    return None
                time.sleep(1.0)


def _signal(proc: subprocess.Popen[bytes], sig: int) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m orchestration.agent.pilot pilot.json", file=sys.stderr)
        return 2
    config = json.loads(Path(args[0]).read_text())
    pilot = Pilot(config=config)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        return pilot.run()
    except KeyboardInterrupt:
        pilot.stop_all()
        return 0


if __name__ == "__main__":
    sys.exit(main())
