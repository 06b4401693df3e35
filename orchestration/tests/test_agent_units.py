"""Agent pieces that need no solver: spec validation, reporter buffer, archive, decomposition."""

from __future__ import annotations

import json
import math
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from orchestration.agent.archive import build_archive, latest_time_dir
from orchestration.agent.case import decompose_par_dict, split_subdomains
from orchestration.agent.client import PortalClient, StaleAttempt, TransientError, json_safe
from orchestration.agent.reporter import MAX_LOG_LINES, Reporter
from orchestration.agent.spec import SpecError, parse_spec
from orchestration.drivers.base import RunSpec, Step
from orchestration.tests.conftest import FakePortal, unpack


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


def _reporter(portal: FakePortal) -> Reporter:
    client = PortalClient(portal_url=portal.url, run_id="r", token="test-token", attempt=1)
    return Reporter(client=client, heartbeat_interval=60, telemetry_interval=60)


def test_log_lines_are_bounded_per_batch_with_a_skip_marker(portal: FakePortal) -> None:
    reporter = _reporter(portal)
    reporter.add_log(f"line {i}" for i in range(MAX_LOG_LINES + 50))
    reporter.add_points([("residual.p", 1.0, 0.5), ("residual.p", 2.0, float("nan"))])
    assert reporter.flush(deadline=0)
    (call,) = portal.of("telemetry/")
    assert call.body["log"][0] == "[… 50 lines skipped …]"
    assert call.body["log"][-1] == f"line {MAX_LOG_LINES + 49}"
    assert len(call.body["log"]) == MAX_LOG_LINES + 1
    (series,) = unpack(call.body["series"]).values()
    assert series["x"] == [1.0, 2.0] and series["y"][0] == 0.5 and math.isnan(series["y"][1])
    assert isinstance(call.body["series"]["residual.p"]["y"], str)  # packed
    assert call.body["attempt"] == 1


def test_a_batch_carries_the_phase_resources_and_iterations_a_heartbeat_would(
    portal: FakePortal,
) -> None:
    """While the solver writes, batches go instead of heartbeats: the run's summary on the
    portal (phase, CPU, memory, iterations so far) is kept up to date by them."""
    reporter = _reporter(portal)
    reporter.set_phase("solving")
    reporter.set_resources(cpu_percent=97.54, rss_bytes=2_000_000)
    reporter.set_iterations(199)
    reporter.add_points([("residual.p", 199.0, 1e-3)])
    assert reporter.flush(deadline=0)
    (call,) = portal.of("telemetry/")
    assert call.body["phase"] == "solving"
    assert call.body["resources"] == {"cpu_percent": 97.5, "rss_bytes": 2_000_000}
    assert call.body["iterations"] == 199


def test_a_fast_solver_is_not_held_to_the_pace_and_loses_no_point(portal: FakePortal) -> None:
    """Points arriving faster than one batch per interval: full batches go out at once
    (the interval is 60 s here), none is thinned out."""
    from orchestration.agent.reporter import MAX_BATCH_POINTS, MAX_BUFFERED_POINTS

    reporter = _reporter(portal)
    reporter.start()
    try:
        total = MAX_BUFFERED_POINTS + 3 * MAX_BATCH_POINTS  # more than the buffer holds
        for start in range(0, total, 5_000):
            xs = [float(x) for x in range(start, start + 5_000)]
            reporter.add_columns({"residual.p": (xs, [1.0] * len(xs))})
            time.sleep(0.002)
        assert portal.wait_for(
            lambda: len(portal.series().get("residual.p", [])) >= total - MAX_BATCH_POINTS,
            timeout=60,
        )
    finally:
        reporter.close()
    assert reporter.flush(deadline=time.monotonic() + 30)
    xs = [x for x, _ in portal.series()["residual.p"]]
    assert xs == [float(x) for x in range(total)]  # every point, in order
    assert not any("dropped" in line for line in portal.log_lines())


def test_failed_batches_are_kept_and_resent(portal: FakePortal) -> None:
    failures = iter([True, True])
    portal.responder = lambda call: (503, {}) if next(failures, False) else None
    reporter = _reporter(portal)
    reporter.add_points([("a", 1.0, 1.0)])
    reporter.add_log(["hello"])
    assert reporter.flush(deadline=float("inf"), sleep=lambda s: None)
    calls = portal.of("telemetry/")
    assert len(calls) == 3
    assert unpack(calls[-1].body["series"]) == {"a": {"x": [1.0], "y": [1.0]}}
    assert calls[-1].body["log"] == ["hello"]
    assert [c.body["batch_seq"] for c in calls] == [1, 1, 1]
    assert all(c.query == {"attempt": ["1"]} for c in calls)  # the attempt in the URL too


def test_an_unanswered_batch_goes_again_as_it_was_before_anything_newer(
    portal: FakePortal,
) -> None:
    """The portal may have stored a batch whose answer was lost: it is sent again with the
    same points and number (so the portal stores it once), and what came since goes in the
    next batch, numbered after it."""
    lost = iter([True])
    portal.responder = lambda call: (504, {}) if next(lost, False) else None
    reporter = _reporter(portal)
    reporter.add_points([("a", 1.0, 1.0)])
    reporter.add_log(["first"])
    assert not reporter.flush(deadline=0)  # unanswered: kept
    reporter.add_points([("a", 2.0, 2.0)])
    reporter.add_log(["second"])
    assert reporter.flush(deadline=0)
    calls = portal.of("telemetry/")
    assert [(c.body["batch_seq"], c.body["log"]) for c in calls] == [
        (1, ["first"]),
        (1, ["first"]),
        (2, ["second"]),
    ]
    assert [unpack(c.body["series"])["a"]["x"] for c in calls] == [[1.0], [1.0], [2.0]]


def test_the_final_report_carries_its_batchs_number(portal: FakePortal) -> None:
    """The last batch rides with the final report, numbered after the batches sent; a batch
    flush could not get answered rides there itself, with its own number."""
    reporter = _reporter(portal)
    reporter.add_points([("a", 1.0, 1.0)])
    assert reporter.flush(deadline=0)
    reporter.add_points([("a", 2.0, 1.0)])
    assert reporter.flush(deadline=0, keep_last=True)
    assert reporter.take_batch()["batch_seq"] == 2

    portal.responder = lambda call: (503, {})
    reporter.add_points([("a", 3.0, 1.0)])
    assert not reporter.flush(deadline=0)  # unanswered: given up on at the deadline
    reporter.add_points([("a", 4.0, 1.0)])
    last = reporter.take_batch()
    assert last["batch_seq"] == 3 and unpack(last["series"])["a"]["x"] == [3.0]
    assert portal.of("telemetry/")[-1].body["batch_seq"] == 3


def test_stop_and_stale_answers_set_events(portal: FakePortal) -> None:
    reporter = _reporter(portal)
    portal.responder = lambda call: (200, {"stop": True})
    reporter.add_points([("a", 1.0, 1.0)])
    reporter.flush(deadline=0)
    assert reporter.stop_requested.is_set()
    portal.responder = lambda call: (409, {"code": "stale_attempt"})
    reporter.add_points([("a", 2.0, 1.0)])
    with pytest.raises(StaleAttempt):
        reporter.flush(deadline=0)
    assert reporter.stale.is_set()


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


def test_archive_holds_latest_time_logs_system_constant_and_postprocessing(tmp_path: Path) -> None:
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


def test_the_reporter_follows_the_portals_pace_and_ignores_nonsense(portal: FakePortal) -> None:
    reporter = _reporter(portal)  # 60 s to begin with
    portal.responder = lambda call: (200, {"stop": False, "interval": 0.25})
    reporter.add_points([("a", 1.0, 1.0)])
    assert reporter.flush(deadline=0)
    assert reporter.telemetry_interval == 0.25
    for nonsense in ("fast", True, None, float("nan"), [1]):
        reporter.set_interval(nonsense)
        assert reporter.telemetry_interval == 0.25
    reporter.set_interval(0.0001)  # bounded: an answer cannot make the agent spin
    assert reporter.telemetry_interval == 0.05
    reporter.set_interval(1e9)
    assert reporter.telemetry_interval == 60.0


def test_a_faster_pace_applies_to_the_wait_already_begun(portal: FakePortal) -> None:
    reporter = Reporter(
        client=PortalClient(portal_url=portal.url, run_id="r", token="test-token", attempt=1),
        heartbeat_interval=60,
        telemetry_interval=60,
    )
    reporter.start()
    try:
        reporter.add_points([("a", 1.0, 1.0)])  # due in 60 s …
        time.sleep(0.3)
        assert portal.of("telemetry/") == []
        reporter.set_interval(0.1)  # … until the run is watched
        wait_until(lambda: len(portal.of("telemetry/")) == 1)
        reporter.add_points([("a", 2.0, 1.0)])
        wait_until(lambda: len(portal.of("telemetry/")) == 2)
    finally:
        reporter.close()


def test_the_first_batch_waits_one_interval_and_a_slower_first_pace_applies_to_it(
    portal: FakePortal,
) -> None:
    """A run nobody watches (the answer to `running` says 2 s) sends nothing before 2 s: a
    short one sends its points only with its final report."""
    reporter = Reporter(
        client=PortalClient(portal_url=portal.url, run_id="r", token="test-token", attempt=1),
        heartbeat_interval=60,
        telemetry_interval=0.2,
    )
    reporter.set_interval(1.5)  # the running answer, before the reporter starts
    reporter.start()
    try:
        reporter.add_points([("a", 1.0, 1.0)])
        time.sleep(0.8)
        assert portal.of("telemetry/") == []
        wait_until(lambda: len(portal.of("telemetry/")) == 1, timeout=5)
    finally:
        reporter.close()


def test_flush_keeps_the_last_batch_for_the_final_report(portal: FakePortal) -> None:
    reporter = _reporter(portal)
    reporter.add_columns({"a": ([float(i) for i in range(25_000)], [1.0] * 25_000)})
    reporter.add_log_text("one\ntwo")
    assert reporter.flush(deadline=0, keep_last=True)
    sent = portal.of("telemetry/")
    assert len(sent) == 1 and len(unpack(sent[0].body["series"])["a"]["x"]) == 20_000
    assert sent[0].body["log"] == ["one", "two"]
    last = reporter.take_batch()
    assert unpack(last["series"])["a"]["x"] == [float(i) for i in range(20_000, 25_000)]
    assert last["log"] == []
    assert not reporter.has_pending() and reporter.take_batch() == {}


def test_log_blocks_keep_the_last_lines_and_count_the_skipped_ones(portal: FakePortal) -> None:
    reporter = _reporter(portal)
    for block in range(30):  # 30 blocks of 400 lines: 12,000 lines
        reporter.add_log_text("\n".join(f"{block}:{i}" for i in range(400)))
    reporter.add_log(["== solver: exited with code 0 =="])
    batch = reporter.take_batch()["log"]
    assert batch[0] == f"[… {12_001 - 200} lines skipped …]"
    assert batch[1:] == [f"29:{i}" for i in range(201, 400)] + ["== solver: exited with code 0 =="]


def wait_until(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_calls_from_one_thread_share_one_kept_alive_connection(portal: FakePortal) -> None:
    client = PortalClient(portal_url=portal.url, run_id="r", token="test-token", attempt=1)
    for _ in range(3):
        assert client.post("heartbeat/", {"phase": "solving"}) == {"stop": False}
    peers = {call.peer for call in portal.of("heartbeat/")}
    assert len(portal.of("heartbeat/")) == 3 and len(peers) == 1


def test_a_kept_connection_the_portal_closed_while_idle_is_replaced_without_an_error() -> None:
    """Like uvicorn's keep-alive timeout: the server answers, then closes the idle connection."""
    import socket
    import threading

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


def test_lines_on_an_idle_link_go_one_by_one_and_under_load_as_one_batch(
    portal: FakePortal,
) -> None:
    """Nagle-style: at the live pace a point on an idle link goes in a batch of its own;
    points that come while a batch is in flight wait for its answer and go together, so the
    requests do not multiply with the load."""
    answered = threading.Event()
    first = threading.Event()

    def slow_first(call: Any) -> None:
        if call.endpoint == "telemetry/" and not first.is_set():
            first.set()
            answered.wait(30)  # the portal is busy with this batch …
        return None

    portal.responder = slow_first
    reporter = Reporter(
        client=PortalClient(portal_url=portal.url, run_id="r", token="test-token", attempt=1),
        heartbeat_interval=60,
        telemetry_interval=0.05,
    )
    reporter.start()
    try:
        reporter.add_points([("residual.p", 1.0, 0.5)])
        wait_until(first.is_set)
        for x in (2.0, 3.0, 4.0):  # … while these arrive
            reporter.add_points([("residual.p", x, 0.5)])
        answered.set()
        wait_until(lambda: len(portal.series().get("residual.p", [])) == 4)
        reporter.add_points([("residual.p", 5.0, 0.5)])  # the link is idle again
        wait_until(lambda: len(portal.series().get("residual.p", [])) == 5)
    finally:
        reporter.close()
    batches = [unpack(c.body["series"])["residual.p"]["x"] for c in portal.of("telemetry/")]
    assert batches == [[1.0], [2.0, 3.0, 4.0], [5.0]]


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


def test_once_due_a_batch_goes_with_the_next_line_or_when_the_waiting_one_is_old_enough(
    portal: FakePortal,
) -> None:
    """A steady writer's lines go as they are written (every other one waiting), not at the
    pace's own instants; a line that comes a quarter interval early counts as on time; no
    line waits more than an interval and a quarter for a companion."""
    now = [100.0]
    reporter = Reporter(
        client=PortalClient(portal_url=portal.url, run_id="r", token="test-token", attempt=1),
        heartbeat_interval=60,
        telemetry_interval=0.1,
        clock=lambda: now[0],
    )
    reporter._next_telemetry = 101.0  # the last batch went at 100.9
    now[0] = 100.95
    reporter.add_points([("residual.p", 1.0, 0.5)])
    assert not reporter._sendable(now[0])  # the pace holds it
    now[0] = 100.98
    assert not reporter._sendable(now[0])  # (almost) due, but it waits for the next line …
    now[0] = 100.99
    reporter.add_points([("residual.p", 2.0, 0.5)])
    assert reporter._sendable(now[0])  # … and goes with it
    series, _, taken = reporter._take_batch()
    assert taken == 2 and series["residual.p"]["x"] == [1.0, 2.0]
    reporter._next_telemetry = 101.09
    now[0] = 101.05
    reporter.add_points([("residual.p", 3.0, 0.5)])
    now[0] = 101.12  # due, and no line came since: it waits, at most 0.125 s in all
    assert not reporter._sendable(now[0])
    now[0] = 101.176
    assert reporter._sendable(now[0])
    reporter._take_batch()
    now[0] = 101.3  # an idle link: a line after the pace goes at once
    reporter._next_telemetry = 101.27
    reporter.add_points([("residual.p", 4.0, 0.5)])
    assert reporter._sendable(now[0])
