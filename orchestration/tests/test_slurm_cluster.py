"""The private test cluster (scripts/start-slurm) and helpers the Slurm tests share.

Other test modules import `cluster`, `slurm_unavailable`, `slurm_settings` and
`ssh_secrets` from here; the tests below check the facts the driver relies on.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLUSTER_JSON = ROOT / ".data" / "slurm" / "cluster.json"


def cluster() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(CLUSTER_JSON.read_text())
    return data


@functools.lru_cache(maxsize=1)
def slurm_unavailable() -> str:
    """Why the test cluster cannot be used ("" when it can); scripts/start-slurm starts it."""
    if not shutil.which("sbatch"):
        return "Slurm is not installed (scripts/start-slurm installs and starts it)"
    if not CLUSTER_JSON.is_file():
        return "the test cluster was never started (run scripts/start-slurm, or make test)"
    conf = cluster()
    try:
        out = subprocess.run(
            ["sinfo", "-h", "-o", "%T"],
            env={**os.environ, "SLURM_CONF": conf["slurm_conf"]},
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"sinfo failed: {exc}"
    if out.returncode != 0:
        return f"the test cluster does not answer (scripts/start-slurm starts it): {out.stderr.strip()}"
    if not {"idle", "mixed", "allocated", "completing"} & set(out.stdout.split()):
        return f"the test cluster's node is not up: {out.stdout.strip()}"
    return ""


@functools.lru_cache(maxsize=1)
def ssh_unavailable() -> str:
    if reason := slurm_unavailable():
        return reason
    ssh = cluster()["ssh"]
    try:
        with socket.create_connection((ssh["host"], ssh["port"]), timeout=5) as conn:
            conn.settimeout(5)
            if not conn.recv(64).startswith(b"SSH-"):
                return "the loopback sshd's port does not answer SSH"
    except OSError as exc:
        return f"the loopback sshd is not running (run scripts/start-slurm): {exc}"
    return ""


needs_slurm = pytest.mark.skipif(bool(slurm_unavailable()), reason=slurm_unavailable() or "-")
needs_ssh = pytest.mark.skipif(bool(ssh_unavailable()), reason=ssh_unavailable() or "-")
pytestmark = pytest.mark.xdist_group("cluster")


def slurm_settings(**extra: Any) -> dict[str, Any]:
    """Settings of a local-transport backend on the test cluster."""
    c = cluster()
    return {
        "transport": "local",
        "slurm_conf": c["slurm_conf"],
        "partition": c["partition"],
        "python": c["python"],
        "pythonpath": c["pythonpath"],
        **extra,
    }


def ssh_settings(**extra: Any) -> dict[str, Any]:
    """Settings of an SSH-transport backend: the loopback sshd, user wtslurm, its own home."""
    c = cluster()
    return {
        "transport": "ssh",
        "host": c["ssh"]["host"],
        "port": c["ssh"]["port"],
        "user": c["ssh"]["user"],
        "slurm_conf": c["slurm_conf"],
        "partition": c["partition"],
        "python": c["ssh"]["python"],  # the cluster user's Python 3 (Debian's, with jinja2)
        "pythonpath": c["pythonpath"],  # the agent's source, readable by the cluster user
        "work_root": "windtunnel-test",
        **extra,
    }


def ssh_secrets() -> dict[str, str]:
    c = cluster()
    return {
        "private_key": Path(c["ssh"]["key_file"]).read_text(),
        "known_hosts": c["ssh"]["known_hosts"],
    }


def squeue(*args: str) -> str:
    c = cluster()
    return subprocess.run(
        ["squeue", *args],
        env={**os.environ, "SLURM_CONF": c["slurm_conf"]},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout


# -- the cluster's own facts ----------------------------------------------------------------


@needs_slurm
def test_the_test_cluster_has_an_idle_or_busy_node_on_loopback() -> None:
    c = cluster()
    conf = Path(c["slurm_conf"]).read_text()
    assert "CommunicationParameters=NoCtldInAddrAny,NoInAddrAny" in conf
    assert "JobCompType=jobcomp/filetxt" in conf
    out = subprocess.run(
        ["sinfo", "-h", "-N", "-n", c["node"], "-o", "%N %T %c"],
        env={**os.environ, "SLURM_CONF": c["slurm_conf"]},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out[0] == c["node"] and out[1] in ("idle", "mixed", "allocated", "completing")
    assert int(out[2]) == c["cpus"] >= 1


def test_start_slurm_is_idempotent_when_running() -> None:
    if slurm_unavailable():
        pytest.skip(slurm_unavailable())
    if os.geteuid() != 0:
        pytest.skip("scripts/start-slurm needs root")
    before = (ROOT / ".data/slurm/run/slurmctld.pid").read_text()
    out = subprocess.run(
        [str(ROOT / "scripts/start-slurm")], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "starting slurmctld" not in out.stdout  # nothing restarted
    assert (ROOT / ".data/slurm/run/slurmctld.pid").read_text() == before


@contextlib.contextmanager
def started_cluster() -> Iterator[None]:
    """Start the test cluster for a benchmark (a lease on this process), stop it after."""
    lease = str(os.getpid())
    subprocess.run([str(ROOT / "scripts/start-slurm"), "--lease", lease], check=True)
    slurm_unavailable.cache_clear()
    ssh_unavailable.cache_clear()
    try:
        yield
    finally:
        subprocess.run([str(ROOT / "scripts/stop-slurm"), "--lease", lease], check=False)
