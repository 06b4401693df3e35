"""Agent pieces that need no solver: spec validation, archive, decomposition, the kept
portal connection, the agent's imports, provenance."""

from __future__ import annotations

import json
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from orchestration.agent.archive import build_archive, latest_time_dir
from orchestration.agent.case import decompose_par_dict, split_subdomains
from orchestration.agent.client import PortalClient, TransientError, json_safe
from orchestration.agent.spec import SpecError, parse_spec
from orchestration.drivers.base import RunSpec, Step
from orchestration.tests.conftest import FakePortal


def _spec_dict(**overrides: Any) -> dict[str, Any]:
    spec = RunSpec(
        run_id="r",
        attempt=2,
        portal_url="http://127.0.0.1:1",
        token="t",
        case_dir="/c",
        work_dir="/w",
        context={"a": 1},
        steps=[Step(name="icoFoam", argv=("icoFoam",))],
    )
    data: dict[str, Any] = json.loads(spec.to_json())
    data.update(overrides)
    return data


def test_run_spec_json_round_trips_into_the_agent_spec() -> None:
    spec = parse_spec(_spec_dict(decompose={"method": "simple", "subdomains": 4}))
    assert spec.attempt == 2 and spec.steps[0].argv == ("icoFoam",)
    assert spec.decompose == {"method": "simple", "subdomains": 4, "n": None}
    assert spec.case_path == "/w/case"


@pytest.mark.parametrize(
    "override",
    [
        {"steps": []},
        {"steps": [{"name": "x", "argv": "icoFoam"}]},
        {"steps": [{"name": "../x", "argv": ["a"]}]},
        {"attempt": "1"},
        {"attempt": True},
        {"portal_url": "ftp://x"},
        {"env": {"A": 1}},
        {"heartbeat_interval": -1},
        {"decompose": {"subdomains": 0}},
        {"decompose": {"subdomains": 4, "n": [3, 1, 1]}},
        {"version": 2},
        {"rendered": ["0/U"]},
        {"rendered": {"0/U": 1}},
        {"archive": "s3"},
    ],
)
def test_bad_specs_are_refused(override) -> None:
    with pytest.raises(SpecError):
        parse_spec(_spec_dict(**override))


def test_decompose_par_dict() -> None:
    assert split_subdomains(2) == (2, 1, 1)
    assert split_subdomains(6) == (3, 2, 1)
    assert split_subdomains(7) == (7, 1, 1)
    text = decompose_par_dict({"method": "hierarchical", "subdomains": 4, "n": None})
    assert "numberOfSubdomains 4;" in text and "n           (2 2 1);" in text
    assert "hierarchicalCoeffs" in text and "order       xyz;" in text


def test_json_safe_non_finite_numbers() -> None:
    assert [json_safe(v) for v in (1.5, float("nan"), float("inf"), float("-inf"))] == [
        1.5,
        "NaN",
        "Infinity",
        "-Infinity",
    ]


def test_unreachable_portal_is_transient() -> None:
    client = PortalClient(portal_url="http://127.0.0.1:9", run_id="r", token="t", attempt=1)
    with pytest.raises(TransientError):
        client.post("heartbeat/", {})


def _case(root: Path) -> Path:
    for rel, size in {
        "log.blockMesh": 100,
        "log.simpleFoam": 50_000,
        "system/controlDict": 100,
        "constant/transportProperties": 100,
        "constant/polyMesh/points": 30_000,
        "0/U": 100,
        "100/U": 5_000,
        "50/U": 100,
        "processor0/100/U": 100,
        "postProcessing/forceCoeffs/0/coefficient.dat": 1_000,
    }.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * size)
    return root


def test_archive_holds_the_initial_and_latest_times_logs_system_and_constant(
    tmp_path: Path,
) -> None:
    case = _case(tmp_path / "case")
    assert latest_time_dir(case) == case / "100"
    notes = build_archive(case, tmp_path / "a.tar.gz", max_bytes=10 * 1024 * 1024)
    assert notes == []
    names = tarfile.open(tmp_path / "a.tar.gz").getnames()
    assert set(names) == {
        "log.blockMesh",
        "log.simpleFoam",
        "system/controlDict",
        "constant/transportProperties",
        "constant/polyMesh/points",
        "postProcessing/forceCoeffs/0/coefficient.dat",
        "0/U",  # the initial conditions, as rendered: what a rerun by hand starts from
        "100/U",
    }


def test_archive_stays_under_budget_and_says_what_it_left_out(tmp_path: Path) -> None:
    case = _case(tmp_path / "case")
    budget = 64 * 1024 + 30_000
    notes = build_archive(case, tmp_path / "a.tar.gz", max_bytes=budget)
    with tarfile.open(tmp_path / "a.tar.gz") as tar:
        names = tar.getnames()
        total = sum(m.size for m in tar.getmembers())
        member = tar.extractfile("windtunnel-archive.txt")
        assert member is not None
        manifest = member.read().decode()
    assert total <= budget
    assert "log.simpleFoam" in names  # truncated to its tail, not dropped
    assert "constant/polyMesh/points" not in names
    assert any("polyMesh" in n for n in notes) and "truncated" in manifest


@pytest.mark.parametrize("use_psutil", [True, False])
def test_tree_sampler_and_kill_group_with_and_without_psutil(
    use_psutil: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess
    import time

    import psutil

    from orchestration.agent import procs

    # Linux uses /proc; psutil is what non-Linux machines get
    monkeypatch.setattr(procs, "psutil", psutil if use_psutil else None)
    proc = subprocess.Popen(["sh", "-c", "sleep 60 & sleep 60 & wait"], start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while len(procs.tree_pids(proc.pid)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        pids = procs.tree_pids(proc.pid)
        assert len(pids) == 3
        # the /proc children files and the walk of the whole process table agree
        assert sorted(pids) == sorted(procs._tree_pids_scan(proc.pid))
        assert procs.tree_pids(2**22 + 7) == []  # no such process
        sampler = procs.TreeSampler()
        sampler.sample(proc.pid)
        cpu, rss = sampler.sample(proc.pid)
        assert cpu >= 0 and rss > 0
        procs.kill_group(proc.pid, grace=5, extra_pids=pids, reap=proc.poll)
        proc.wait(timeout=10)
        assert not procs.group_alive(proc.pid)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_calls_from_one_thread_share_one_kept_alive_connection(portal: FakePortal) -> None:
    client = PortalClient(portal_url=portal.url, run_id="r", token="test-token", attempt=1)
    for _ in range(3):
        assert client.post("heartbeat/", {"phase": "solving"}) == {"stop": False}
    peers = {call.peer for call in portal.of("heartbeat/")}
    assert len(portal.of("heartbeat/")) == 3 and len(peers) == 1


def test_a_kept_connection_the_portal_closed_while_idle_is_replaced_without_an_error() -> None:
    """Like uvicorn's keep-alive timeout: the server answers, then closes the idle connection."""
    import socket

    server = socket.create_server(("127.0.0.1", 0))
    accepted = []

    def serve() -> None:
        for _ in range(2):
            conn, _ = server.accept()
            accepted.append(conn)
            conn.recv(65536)
            answer = b'{"stop": false}'
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(answer), answer)
            )
            time.sleep(0.1)
            conn.close()  # idle for too long: the server ends the connection

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    port = server.getsockname()[1]
    client = PortalClient(portal_url=f"http://127.0.0.1:{port}", run_id="r", token="t", attempt=1)
    try:
        assert client.post("heartbeat/", {}) == {"stop": False}
        time.sleep(0.3)
        assert client.post("heartbeat/", {}) == {"stop": False}  # a new connection, no error
        thread.join(timeout=5)
        assert len(accepted) == 2
    finally:
        server.close()


def test_archive_upload_and_case_download_go_over_the_kept_connection(
    portal: FakePortal, tmp_path: Path
) -> None:
    client = PortalClient(portal_url=portal.url, run_id="r", token="test-token", attempt=1)
    archive = tmp_path / "result.tar.gz"
    archive.write_bytes(b"x" * 300_000)
    client.post("heartbeat/", {})
    client.put_file("archive/", archive, content_type="application/gzip")
    client.post("state/", {"state": "completed"})
    (upload,) = portal.of("archive/")
    assert upload.body == archive.read_bytes() and upload.query == {"attempt": ["1"]}
    assert len({c.peer for c in portal.calls}) == 1


def test_the_agent_starts_without_the_heavy_modules() -> None:
    """Every Slurm job starts a fresh agent: what it imports is paid in every run slot (the
    template engine, http.client and its email package, orjson, dataclasses and inspect,
    pathlib and urllib.parse, typing, shutil were most of it)."""
    import subprocess
    import sys

    heavy = (
        "jinja2 psutil argparse tarfile http.client email orjson dataclasses inspect pathlib"
        " urllib.parse typing shutil"
    ).split()
    code = f"import sys, orchestration.agent.main; print(sorted(set({heavy!r}) & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_module_the_agent_imports_is_shipped_in_its_package() -> None:
    """Images and VMs get the agent from packages/windtunnel-agent: a module it imports that
    the package's file list leaves out fails every run in a container (as environment.py
    did once)."""
    import fnmatch
    import subprocess
    import sys

    import yaml

    root = Path(__file__).resolve().parents[2]
    manifest = yaml.safe_load((root / "packages/windtunnel-agent/package.yaml").read_text())
    (files,) = manifest["install"]["files"]
    code = (
        "import sys, pkgutil, importlib, orchestration.agent\n"
        "for m in pkgutil.iter_modules(orchestration.agent.__path__):\n"
        "    if m.name != '__main__':  # that one runs the agent\n"
        "        importlib.import_module('orchestration.agent.' + m.name)\n"
        "print('\\n'.join(sorted(n for n in sys.modules if n.startswith('orchestration'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    for module in out.stdout.split():
        rel = module.split(".", 1)[1].replace(".", "/") if "." in module else ""
        path = f"{rel}/__init__.py" if (root / "orchestration" / rel).is_dir() else f"{rel}.py"
        path = path.lstrip("/")
        assert any(fnmatch.fnmatch(path, pattern) for pattern in files["include"]), (
            f"{module} ({path}) is imported by the agent but not in the agent package"
        )


# --- provenance (docs/provenance.md) ------------------------------------------------------


def test_the_solver_log_banner_gives_the_openfoam_build_and_the_hosts(tmp_path):
    from orchestration.agent.logfollow import log_header

    serial = tmp_path / "log.icoFoam"
    serial.write_text(
        "| \\\\      /  F ield         | OpenFOAM: The Open Source CFD Toolbox |\n"
        "|  \\\\    /   O peration     | Version:                              |\n"
        "Build  : OPENFOAM=1912 patch=200626\nExec   : icoFoam\nHost   : node-1\nnProcs : 1\n"
    )
    assert log_header(str(serial)) == {
        "build": "OPENFOAM=1912 patch=200626",
        "host": "node-1",
        "processes": 1,
    }
    parallel = tmp_path / "log.simpleFoam"
    parallel.write_text(
        "|  \\\\    /   O peration     | Version:  v2312 |\nBuild  : _abc OPENFOAM=2312\n"
        'Host   : "a"\nnProcs : 4\nHosts  :\n(\n    (a 2)\n    (b 2)\n)\n'
    )
    header = log_header(str(parallel))
    assert header["version"] == "v2312" and header["hosts"] == ["a", "b"]
    assert header["processes"] == 4
    assert log_header(str(tmp_path / "missing")) == {}


def test_the_provenance_file_goes_first_into_the_archive_even_on_a_tight_budget(tmp_path):
    from orchestration.agent import PROVENANCE_FILE

    case = tmp_path / "case"
    (case / "system").mkdir(parents=True)
    (case / PROVENANCE_FILE).write_text(json.dumps({"agent_version": "x"}))
    (case / "log.icoFoam").write_text("x" * 200_000)
    dest = tmp_path / "result.tar.gz"
    build_archive(case, dest, max_bytes=64 * 1024 + 100_000)  # the log does not fit whole
    with tarfile.open(dest) as tar:
        member = tar.extractfile(PROVENANCE_FILE)
        assert member is not None
        assert json.load(member) == {"agent_version": "x"}


def test_a_log_written_wakes_its_watcher_and_draining_forgets_what_was_read(tmp_path) -> None:
    import select

    from orchestration.agent.logfollow import LogWrites

    log = tmp_path / "log.solve"
    log.write_bytes(b"")
    writes = LogWrites.open(str(log))
    assert writes is not None  # Linux: inotify is there
    try:
        assert select.select([writes.fd], [], [], 0)[0] == []  # nothing written yet
        with open(log, "ab") as fh:
            fh.write(b"Time = 0.1\n")
        assert select.select([writes.fd], [], [], 5)[0] == [writes.fd]
        writes.drain()
        assert select.select([writes.fd], [], [], 0)[0] == []
        with open(log, "ab") as fh:
            fh.write(b"Time = 0.2\n")
        assert select.select([writes.fd], [], [], 5)[0] == [writes.fd]
    finally:
        writes.close()


def test_no_watch_for_a_log_that_is_not_there(tmp_path) -> None:
    from orchestration.agent.logfollow import LogWrites

    assert LogWrites.open(str(tmp_path / "missing")) is None


def test_the_tree_sampler_keeps_a_peak_that_came_and_went_between_two_samples() -> None:
    import subprocess
    import sys

    from orchestration.agent import procs

    # 200 MB held for a moment, then given back before the sampler looks
    program = (
        "import sys, time; b = bytearray(200 * 1024 * 1024); b[::4096] = b'x' * len(b[::4096]);"
        " del b; print('freed', flush=True); time.sleep(60)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", program], stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"freed\n"
        sampler = procs.TreeSampler()
        _, rss = sampler.sample(proc.pid)
        assert rss < 100 * 1024**2  # the memory is gone now…
        assert sampler.peak_bytes >= 200 * 1024**2  # …its peak is not
    finally:
        proc.kill()
        proc.wait()
