"""The agent's reporter, without a solver: batches bounded and resent, the portal's pace
followed, log lines sent as they come on an idle link and batched under load."""

from __future__ import annotations

import math
import threading
import time
from typing import Any

import pytest

from orchestration.agent.client import PortalClient, StaleAttempt
from orchestration.agent.reporter import MAX_LOG_LINES, Reporter
from orchestration.tests.conftest import FakePortal, unpack


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
