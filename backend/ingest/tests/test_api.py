"""The agents' ingest API: what a good report stores, and what each bad one is told.

The telemetry endpoint has a one-statement path for the good case and a slower one that tells
apart why a report was refused; both are checked here through HTTP, on real PostgreSQL.
A run's final report and what it computes are in test_final_report.py.
"""

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from catalog.models import Backend
from ingest.tests.reports import (
    POINTS,
    send_final,
    send_numbered,
    send_report,
    send_telemetry,
    stored_counts,
)
from studies import transitions
from studies.models import Run
from studies.usage import usage_for_tenant
from telemetry import ingest as telemetry_ingest
from telemetry.batches import MAX_POINTS_PER_BATCH
from telemetry.models import LogChunk
from telemetry.selectors import series_values
from telemetry.watch import interval_for, redis_client, watch_key


def test_a_batch_is_stored_counts_as_a_heartbeat_and_answers_no_stop(running):
    run, client = running
    with CaptureQueriesContext(connection) as queries:
        r = send_telemetry(client, run.pk, series=POINTS, log=["Time = 1", "Time = 2"])
    # the hot path (several posts a second per run) is a single statement
    assert len(queries.captured_queries) == 1, queries.captured_queries
    assert r.status_code == 200, r.content
    assert r.json()["stop"] is False
    assert series_values(run=run, attempt=2, name="residual.Ux") == ([1.0, 2.0], [0.5, 0.25])
    assert series_values(run=run, attempt=2, name="residual.p") == ([1.0, 2.0], [1.0, 0.75])
    assert list(LogChunk.objects.get(run=run).lines) == ["Time = 1", "Time = 2"]
    fresh = Run.objects.get(pk=run.pk)
    assert fresh.heartbeat_at is not None and fresh.event_seq == run.event_seq + 1


def test_a_batch_says_what_a_heartbeat_would_phase_cpu_memory_and_iterations(running):
    """Batches stand for heartbeats while the solver writes (none is sent then): the run's
    summary (phase, CPU, memory, iterations so far) comes from them, in the one statement."""
    run, client = running
    body = {
        "attempt": 2,
        "series": {**POINTS, "cpu.percent": [[3.0, 97.5]], "memory.rss": [[3.0, 2.0e8]]},
        "log": [],
        "phase": "solving",
        "resources": {"cpu_percent": 97.5, "rss_bytes": 200_000_000},
        "iterations": 199,
    }
    with CaptureQueriesContext(connection) as queries:
        r = client.post(f"/api/v1/ingest/runs/{run.pk}/telemetry/", body, format="json")
    assert r.status_code == 200, r.content
    assert len(queries.captured_queries) == 1
    shown = APIClient()
    shown.force_authenticate(run.study.owner)
    detail = shown.get(f"/api/v1/runs/{run.pk}/").json()
    assert detail["phase"] == "solving"
    assert detail["cpu_percent"] == 97.5 and detail["rss_bytes"] == 200_000_000
    assert detail["iterations"] == 199

    # an empty batch with the same fields is a heartbeat (the slow path) and says as much
    body = {"attempt": 2, "phase": "reconstructing", "resources": {"cpu_percent": 12.0}}
    r = client.post(f"/api/v1/ingest/runs/{run.pk}/telemetry/", body, format="json")
    assert r.status_code == 200, r.content
    fresh = Run.objects.get(pk=run.pk)
    assert (fresh.phase, fresh.cpu_percent) == ("reconstructing", 12.0)

    r = client.post(
        f"/api/v1/ingest/runs/{run.pk}/telemetry/",
        {"attempt": 2, "iterations": -1},
        format="json",
    )
    assert r.status_code == 400 and "iterations" in json.dumps(r.json())


def test_a_nan_is_kept_as_a_gap_and_stops_the_run_as_diverged(running):
    run, client = running
    r = send_telemetry(client, run.pk, series={"residual.p": [[1, 1.0], [2, "NaN"]]})
    assert r.status_code == 200 and r.json()["stop"] is True
    assert series_values(run=run, attempt=2, name="residual.p") == ([1.0, 2.0], [1.0, None])
    fresh = Run.objects.get(pk=run.pk)
    assert fresh.end_reason == "diverged" and fresh.stop_requested


def test_a_stop_the_portal_wants_is_in_the_answer(running):
    run, client = running
    Run.objects.filter(pk=run.pk).update(stop_requested=True)
    r = send_telemetry(client, run.pk, series=POINTS)
    assert r.status_code == 200 and r.json()["stop"] is True


@pytest.mark.parametrize(
    ("header", "status"),
    [(None, 401), ("Bearer not-the-token", 401), ("Token looks-like-a-user-token", 401)],
)
def test_a_missing_or_wrong_token_is_401_and_stores_nothing(running, header, status):
    run, client = running
    client.credentials(**({"HTTP_AUTHORIZATION": header} if header else {}))
    r = send_telemetry(client, run.pk, series=POINTS, log=["x"])
    assert r.status_code == status
    assert "run token" in r.json()["message"]
    assert stored_counts(run) == (0, 0)


def test_a_strangers_body_is_not_read_and_an_agents_is_capped_before_it_is(running):
    """A stranger's malformed body is a 401 (not a 400: it is never parsed); an agent's body
    of no declared length is a 411, one over its endpoint's limit a 413 naming the limit."""
    run, client = running
    stranger = APIClient()
    url = f"/api/v1/ingest/runs/{run.pk}/telemetry/"
    r = stranger.post(url, b"{not json", content_type="application/json")
    assert r.status_code == 401 and r.json()["code"] == "not_authenticated"
    r = client.post(f"{url}?attempt=2", b"{not json", content_type="application/json")
    assert r.status_code == 400 and "JSON parse error" in r.json()["message"]
    heartbeat = f"/api/v1/ingest/runs/{run.pk}/heartbeat/"
    r = client.post(heartbeat, {"attempt": 2, "phase": "x" * 2_000_000}, format="json")
    assert r.status_code == 413 and r.json()["code"] == "body_too_large"
    assert "heartbeat endpoint takes at most 1 MB" in r.json()["message"]
    r = client.generic(
        "POST",
        f"{heartbeat}?attempt=2",
        b'{"attempt": 2}',
        content_type="application/json",
        CONTENT_LENGTH="",
    )
    assert r.status_code == 411 and "send Content-Length (at most 1 MB" in r.json()["message"]
    assert Run.objects.get(pk=run.pk).heartbeat_at is None


@pytest.mark.parametrize("run_id", ["0b0e7c1e-5d43-4a3c-9d3e-7d1e3a0c2f11", "not-a-uuid"])
def test_a_runs_token_opens_no_other_run_and_names_none_of_them(running, run_id):
    _, client = running
    r = send_telemetry(client, run_id, series=POINTS)
    assert r.status_code == 401 and r.json()["message"] == "missing or wrong run token"


def test_an_attempt_that_is_over_is_409_and_stores_nothing(running, agent_of):
    run, client = running
    r = send_telemetry(agent_of(run, 1), run.pk, attempt=1, series=POINTS, log=["late"])
    assert r.status_code == 409
    assert r.json()["code"] == "stale_attempt"
    # the current attempt's token naming the earlier attempt opens nothing either
    assert send_telemetry(client, run.pk, attempt=1, series=POINTS).status_code == 401
    assert stored_counts(run) == (0, 0)


def test_the_last_points_of_a_run_the_portal_ended_are_kept_and_the_agent_told_to_stop(running):
    run, client = running
    Run.objects.filter(pk=run.pk).update(state="cancelled", finished_at=timezone.now())
    r = send_telemetry(client, run.pk, series=POINTS, log=["last words"])
    assert r.status_code == 200 and r.json()["stop"] is True
    assert stored_counts(run) == (2, 1)


@pytest.mark.parametrize(
    ("series", "needle"),
    [
        ({"residual.Ux": [[1, "high"]]}, "residual.Ux: non-numeric point"),
        ({"residual.Ux": [[1, 0.5], [2, 10**400]]}, "number is infinity"),
        ({"residual.Ux": [[1, 2, 3]]}, "residual.Ux: each point is [x, y]"),
        ({"residual.Ux": {"x": 1}}, 'residual.Ux: columns are {"x": [...], "y": [...]}'),
        ({"residual.Ux": {"x": [1, 2], "y": [0.5]}}, "residual.Ux: 2 x values but 1 y values"),
        ({"residual.Ux": {"x": [1], "y": ["high"]}}, "residual.Ux: non-numeric point"),
        ({"residual.Ux": {"x": [1], "y": [1], "z": [1]}}, "columns are"),
        ({"residual.Ux": 7}, 'residual.Ux: give {"x": [...], "y": [...]} or a list of [x, y]'),
        ([[1, 2]], "series must be an object"),
    ],
)
def test_malformed_points_are_400s_naming_the_series(running, series, needle):
    run, client = running
    r = send_telemetry(client, run.pk, series=series)
    assert r.status_code == 400
    assert needle in str(r.json())
    assert stored_counts(run) == (0, 0)


@pytest.mark.parametrize(("kind", "released"), [("local", True), ("slurm", False)])
def test_a_run_that_is_archiving_gives_its_cores_back_on_the_portals_own_cores(
    running, kind, released
):
    run, client = running
    backend, _ = Backend.objects.update_or_create(
        name=f"early-{kind}", defaults={"kind": kind, "cores": 64, "memory_gb": 256}
    )
    Run.objects.filter(pk=run.pk).update(backend=backend)
    assert usage_for_tenant(tenant_id=run.tenant_id).cores == run.processes
    body = {"attempt": 2, "phase": "archiving", "resources": {}}
    r = client.post(f"/api/v1/ingest/runs/{run.pk}/heartbeat/", body, format="json")
    assert r.status_code == 200 and r.json()["stop"] is False
    fresh = Run.objects.get(pk=run.pk)
    assert fresh.phase == "archiving" and fresh.state == "running"
    assert (fresh.released_at is not None) is released
    # a Slurm job or a cloud server holds its allocation until the run ends
    assert usage_for_tenant(tenant_id=run.tenant_id).cores == (0 if released else run.processes)
    if released:  # a repeated report does not move the time
        client.post(f"/api/v1/ingest/runs/{run.pk}/heartbeat/", body, format="json")
        assert Run.objects.get(pk=run.pk).released_at == fresh.released_at


def test_a_batch_is_published_live_only_while_someone_watches_the_run(
    running, monkeypatch, django_capture_on_commit_callbacks
):
    """Nobody subscribed: the batch is stored, and not serialised onto the channel layer;
    once a subscriber marked the run, the next batch goes out to it."""
    run, client = running
    sent = []
    monkeypatch.setattr(telemetry_ingest, "send", lambda group, message: sent.append(message))
    redis_client().delete(watch_key(run.pk))
    with django_capture_on_commit_callbacks(execute=True):
        assert send_telemetry(client, run.pk, series=POINTS).json()["interval"] == 2.0
    assert sent == [] and stored_counts(run)[0] == 2
    redis_client().set(watch_key(run.pk), 1, ex=30)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            r = send_telemetry(client, run.pk, series={"residual.p": [[3, 0.5]]})
        assert r.json()["interval"] == 0.25
    finally:
        redis_client().delete(watch_key(run.pk))
    assert [m["series"] for m in sent] == [{"residual.p": [[3.0, 0.5]]}]


def test_a_heartbeat_is_one_statement_and_each_refusal_says_why(running, agent_of):
    run, client = running
    body = {"attempt": 2, "phase": "solving", "resources": {"cpu_percent": 99.5}}
    with CaptureQueriesContext(connection) as queries:
        r = send_report(client, run.pk, "heartbeat", body)
    assert r.status_code == 200 and r.json()["stop"] is False
    assert len(queries) == 1
    fresh = Run.objects.get(pk=run.pk)
    assert (fresh.phase, fresh.cpu_percent) == ("solving", 99.5) and fresh.heartbeat_at
    assert (
        send_report(agent_of(run, 1), run.pk, "heartbeat", {**body, "attempt": 1}).status_code
        == 409
    )
    stranger = APIClient()
    stranger.credentials(HTTP_AUTHORIZATION="Bearer wrong")
    assert send_report(stranger, run.pk, "heartbeat", body).status_code == 401
    assert (
        send_report(client, "4e1f8a2c-0000-4000-8000-000000000000", "heartbeat", body).status_code
        == 401
    )
    Run.objects.filter(pk=run.pk).update(state="cancelled")
    r = send_report(client, run.pk, "heartbeat", body)  # ended by the portal: stop
    assert r.status_code == 200 and r.json()["stop"] is True


def test_the_running_report_is_one_statement_and_a_repeat_or_a_stale_one_is_told_apart(
    running, agent_of
):
    run, client = running
    Run.objects.filter(pk=run.pk).update(state="provisioning", started_at=None)
    with CaptureQueriesContext(connection) as queries:
        r = send_report(client, run.pk, "state", {"attempt": 2, "state": "running"})
    assert r.status_code == 200 and r.json()["stop"] is False
    assert len(queries) == 1
    fresh = Run.objects.get(pk=run.pk)
    assert fresh.state == "running" and fresh.started_at is not None
    again = send_report(client, run.pk, "state", {"attempt": 2, "state": "running"})
    assert again.status_code == 200  # a repeated report is fine
    assert Run.objects.get(pk=run.pk).started_at == fresh.started_at
    stale = send_report(agent_of(run, 1), run.pk, "state", {"attempt": 1, "state": "running"})
    assert stale.status_code == 409
    stranger = APIClient()
    stranger.credentials(HTTP_AUTHORIZATION="Bearer wrong")
    r = send_report(stranger, run.pk, "state", {"attempt": 2, "state": "running"})
    assert r.status_code == 401


def test_a_final_report_is_refused_for_a_stranger_another_run_or_a_stale_attempt(running, agent_of):
    run, client = running
    body = {"attempt": 2, "state": "completed", "exit_code": 0}
    stranger = APIClient()
    stranger.credentials(HTTP_AUTHORIZATION="Bearer wrong")
    assert send_report(stranger, run.pk, "state", body).status_code == 401
    assert (
        send_report(client, "4e1f8a2c-0000-4000-8000-000000000000", "state", body).status_code
        == 401
    )
    assert send_report(client, "not-a-uuid", "state", body).status_code == 401
    stale = send_report(agent_of(run, 1), run.pk, "state", {**body, "attempt": 1})
    assert stale.status_code == 409
    assert Run.objects.get(pk=run.pk).state == "running"  # nothing changed
    r = send_report(client, run.pk, "state", body)
    assert r.status_code == 200
    fresh = Run.objects.get(pk=run.pk)
    assert fresh.state == "completed" and fresh.exit_code == 0 and fresh.results_at


@pytest.mark.parametrize(
    ("log", "needle"),
    [
        ("one line", "log must be a list"),
        (["ok", 3], "list of strings"),
        (["a\x00b"], "NUL"),
        (["\ud800"], "surrogate"),  # the JSON parser already refuses it
    ],
)
def test_bad_log_lines_are_400s_and_store_nothing(running, log, needle):
    run, client = running
    body = {"attempt": 2, "series": POINTS, "log": log}
    r = client.post(
        f"/api/v1/ingest/runs/{run.pk}/telemetry/",
        json.dumps(body),  # the stdlib writes a lone surrogate as an escape, as a client could
        content_type="application/json",
    )
    assert r.status_code == 400 and needle in str(r.json())
    assert stored_counts(run) == (0, 0)


def test_columns_are_stored_as_points_are_and_a_nan_in_them_is_a_gap(running):
    """The agent's columnar series ({"x": [...], "y": [...]}) store exactly what the same
    points as [[x, y], …] store; a NaN in a column is a gap that stops the run as diverged."""
    run, client = running
    columns = {"residual.Ux": {"x": [1, 2], "y": [0.5, 0.25]}, "f.Cl": {"x": [1], "y": [3]}}
    with CaptureQueriesContext(connection) as queries:
        r = send_telemetry(client, run.pk, series=columns)
    assert r.status_code == 200 and len(queries) == 1
    assert series_values(run=run, attempt=2, name="residual.Ux") == ([1.0, 2.0], [0.5, 0.25])
    assert series_values(run=run, attempt=2, name="f.Cl") == ([1.0], [3.0])
    r = send_telemetry(client, run.pk, series={"residual.p": {"x": [3, 4], "y": [1.0, "NaN"]}})
    assert r.status_code == 200 and r.json()["stop"] is True
    assert series_values(run=run, attempt=2, name="residual.p") == ([3.0, 4.0], [1.0, None])
    run.refresh_from_db()
    assert run.state == "failed" and run.end_reason == "diverged"


def _packed(values) -> str:
    import array
    import base64
    import sys

    column = array.array("d", values)
    if sys.byteorder != "little":
        column.byteswap()
    return base64.b64encode(column.tobytes()).decode()


def test_packed_columns_store_what_lists_store_and_a_nan_in_them_is_a_gap(running):
    """What the agent sends: each column the base64 of its little-endian float64s."""
    run, client = running
    series = {"residual.Ux": {"x": _packed([1, 2]), "y": _packed([0.5, 0.25])}}
    r = send_telemetry(client, run.pk, series=series)
    assert r.status_code == 200, r.content
    assert series_values(run=run, attempt=2, name="residual.Ux") == ([1.0, 2.0], [0.5, 0.25])
    mixed = {"f.Cl": {"x": [3], "y": _packed([1.5])}}  # one packed, one a list: fine
    assert send_telemetry(client, run.pk, series=mixed).status_code == 200
    assert series_values(run=run, attempt=2, name="f.Cl") == ([3.0], [1.5])
    nan = {"residual.p": {"x": _packed([3, 4]), "y": _packed([1.0, float("nan")])}}
    r = send_telemetry(client, run.pk, series=nan)
    assert r.status_code == 200 and r.json()["stop"] is True
    assert series_values(run=run, attempt=2, name="residual.p") == ([3.0, 4.0], [1.0, None])


@pytest.mark.parametrize(
    ("column", "needle"),
    [
        ("not base64!", "residual.Ux: y is neither a list of numbers nor base64"),
        ("AAAAAAAAAA==", "packed y has 7 bytes, not a whole number"),  # 7 bytes
        (7, "two lists of numbers or two base64 strings"),
    ],
)
def test_bad_packed_columns_are_400s_naming_the_series(running, column, needle):
    run, client = running
    r = send_telemetry(client, run.pk, series={"residual.Ux": {"x": _packed([1.0]), "y": column}})
    assert r.status_code == 400 and needle in str(r.json()), r.json()
    assert stored_counts(run) == (0, 0)


def test_a_packed_batch_over_the_point_limit_is_refused_before_it_is_decoded(running):
    run, client = running
    big = _packed([0.0] * (MAX_POINTS_PER_BATCH + 1))
    r = send_telemetry(client, run.pk, series={"residual.Ux": {"x": big, "y": big}})
    assert r.status_code == 400 and "at most 200000 points per batch" in str(r.json())


def test_a_batch_sent_again_is_acknowledged_and_stored_once(running):
    run, client = running
    first = send_numbered(client, run.pk, 1, series=POINTS, log=["Time = 1", "Time = 2"])
    assert first.status_code == 200 and "duplicate" not in first.json()
    again = send_numbered(client, run.pk, 1, series=POINTS, log=["Time = 1", "Time = 2"], phase="x")
    assert again.status_code == 200, again.content
    assert again.json()["duplicate"] is True and again.json()["stop"] is False
    assert stored_counts(run) == (2, 1)
    assert series_values(run=run, attempt=2, name="residual.Ux") == ([1.0, 2.0], [0.5, 0.25])
    assert Run.objects.get(pk=run.pk).phase == "x"  # still the agent's sign of life
    # the next batch is stored; an older number than the highest stored is not, whatever it
    # holds (the agent sends its batches one after the other)
    assert "duplicate" not in send_numbered(client, run.pk, 2, log=["Time = 3"]).json()
    assert send_numbered(client, run.pk, 1, log=["Time = 4"]).json()["duplicate"] is True
    assert [list(c.lines) for c in LogChunk.objects.filter(run=run).order_by("seq")] == [
        ["Time = 1", "Time = 2"],
        ["Time = 3"],
    ]


def test_batches_without_a_number_are_stored_as_they_come(running):
    """An agent before batch numbers: every batch it sends is stored, as before."""
    run, client = running
    for _ in range(2):
        assert send_telemetry(client, run.pk, log=["Time = 1"]).json() == {
            "stop": False,
            "interval": interval_for(watched=False),
        }
    assert stored_counts(run) == (0, 2)


def test_a_final_report_carrying_a_batch_stored_already_ends_the_run_and_stores_it_once(
    running,
):
    """The last batch went as a telemetry batch whose answer was lost; the final report
    carries it again, with its number: the run ends, its points are stored once."""
    run, client = running
    series = {"returnFlow.min(Ux)": [[1, -0.1], [2, -0.2]]}
    assert send_numbered(client, run.pk, 3, series=series, log=["End"]).status_code == 200
    r = send_final(client, run.pk, batch_seq=3, series=series, log=["End"])
    assert r.status_code == 200 and r.json() == {"stop": False, "duplicate": True}
    fresh = Run.objects.get(pk=run.pk)
    assert fresh.state == "completed" and fresh.objectives["u_min"] == -0.2
    assert series_values(run=run, attempt=2, name="returnFlow.min(Ux)") == (
        [1.0, 2.0],
        [-0.1, -0.2],
    )
    assert stored_counts(run) == (1, 1)


def test_a_new_attempt_numbers_its_batches_afresh(running, agent_of):
    run, client = running
    assert send_numbered(client, run.pk, 7, log=["attempt 2"]).status_code == 200
    Run.objects.filter(pk=run.pk).update(state="admitted")
    (claimed,), _ = transitions.runs_claim(run_ids=[run.pk])
    assert claimed.attempt == 3
    r = send_numbered(agent_of(run, 3), run.pk, 1, attempt=3, log=["attempt 3"])
    assert r.status_code == 200 and "duplicate" not in r.json()
    assert LogChunk.objects.filter(run=run, attempt=3).count() == 1
