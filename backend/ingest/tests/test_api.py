"""The agents' ingest API: what a good report stores, and what each bad one is told.

The telemetry endpoint has a one-statement path for the good case and a slower one that tells
apart why a report was refused; both are checked here through HTTP, on real PostgreSQL.
"""

import json
import math
import secrets

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from catalog.models import Backend
from dispatch.reaper import queued_message
from studies import transitions
from studies.models import Run, Study
from studies.objectives import objectives_resolve
from studies.services import study_create
from studies.transitions import hash_run_token
from studies.usage import usage_for_tenant
from telemetry import ingest as telemetry_ingest
from telemetry.batches import MAX_POINTS_PER_BATCH
from telemetry.models import LogChunk, SeriesChunk
from telemetry.selectors import series_read, series_values
from telemetry.watch import interval_for, redis_client, watch_key


def _telemetry(client, run_id, *, attempt=2, series=None, log=None):
    body = {"attempt": attempt, "series": series or {}, "log": log or []}
    return client.post(f"/api/v1/ingest/runs/{run_id}/telemetry/", body, format="json")


POINTS = {"residual.Ux": [[1, 0.5], [2, 0.25]], "residual.p": [[1, 1.0], [2, 0.75]]}


def _stored(run) -> tuple[int, int]:
    return (
        SeriesChunk.objects.filter(run=run).count(),
        LogChunk.objects.filter(run=run).count(),
    )


def test_a_batch_is_stored_counts_as_a_heartbeat_and_answers_no_stop(running):
    run, client = running
    with CaptureQueriesContext(connection) as queries:
        r = _telemetry(client, run.pk, series=POINTS, log=["Time = 1", "Time = 2"])
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
    r = _telemetry(client, run.pk, series={"residual.p": [[1, 1.0], [2, "NaN"]]})
    assert r.status_code == 200 and r.json()["stop"] is True
    assert series_values(run=run, attempt=2, name="residual.p") == ([1.0, 2.0], [1.0, None])
    fresh = Run.objects.get(pk=run.pk)
    assert fresh.end_reason == "diverged" and fresh.stop_requested


def test_a_stop_the_portal_wants_is_in_the_answer(running):
    run, client = running
    Run.objects.filter(pk=run.pk).update(stop_requested=True)
    r = _telemetry(client, run.pk, series=POINTS)
    assert r.status_code == 200 and r.json()["stop"] is True


@pytest.mark.parametrize(
    ("header", "status"),
    [(None, 401), ("Bearer not-the-token", 401), ("Token looks-like-a-user-token", 401)],
)
def test_a_missing_or_wrong_token_is_401_and_stores_nothing(running, header, status):
    run, client = running
    client.credentials(**({"HTTP_AUTHORIZATION": header} if header else {}))
    r = _telemetry(client, run.pk, series=POINTS, log=["x"])
    assert r.status_code == status
    assert "run token" in r.json()["message"]
    assert _stored(run) == (0, 0)


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
    r = _telemetry(client, run_id, series=POINTS)
    assert r.status_code == 401 and r.json()["message"] == "missing or wrong run token"


def test_an_attempt_that_is_over_is_409_and_stores_nothing(running, agent_of):
    run, client = running
    r = _telemetry(agent_of(run, 1), run.pk, attempt=1, series=POINTS, log=["late"])
    assert r.status_code == 409
    assert r.json()["code"] == "stale_attempt"
    # the current attempt's token naming the earlier attempt opens nothing either
    assert _telemetry(client, run.pk, attempt=1, series=POINTS).status_code == 401
    assert _stored(run) == (0, 0)


def test_the_last_points_of_a_run_the_portal_ended_are_kept_and_the_agent_told_to_stop(running):
    run, client = running
    Run.objects.filter(pk=run.pk).update(state="cancelled", finished_at=timezone.now())
    r = _telemetry(client, run.pk, series=POINTS, log=["last words"])
    assert r.status_code == 200 and r.json()["stop"] is True
    assert _stored(run) == (2, 1)


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
    r = _telemetry(client, run.pk, series=series)
    assert r.status_code == 400
    assert needle in str(r.json())
    assert _stored(run) == (0, 0)


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


def test_a_completed_run_gets_objectives_iterations_and_trust_from_all_its_batches(
    make_tenant, catalog
):
    """Objectives reduce a series stored over several batches (gaps skipped), expressions
    use them, and the trust flag reads the final residuals (a trailing gap stays a gap)."""
    Backend.objects.update_or_create(
        name="noop", defaults={"kind": "noop", "cores": 64, "memory_gb": 256, "max_nodes": 1}
    )
    tenant = make_tenant()
    spec = {
        "name": "objectives",
        "template": "cavity",
        "backend": "noop",
        "convergence": {"diverge": {"nan": False}},
        "objectives": {
            "last": {"series": "f.a", "reduce": "last"},
            "mean3": {"series": "f.a", "reduce": "mean_last", "n": 3},
            "low": {"series": "f.a", "reduce": "min"},
            "high": {"series": "f.a", "reduce": "max"},
            "ratio": {"expr": "high / last"},
            "missing": {"series": "f.never", "reduce": "last"},
            "typo": {"series": "f.b", "reduce": "last"},
            "chained": {"expr": "missing * 2"},
            "zero": {"expr": "last / (high - high)"},
        },
    }
    # series the cavity case does not write are refused by the spec (case inspection); these
    # objectives stand for a case whose series could not be checked, set past the spec
    objectives = spec.pop("objectives")
    study = study_create(tenant=tenant, owner=tenant.user, spec=spec, submit=True)
    Study.objects.filter(pk=study.pk).update(
        objectives=objectives_resolve(objectives, names_in_scope=set())
    )
    run = Run.objects.get(study=study)
    token = secrets.token_urlsafe(16)
    Run.objects.filter(pk=run.pk).update(
        state="running", attempt=1, token_hash=hash_run_token(token), started_at=timezone.now()
    )
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    batches = [
        {"f.a": [[1, 4.0], [2, 9.0]], "residual.p": [[1, 0.5], [2, 0.1]]},
        {"f.a": [[3, "NaN"], [4, 2.0]], "residual.p": [[3, 0.05]], "residual.Ux": [[3, 1e-4]]},
        {"f.a": [[5, 3.0]], "residual.p": [[4, 1e-6]], "residual.Ux": [[4, "NaN"]]},
    ]
    for series in batches:
        assert _telemetry(client, run.pk, attempt=1, series=series).status_code == 200
    r = client.post(
        f"/api/v1/ingest/runs/{run.pk}/state/",
        {"attempt": 1, "state": "completed", "exit_code": 0},
        format="json",
    )
    assert r.status_code == 200, r.content
    run.refresh_from_db()
    assert run.state == "completed"
    assert run.objectives == {
        "last": 3.0,
        "mean3": pytest.approx((9.0 + 2.0 + 3.0) / 3),
        "low": 2.0,
        "high": 9.0,
        "ratio": 3.0,
        "missing": None,
        "typo": None,
        "chained": None,
        "zero": None,
    }
    # an objective without a value says why
    errors = run.trust_detail["objective_errors"]
    assert errors["missing"] == "no series named f.never; this run has: f.a"
    assert errors["typo"] == "no series named f.b (did you mean f.a?); this run has: f.a"
    assert errors["chained"] == "missing * 2: missing has no value"
    assert "division by zero" in errors["zero"]
    assert set(errors) == {"missing", "typo", "chained", "zero"}
    assert (run.iterations, run.last_time) == (4, 4.0)  # the longest residual series
    assert run.trust_detail["final_residuals"] == {"Ux": None, "p": 1e-6}
    # the drift of an objective over its last points: (max - min) / |mean| of 4, 9, 2, 3
    assert run.trust_detail["objective_drift"]["last"] == pytest.approx(7 / 4.5)
    assert "missing" not in run.trust_detail["objective_drift"]


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
        assert _telemetry(client, run.pk, series=POINTS).json()["interval"] == 2.0
    assert sent == [] and _stored(run)[0] == 2
    redis_client().set(watch_key(run.pk), 1, ex=30)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            r = _telemetry(client, run.pk, series={"residual.p": [[3, 0.5]]})
        assert r.json()["interval"] == 0.25
    finally:
        redis_client().delete(watch_key(run.pk))
    assert [m["series"] for m in sent] == [{"residual.p": [[3.0, 0.5]]}]


def _post(client, run_id, endpoint, body):
    return client.post(f"/api/v1/ingest/runs/{run_id}/{endpoint}/", body, format="json")


def test_a_heartbeat_is_one_statement_and_each_refusal_says_why(running, agent_of):
    run, client = running
    body = {"attempt": 2, "phase": "solving", "resources": {"cpu_percent": 99.5}}
    with CaptureQueriesContext(connection) as queries:
        r = _post(client, run.pk, "heartbeat", body)
    assert r.status_code == 200 and r.json()["stop"] is False
    assert len(queries) == 1
    fresh = Run.objects.get(pk=run.pk)
    assert (fresh.phase, fresh.cpu_percent) == ("solving", 99.5) and fresh.heartbeat_at
    assert _post(agent_of(run, 1), run.pk, "heartbeat", {**body, "attempt": 1}).status_code == 409
    stranger = APIClient()
    stranger.credentials(HTTP_AUTHORIZATION="Bearer wrong")
    assert _post(stranger, run.pk, "heartbeat", body).status_code == 401
    assert (
        _post(client, "4e1f8a2c-0000-4000-8000-000000000000", "heartbeat", body).status_code == 401
    )
    Run.objects.filter(pk=run.pk).update(state="cancelled")
    r = _post(client, run.pk, "heartbeat", body)  # ended by the portal: stop
    assert r.status_code == 200 and r.json()["stop"] is True


def test_the_running_report_is_one_statement_and_a_repeat_or_a_stale_one_is_told_apart(
    running, agent_of
):
    run, client = running
    Run.objects.filter(pk=run.pk).update(state="provisioning", started_at=None)
    with CaptureQueriesContext(connection) as queries:
        r = _post(client, run.pk, "state", {"attempt": 2, "state": "running"})
    assert r.status_code == 200 and r.json()["stop"] is False
    assert len(queries) == 1
    fresh = Run.objects.get(pk=run.pk)
    assert fresh.state == "running" and fresh.started_at is not None
    again = _post(client, run.pk, "state", {"attempt": 2, "state": "running"})
    assert again.status_code == 200  # a repeated report is fine
    assert Run.objects.get(pk=run.pk).started_at == fresh.started_at
    stale = _post(agent_of(run, 1), run.pk, "state", {"attempt": 1, "state": "running"})
    assert stale.status_code == 409
    stranger = APIClient()
    stranger.credentials(HTTP_AUTHORIZATION="Bearer wrong")
    r = _post(stranger, run.pk, "state", {"attempt": 2, "state": "running"})
    assert r.status_code == 401


def test_a_final_report_is_refused_for_a_stranger_another_run_or_a_stale_attempt(running, agent_of):
    run, client = running
    body = {"attempt": 2, "state": "completed", "exit_code": 0}
    stranger = APIClient()
    stranger.credentials(HTTP_AUTHORIZATION="Bearer wrong")
    assert _post(stranger, run.pk, "state", body).status_code == 401
    assert _post(client, "4e1f8a2c-0000-4000-8000-000000000000", "state", body).status_code == 401
    assert _post(client, "not-a-uuid", "state", body).status_code == 401
    stale = _post(agent_of(run, 1), run.pk, "state", {**body, "attempt": 1})
    assert stale.status_code == 409
    assert Run.objects.get(pk=run.pk).state == "running"  # nothing changed
    r = _post(client, run.pk, "state", body)
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
    assert _stored(run) == (0, 0)


def test_columns_are_stored_as_points_are_and_a_nan_in_them_is_a_gap(running):
    """The agent's columnar series ({"x": [...], "y": [...]}) store exactly what the same
    points as [[x, y], …] store; a NaN in a column is a gap that stops the run as diverged."""
    run, client = running
    columns = {"residual.Ux": {"x": [1, 2], "y": [0.5, 0.25]}, "f.Cl": {"x": [1], "y": [3]}}
    with CaptureQueriesContext(connection) as queries:
        r = _telemetry(client, run.pk, series=columns)
    assert r.status_code == 200 and len(queries) == 1
    assert series_values(run=run, attempt=2, name="residual.Ux") == ([1.0, 2.0], [0.5, 0.25])
    assert series_values(run=run, attempt=2, name="f.Cl") == ([1.0], [3.0])
    r = _telemetry(client, run.pk, series={"residual.p": {"x": [3, 4], "y": [1.0, "NaN"]}})
    assert r.status_code == 200 and r.json()["stop"] is True
    assert series_values(run=run, attempt=2, name="residual.p") == ([3.0, 4.0], [1.0, None])
    run.refresh_from_db()
    assert run.state == "failed" and run.end_reason == "diverged"


def _final(client, run_id, *, attempt=2, state="completed", **batch):
    body = {"attempt": attempt, "state": state, "exit_code": 0 if state == "completed" else 1}
    return _post(client, run_id, "state", {**body, **batch})


def test_a_final_report_carries_the_last_batch_its_objectives_read_and_a_repeat_is_refused(
    running,
):
    """The agent's last telemetry batch rides with its final report (one request less per
    run): the points are stored before the objectives are computed from them, and a repeated
    report (its answer was lost on the way, or someone else holds the token) is refused and
    changes nothing."""
    run, client = running
    assert _telemetry(client, run.pk, series={"returnFlow.min(Ux)": [[1, -0.1]]}).status_code == 200
    batch = {
        "series": {"returnFlow.min(Ux)": {"x": [2, 3], "y": [-0.2, -0.25]}, **POINTS},
        "log": ["Time = 3", "End"],
    }
    r = _final(client, run.pk, **batch)
    assert r.status_code == 200, r.content
    fresh = Run.objects.get(pk=run.pk)
    assert fresh.state == "completed" and fresh.results_at is not None
    assert fresh.objectives["u_min"] == -0.25  # the cavity template's last min(Ux)
    assert series_values(run=run, attempt=2, name="returnFlow.min(Ux)") == (
        [1.0, 2.0, 3.0],
        [-0.1, -0.2, -0.25],
    )
    assert list(LogChunk.objects.get(run=run).lines) == ["Time = 3", "End"]
    stored = _stored(run)
    again = _final(client, run.pk, **batch, iterations=7, solver_converged=True)  # the repeat
    assert again.status_code == 409 and again.json()["code"] == "run_ended"
    assert _stored(run) == stored
    after = Run.objects.get(pk=run.pk)
    assert (after.objectives, after.iterations, after.trust_detail, after.results_at) == (
        fresh.objectives,
        fresh.iterations,
        fresh.trust_detail,
        fresh.results_at,
    )


@pytest.mark.parametrize(("kind", "released"), [("local", True), ("slurm", False)])
def test_a_final_report_gives_the_cores_back_before_it_stores_and_computes(
    running, kind, released, django_capture_on_commit_callbacks
):
    """On the portal's own cores the final report releases them first (the next run is
    scheduled at once); a Slurm job's allocation ends with the job."""
    run, client = running
    backend, _ = Backend.objects.update_or_create(
        name=f"final-{kind}", defaults={"kind": kind, "cores": 64, "memory_gb": 256}
    )
    Run.objects.filter(pk=run.pk).update(backend=backend)
    with CaptureQueriesContext(connection) as queries:
        r = _final(client, run.pk, series=POINTS)
    assert r.status_code == 200, r.content
    fresh = Run.objects.get(pk=run.pk)
    assert (fresh.released_at is not None) is released
    statements = [q["sql"] for q in queries.captured_queries]
    release = next(i for i, sql in enumerate(statements) if "released_at = now()" in sql)
    store = next(i for i, sql in enumerate(statements) if "telemetry_serieschunk" in sql)
    assert release < store


def test_the_last_batch_of_a_run_the_portal_ended_is_kept_once(running):
    run, client = running
    Run.objects.filter(pk=run.pk).update(state="cancelled", finished_at=timezone.now())
    r = _final(client, run.pk, state="cancelled", series=POINTS, log=["stopped"])
    assert r.status_code == 200, r.content
    assert _stored(run) == (2, 1)
    fresh = Run.objects.get(pk=run.pk)
    assert fresh.state == "cancelled" and fresh.results_at is not None
    _final(client, run.pk, state="cancelled", series=POINTS, log=["stopped"])
    assert _stored(run) == (2, 1)


def test_a_final_report_with_a_bad_batch_is_a_400_and_changes_nothing(running):
    run, client = running
    local, _ = Backend.objects.update_or_create(
        name="final-local", defaults={"kind": "local", "cores": 64, "memory_gb": 256}
    )
    Run.objects.filter(pk=run.pk).update(backend=local)
    r = _final(client, run.pk, series={"residual.Ux": [[1, "high"]]})
    assert r.status_code == 400 and "residual.Ux: non-numeric point" in str(r.json())
    r = _final(client, run.pk, series=POINTS, log=["a\x00b"])
    assert r.status_code == 400 and "NUL" in str(r.json())
    fresh = Run.objects.get(pk=run.pk)
    assert fresh.state == "running" and fresh.released_at is None  # no cores given back
    assert _stored(run) == (0, 0)
    stranger = APIClient()
    stranger.credentials(HTTP_AUTHORIZATION="Bearer wrong")
    assert _final(stranger, run.pk, series=POINTS).status_code == 401
    assert _stored(run) == (0, 0)


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
    r = _telemetry(client, run.pk, series=series)
    assert r.status_code == 200, r.content
    assert series_values(run=run, attempt=2, name="residual.Ux") == ([1.0, 2.0], [0.5, 0.25])
    mixed = {"f.Cl": {"x": [3], "y": _packed([1.5])}}  # one packed, one a list: fine
    assert _telemetry(client, run.pk, series=mixed).status_code == 200
    assert series_values(run=run, attempt=2, name="f.Cl") == ([3.0], [1.5])
    nan = {"residual.p": {"x": _packed([3, 4]), "y": _packed([1.0, float("nan")])}}
    r = _telemetry(client, run.pk, series=nan)
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
    r = _telemetry(client, run.pk, series={"residual.Ux": {"x": _packed([1.0]), "y": column}})
    assert r.status_code == 400 and needle in str(r.json()), r.json()
    assert _stored(run) == (0, 0)


def test_a_packed_batch_over_the_point_limit_is_refused_before_it_is_decoded(running):
    run, client = running
    big = _packed([0.0] * (MAX_POINTS_PER_BATCH + 1))
    r = _telemetry(client, run.pk, series={"residual.Ux": {"x": big, "y": big}})
    assert r.status_code == 400 and "at most 200000 points per batch" in str(r.json())


def test_a_run_no_longer_says_it_is_queued_once_it_runs_or_ends(running):
    """A Slurm job that waited says so ('queued'); its agent's reports clear that."""
    run, client = running
    Run.objects.filter(pk=run.pk).update(
        state="provisioning", started_at=None, phase="queued", message="queued on slurm: Resources"
    )
    assert _post(client, run.pk, "state", {"attempt": 2, "state": "running"}).status_code == 200
    fresh = Run.objects.get(pk=run.pk)
    assert (fresh.phase, fresh.message) == ("", "")
    Run.objects.filter(pk=run.pk).update(phase="queued")
    assert _final(client, run.pk).status_code == 200
    fresh = Run.objects.get(pk=run.pk)
    assert (fresh.state, fresh.phase) == ("completed", "")


def test_a_retried_run_waiting_in_its_backends_queue_still_says_how_the_last_attempt_ended(
    running,
):
    """The reaper's 'queued on …' status goes on the first line; the earlier attempt's end
    stays below it across passes, and is all that is left once the run starts."""
    run, client = running
    Run.objects.filter(pk=run.pk).update(
        state="provisioning", started_at=None, phase="", message="Slurm: NODE_FAIL (node failure)"
    )
    run = Run.objects.get(pk=run.pk)
    first = queued_message(run, "queued on slurm: Priority")
    assert first == "queued on slurm: Priority\nattempt 1 ended: Slurm: NODE_FAIL (node failure)"
    run.phase, run.message = "queued", first
    again = queued_message(run, "queued on slurm: Resources")
    assert again == "queued on slurm: Resources\nattempt 1 ended: Slurm: NODE_FAIL (node failure)"
    Run.objects.filter(pk=run.pk).update(phase="queued", message=again)
    assert _post(client, run.pk, "state", {"attempt": 2, "state": "running"}).status_code == 200
    fresh = Run.objects.get(pk=run.pk)
    assert (fresh.phase, fresh.message) == ("", "attempt 1 ended: Slurm: NODE_FAIL (node failure)")


def test_the_solvers_own_count_of_steps_wins_over_the_points_stored(running):
    """An agent that had to thin out points of a very fast solver still knows how many steps
    it ran: the run's iterations and last time are the solver's, not the points'."""
    run, client = running
    r = _final(
        client,
        run.pk,
        series={"residual.p": [[1, 0.5], [2, 0.25]]},
        iterations=100_000,
        last_time=50.0,
    )
    assert r.status_code == 200, r.content
    run.refresh_from_db()
    assert (run.iterations, run.last_time) == (100_000, 50.0)
    assert _final(client, run.pk, iterations=-1).status_code == 400  # a count is ≥ 0


@pytest.mark.parametrize("batches", [1, 30])
def test_a_downsampled_series_starts_and_ends_where_the_run_did(running, batches):
    """However few points are asked for, through the points (one chunk) or the chunks'
    extremes (many), the first and the last point are in the answer."""
    run, client = running
    xs = [i * 0.01 for i in range(1, 61)]
    ys = [math.sin(x * 40) for x in xs]  # extremes inside, never at the ends
    per = len(xs) // batches
    for b in range(batches):
        part = list(zip(xs[b * per : (b + 1) * per], ys[b * per : (b + 1) * per], strict=True))
        assert (
            _telemetry(client, run.pk, series={"f.s": [list(p) for p in part]}).status_code == 200
        )
    got = series_read(run=Run.objects.get(pk=run.pk), attempt=2, names=["f.s"], max_points=4)
    series = got["f.s"]
    assert series["x"][0] == pytest.approx(xs[0]) and series["x"][-1] == pytest.approx(xs[-1])
    assert series["y"][-1] == pytest.approx(ys[-1])
    assert series["x"] == sorted(series["x"]) and series["points"] == 60


def test_a_run_that_failed_early_has_no_trust_flag_and_says_which_series_it_lacks(
    make_tenant, catalog
):
    """A failed run is failed, not also "not converged"; an objective on a residual the run
    never sent says so (not "no function-object series")."""
    Backend.objects.update_or_create(
        name="noop", defaults={"kind": "noop", "cores": 64, "memory_gb": 256, "max_nodes": 1}
    )
    tenant = make_tenant()
    spec = {
        "name": "failed early",
        "template": "cavity",
        "backend": "noop",
        "objectives": {
            "p_res": {"series": "residual.p", "reduce": "last"},
            "speed": {"series": "meanSpeed.volAverage(mag(U))", "reduce": "last"},
        },
    }
    study = study_create(tenant=tenant, owner=tenant.user, spec=spec, submit=True)
    run = Run.objects.get(study=study)
    token = secrets.token_urlsafe(16)
    Run.objects.filter(pk=run.pk).update(
        state="running", attempt=1, token_hash=hash_run_token(token), started_at=timezone.now()
    )
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    r = client.post(
        f"/api/v1/ingest/runs/{run.pk}/state/",
        {
            "attempt": 1,
            "state": "failed",
            "exit_code": 1,
            "reason": "exit_code",
            "series": {
                "meanSpeed.volAverage(mag(U))": [[1, 0.5]],
                "cpu.percent": [[0.5, 40.0], [1.0, 88.5]],
                "memory.rss": [[1.0, 123_456_789.0]],
            },
        },
        format="json",
    )
    assert r.status_code == 200, r.content
    run.refresh_from_db()
    assert run.state == "failed" and run.trust == ""
    # a run this short reports its CPU and memory in its final batch only: they are kept
    assert (run.cpu_percent, run.rss_bytes) == (88.5, 123_456_789)
    assert run.objectives == {"p_res": None, "speed": 0.5}
    assert run.trust_detail["objective_errors"] == {
        "p_res": "no series named residual.p: the run sent no residuals"
    }


# --- a batch sent again (its answer lost on the way) is stored once -------------------------


def _numbered(client, run_id, seq, *, attempt=2, series=None, log=None, **fields):
    body = {"attempt": attempt, "batch_seq": seq, "series": series or {}, "log": log or []}
    return client.post(
        f"/api/v1/ingest/runs/{run_id}/telemetry/", {**body, **fields}, format="json"
    )


def test_a_batch_sent_again_is_acknowledged_and_stored_once(running):
    run, client = running
    first = _numbered(client, run.pk, 1, series=POINTS, log=["Time = 1", "Time = 2"])
    assert first.status_code == 200 and "duplicate" not in first.json()
    again = _numbered(client, run.pk, 1, series=POINTS, log=["Time = 1", "Time = 2"], phase="x")
    assert again.status_code == 200, again.content
    assert again.json()["duplicate"] is True and again.json()["stop"] is False
    assert _stored(run) == (2, 1)
    assert series_values(run=run, attempt=2, name="residual.Ux") == ([1.0, 2.0], [0.5, 0.25])
    assert Run.objects.get(pk=run.pk).phase == "x"  # still the agent's sign of life
    # the next batch is stored; an older number than the highest stored is not, whatever it
    # holds (the agent sends its batches one after the other)
    assert "duplicate" not in _numbered(client, run.pk, 2, log=["Time = 3"]).json()
    assert _numbered(client, run.pk, 1, log=["Time = 4"]).json()["duplicate"] is True
    assert [list(c.lines) for c in LogChunk.objects.filter(run=run).order_by("seq")] == [
        ["Time = 1", "Time = 2"],
        ["Time = 3"],
    ]


def test_batches_without_a_number_are_stored_as_they_come(running):
    """An agent before batch numbers: every batch it sends is stored, as before."""
    run, client = running
    for _ in range(2):
        assert _telemetry(client, run.pk, log=["Time = 1"]).json() == {
            "stop": False,
            "interval": interval_for(watched=False),
        }
    assert _stored(run) == (0, 2)


def test_a_final_report_carrying_a_batch_stored_already_ends_the_run_and_stores_it_once(
    running,
):
    """The last batch went as a telemetry batch whose answer was lost; the final report
    carries it again, with its number: the run ends, its points are stored once."""
    run, client = running
    series = {"returnFlow.min(Ux)": [[1, -0.1], [2, -0.2]]}
    assert _numbered(client, run.pk, 3, series=series, log=["End"]).status_code == 200
    r = _final(client, run.pk, batch_seq=3, series=series, log=["End"])
    assert r.status_code == 200 and r.json() == {"stop": False, "duplicate": True}
    fresh = Run.objects.get(pk=run.pk)
    assert fresh.state == "completed" and fresh.objectives["u_min"] == -0.2
    assert series_values(run=run, attempt=2, name="returnFlow.min(Ux)") == (
        [1.0, 2.0],
        [-0.1, -0.2],
    )
    assert _stored(run) == (1, 1)


def test_a_new_attempt_numbers_its_batches_afresh(running, agent_of):
    run, client = running
    assert _numbered(client, run.pk, 7, log=["attempt 2"]).status_code == 200
    Run.objects.filter(pk=run.pk).update(state="admitted")
    (claimed,), _ = transitions.runs_claim(run_ids=[run.pk])
    assert claimed.attempt == 3
    r = _numbered(agent_of(run, 3), run.pk, 1, attempt=3, log=["attempt 3"])
    assert r.status_code == 200 and "duplicate" not in r.json()
    assert LogChunk.objects.filter(run=run, attempt=3).count() == 1
