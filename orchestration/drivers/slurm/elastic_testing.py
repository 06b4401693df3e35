"""The test cluster's elastic partition, and the boot of its nodes played on this machine.

`python -m orchestration.drivers.slurm.elastic_testing DIR SLURM_CONF ROOT PORT` (run by
scripts/start-slurm) writes the programs' config and wrappers into DIR and prints the
slurm.conf fragment, rendered by the code an admin's fragment comes from.

`BootPlayer` plays the part of the hypervisor that the loopback Nova's fake driver leaves
out: when a node's server goes ACTIVE it waits `boot_delay` seconds (the image booting),
puts the server's address on the loopback interface and starts a slurmd for the node there
(its own config copy, pid file, spool and log); when the server is deleted it stops that
slurmd. Nothing else is faked: the real slurmctld runs the real programs, which talk to
the real Nova.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from orchestration.drivers.slurm import elastic as el
from orchestration.drivers.slurm.elastic_cloud import ElasticCloud, server_address

__all__ = ["TEST_SETTINGS", "BootPlayer", "main"]

TEST_SETTINGS = {
    "partition": "elastic",
    "nodes": 3,
    "cloud": "windtunnel-tenant",
    "flavor": "wt.small",
    "image": "wt-base",
    "network": "wt-net",
    "suspend_time": 10,
    "resume_timeout": 40,
    "suspend_timeout": 10,
    "cluster_tag": "test-elastic",
}


def main(argv: list[str]) -> int:
    out, conf, root, port = argv[0], argv[1], argv[2], int(argv[3])
    settings = el.validate_elastic(
        {
            **TEST_SETTINGS,
            "clouds_yaml": (os.environ.get("WT_OPENSTACK_DIR") or f"{root}/.data/openstack")
            + "/clouds.yaml",
            "programs_dir": out,
            "python": f"{root}/.venv/bin/python",
            "pythonpath": root,
        }
    )
    config = {**el.programs_config(settings, slurm_conf=conf), "log_file": f"{out}/log/power.log"}
    Path(out, "elastic.json").write_text(el.dump_config(config))
    for action in ("resume", "suspend", "resume-fail"):
        path = Path(out, action)
        path.write_text(el.wrapper_script(settings, action))
        path.chmod(0o755)
    prolog = Path(out, "prolog")
    prolog.write_text(el.prolog_script(settings, slurm_conf=conf))
    prolog.chmod(0o755)
    Path(out, "settings.json").write_text(json.dumps(settings, indent=2) + "\n")
    fragment = el.render_fragment(settings, cpus=1, memory_mb=1024, slurmd_port=port)
    # every node's slurmd listens on its own port here (they share one machine); a cloud
    # node has the fragment's one port to itself
    lines = []
    for line in fragment.splitlines():
        if line.startswith("NodeName="):
            rng, _, rest = line[len("NodeName=") :].partition(" ")
            for i, name in enumerate(el.expand_hostlist(rng)):
                lines.append(f"NodeName={name} {rest.replace(f'Port={port}', f'Port={port + i}')}")
        else:
            lines.append(line)
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


class BootPlayer:
    """Boots the elastic nodes whose servers the loopback Nova made active (see module)."""

    def __init__(self, *, elastic_dir: str, boot_delay: float = 0.0) -> None:
        self.dir = Path(elastic_dir)
        self.config = json.loads((self.dir / "elastic.json").read_text())
        self.boot_delay = boot_delay
        self.refuse: set[str] = set()  # nodes whose boot never happens (a failed boot)
        self.booted: dict[str, str] = {}  # node -> address
        self.active_since: dict[str, float] = {}
        self.server_ids: dict[str, str] = {}  # node -> the server id last seen
        self.events: list[tuple[float, str, str]] = []  # (time, node, "active"|"booted"|…)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.cloud = ElasticCloud(self.config)

    # -- the loop ---------------------------------------------------------------------------

    def __enter__(self) -> BootPlayer:
        self._thread = threading.Thread(target=self._loop, name="elastic-boot", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=30)
        for node in list(self.booted):
            self.power_off(node)

    def _loop(self) -> None:
        while not self._stop.wait(0.3):
            try:
                servers = self.cloud.node_servers()
            except Exception:  # noqa: BLE001 — a slow cloud call: try again
                continue
            now = time.monotonic()
            for node, server in servers.items():
                if self.server_ids.get(node, server.id) != server.id:
                    # suspended and resumed between two looks: a new VM, a new address
                    self.power_off(node)
                    self.active_since.pop(node, None)
                    self.events.append((time.time(), node, "deleted"))
                self.server_ids[node] = server.id
                address = server_address(server)
                if str(server.status).upper() != "ACTIVE" or not address:
                    continue
                if node not in self.active_since:
                    self.active_since[node] = now
                    self.events.append((time.time(), node, "active"))
                if (
                    node not in self.booted
                    and node not in self.refuse
                    and now - self.active_since[node] >= self.boot_delay
                ):
                    self.boot(node, address)
            for node in list(self.booted):
                if node not in servers:
                    self.power_off(node)
                    self.events.append((time.time(), node, "deleted"))
            for node in list(self.active_since):
                if node not in servers:
                    del self.active_since[node]
            for node in list(self.server_ids):
                if node not in servers:
                    del self.server_ids[node]

    # -- one node ---------------------------------------------------------------------------

    def _node_conf(self, node: str, address: str) -> Path:
        """The node's slurm.conf: the cluster's, with its own slurmd files and address."""
        text = (self.dir / "slurm.conf").read_text()
        run = self.dir / "run"
        spool = self.dir / "spool" / node
        spool.mkdir(parents=True, exist_ok=True)
        own = {
            "SlurmdPidFile": f"{run}/{node}.pid",
            "SlurmdSpoolDir": str(spool),
            "SlurmdLogFile": f"{self.dir}/log/{node}.log",
        }
        # this machine's host name is the first node's: slurmd binds to any address (on its
        # own port) instead of the one NoInAddrAny would pick
        own["CommunicationParameters"] = "NoCtldInAddrAny"
        own["DebugFlags"] = "NO_CONF_HASH"
        lines = [f"{key}={value}" for key, value in own.items()]
        for line in text.splitlines():
            key = line.split("=", 1)[0]
            if key in own:
                continue
            if line.startswith(f"NodeName={node} "):
                line = line.replace(f"NodeName={node} ", f"NodeName={node} NodeAddr={address} ")
            lines.append(line)
        path = run / f"{node}.conf"
        path.write_text("\n".join(lines) + "\n")
        return path

    def boot(self, node: str, address: str) -> None:
        """The node's VM comes up: its address answers, its slurmd starts and registers."""
        subprocess.run(["ip", "addr", "add", f"{address}/32", "dev", "lo"], check=False)
        conf = self._node_conf(node, address)
        subprocess.run(["/usr/sbin/slurmd", "-b", "-f", str(conf), "-N", node], check=True)
        self.booted[node] = address
        self.events.append((time.time(), node, "booted"))

    def power_off(self, node: str) -> None:
        """The node's VM is gone: its slurmd stops, its address no longer answers."""
        address = self.booted.pop(node, "")
        pid_file = self.dir / "run" / f"{node}.pid"
        with contextlib.suppress(OSError, ValueError):
            pid = int(pid_file.read_text().strip())
            os.kill(pid, signal.SIGKILL)
            for _ in range(100):
                os.kill(pid, 0)
                time.sleep(0.05)
        with contextlib.suppress(OSError):
            pid_file.unlink()
        if address:
            subprocess.run(
                ["ip", "addr", "del", f"{address}/32", "dev", "lo"],
                check=False,
                capture_output=True,
            )

    def lose(self, node: str) -> None:
        """The node hangs (its VM stops): slurmd and the node's jobs (their slurmstepd and
        everything under it) die at once; the server stays, no more heartbeats."""
        import psutil

        self.refuse.add(node)
        env = {**os.environ, "SLURM_CONF": self.config["slurm_conf"]}
        out = subprocess.run(
            ["squeue", "-h", "-w", node, "-o", "%A"], env=env, capture_output=True, text=True
        ).stdout.split()
        marks = [f"[{job}." for job in out]
        for proc in psutil.process_iter(["name", "cmdline"]):
            cmd = " ".join(proc.info["cmdline"] or [])
            if proc.info["name"] == "slurmstepd" and any(m in cmd for m in marks):
                with contextlib.suppress(psutil.Error):
                    for child in [*proc.children(recursive=True), proc]:
                        child.kill()
        self.power_off(node)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
