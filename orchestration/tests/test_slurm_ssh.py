"""The SSH transport against the loopback sshd of scripts/start-slurm (user wtslurm, whose
home is not the portal's tree): host keys, keys, pooling under sshd's default limits,
quoting, and a real cavity run staged over SFTP."""

from __future__ import annotations

import io
import json
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import paramiko
import pytest

from orchestration.drivers.base import RunPhase, build_driver
from orchestration.drivers.slurm import SlurmDriver
from orchestration.tests.conftest import FakePortal, make_spec, needs_openfoam, serial_steps
from orchestration.tests.test_slurm_cluster import (
    cluster,
    needs_ssh,
    squeue,
    ssh_secrets,
    ssh_settings,
)
from orchestration.transports.base import TransportError
from orchestration.transports.ssh import SSHTransport, close_all_pools

pytestmark = [needs_ssh, pytest.mark.xdist_group("cluster")]


@pytest.fixture(autouse=True)
def _fresh_pools():
    close_all_pools()
    yield
    close_all_pools()


def _transport(**extra) -> SSHTransport:
    c = cluster()["ssh"]
    fields = {
        "host": c["host"],
        "port": c["port"],
        "user": c["user"],
        **ssh_secrets(),
        "retries": 2,
        "connect_timeout": 5,
        **extra,
    }
    return SSHTransport(**fields)


def _new_private_key() -> str:
    return subprocess.run(
        [
            "bash",
            "-c",
            "d=$(mktemp -d); ssh-keygen -q -t ed25519 -N '' -f $d/k; cat $d/k; rm -r $d",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def _other_key_line() -> str:
    key = paramiko.Ed25519Key.from_private_key(io.StringIO(_new_private_key()))
    c = cluster()["ssh"]
    return f"[{c['host']}]:{c['port']} {key.get_name()} {key.get_base64()}"


def test_commands_run_as_the_cluster_user_and_arguments_are_never_shell_code() -> None:
    t = _transport()
    evil = "it's; $(touch /tmp/wt-pwned) `id` && echo no"
    out = t.run(["printf", "%s|%s", evil, "$HOME"])
    assert out.ok and out.stdout == f"{evil}|$HOME"
    assert not Path("/tmp/wt-pwned").exists()
    assert t.run(["id", "-un"]).stdout.strip() == cluster()["ssh"]["user"]
    assert t.home() == cluster()["ssh"]["home"]
    assert t.run(["sh", "-c", "exit 7"]).returncode == 7  # a result, not an error


def test_a_changed_host_key_is_refused() -> None:
    with pytest.raises(TransportError, match="HOST KEY MISMATCH") as err:
        _transport(known_hosts=_other_key_line()).run(["true"])
    assert not err.value.retryable


def test_an_unknown_host_key_is_refused_with_the_line_to_store() -> None:
    c = cluster()["ssh"]
    with pytest.raises(TransportError, match="unknown host key") as err:
        _transport(known_hosts=f"login.example.org {c['known_hosts'].split(' ', 1)[1]}").run(
            ["true"]
        )
    assert c["known_hosts"] in str(err.value)  # the admin compares, then stores it
    with pytest.raises(TransportError, match="no known_hosts entry"):
        _transport(known_hosts="")


def test_a_key_the_server_does_not_know_is_refused() -> None:
    other = _new_private_key()
    with pytest.raises(TransportError, match="refused") as err:
        _transport(private_key=other).run(["true"])
    assert not err.value.retryable


def test_connecting_to_a_dead_port_retries_with_backoff_then_gives_up() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(TransportError, match="cannot connect") as err:
        _transport(port=port, retries=3).run(["true"])
    assert err.value.retryable
    assert 0.5 < time.monotonic() - started < 10  # three waits of about 0.3, 0.6, 1.2 s


def test_a_burst_of_300_commands_shares_two_connections_within_sshd_limits() -> None:
    t = _transport(retries=5)

    def one(i: int) -> str:
        return t.run(["echo", str(i)]).stdout.strip()

    with ThreadPoolExecutor(max_workers=40) as pool:
        answers = list(pool.map(one, range(300)))
    assert answers == [str(i) for i in range(300)]
    assert t.pool.connections_opened <= 2
    assert t.pool.peak_sessions <= t.pool.max_connections * t.pool.max_sessions
    assert t.pool.open_connections <= 2


def test_write_files_and_put_tree_stage_atomically(tmp_path: Path) -> None:
    t = _transport()
    home = t.home()
    root = f"{home}/windtunnel-test/stage-{int(time.time() * 1000)}"
    src = tmp_path / "case"
    (src / "system").mkdir(parents=True)
    (src / "system" / "controlDict").write_text("application icoFoam;\n")
    (src / "0").mkdir()
    (src / "0" / "U").write_bytes(b"\x00binary")
    try:
        t.put_tree(str(src), f"{root}/case")
        t.put_tree(str(src), f"{root}/case")  # a second time: already there, nothing done
        assert t.run(["cat", f"{root}/case/system/controlDict"]).stdout == "application icoFoam;\n"
        assert t.run(["ls", "-A", root]).stdout.split() == ["case"]  # no .part leftovers
        from orchestration.transports.base import FileSpec

        t.write_files([FileSpec(f"{root}/a/b/run.json", b"{}", 0o600)])
        mode = t.run(["stat", "-c", "%a", f"{root}/a/b/run.json"]).stdout.strip()
        assert mode == "600"
    finally:
        t.run(["rm", "-rf", root])


@needs_openfoam
def test_a_cavity_run_over_ssh_stages_the_case_and_runs_as_the_cluster_user(
    portal: FakePortal, cavity: Path, tmp_path: Path
) -> None:
    work_root = f"windtunnel-test/{tmp_path.name}"  # a fresh run directory on the cluster
    driver = build_driver("slurm", {**ssh_settings(work_root=work_root), "secrets": ssh_secrets()})
    assert isinstance(driver, SlurmDriver)
    spec = make_spec(
        portal=portal, case_dir=cavity, work_dir=tmp_path / "portal-side", steps=serial_steps()
    )
    driver.prepare(spec)
    handle = driver.start(spec)
    home = cluster()["ssh"]["home"]
    run_dir = f"{home}/{work_root}/runs/{spec.run_id}/attempt-1"
    staged = json.loads(driver.transport.run(["cat", f"{run_dir}/run.json"]).stdout)
    assert staged["work_dir"] == run_dir
    assert staged["case_dir"].startswith(f"{home}/{work_root}/cases/")
    assert staged["case_dir"] != str(cavity)
    assert squeue("-h", "-j", handle, "-o", "%u").strip() in ("wtslurm", "")
    assert portal.wait_for(lambda: "completed" in portal.states(), timeout=120), portal.states()
    assert not (tmp_path / "portal-side").exists()  # nothing was written on the portal side
    assert portal.series()["residual.Ux"]
    deadline = time.monotonic() + 30
    while driver.poll(handle).phase != RunPhase.EXITED and time.monotonic() < deadline:
        time.sleep(0.2)
    assert driver.poll(handle).exit_code == 0
    transport = driver.transport
    assert isinstance(transport, SSHTransport)
    assert transport.pool.connections_opened == 1
    driver.transport.run(["rm", "-rf", f"{home}/{work_root}"])
