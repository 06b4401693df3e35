"""A run's final report through the ingest API: the last batch it carries, the objectives,
iterations and trust flag computed from everything stored, the cores given back, and what a
run says of its queue once it ran or ended.
"""

import math
import secrets

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from catalog.models import Backend
from dispatch.reaper import queued_message
from ingest.tests.reports import POINTS, send_final, send_report, send_telemetry, stored_counts
from studies.models import Run, Study
from studies.objectives import objectives_resolve
from studies.services import study_create
from studies.transitions import hash_run_token
from telemetry.models import LogChunk
from telemetry.selectors import series_read, series_values


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
        assert send_telemetry(client, run.pk, attempt=1, series=series).status_code == 200
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


def test_a_final_report_carries_the_last_batch_its_objectives_read_and_a_repeat_is_refused(
    running,
):
    """The agent's last telemetry batch rides with its final report (one request less per
    run): the points are stored before the objectives are computed from them, and a repeated
    report (its answer was lost on the way, or someone else holds the token) is refused and
    changes nothing."""
    run, client = running
    assert (
        send_telemetry(client, run.pk, series={"returnFlow.min(Ux)": [[1, -0.1]]}).status_code
        == 200
    )
    batch = {
        "series": {"returnFlow.min(Ux)": {"x": [2, 3], "y": [-0.2, -0.25]}, **POINTS},
        "log": ["Time = 3", "End"],
    }
    r = send_final(client, run.pk, **batch)
    assert r.status_code == 200, r.content
    fresh = Run.objects.get(pk=run.pk)
    assert fresh.state == "completed" and fresh.results_at is not None
    assert fresh.objectives["u_min"] == -0.25  # the cavity template's last min(Ux)
    assert series_values(run=run, attempt=2, name="returnFlow.min(Ux)") == (
        [1.0, 2.0, 3.0],
        [-0.1, -0.2, -0.25],
    )
    assert list(LogChunk.objects.get(run=run).lines) == ["Time = 3", "End"]
    stored = stored_counts(run)
    again = send_final(client, run.pk, **batch, iterations=7, solver_converged=True)  # the repeat
    assert again.status_code == 409 and again.json()["code"] == "run_ended"
    assert stored_counts(run) == stored
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
        r = send_final(client, run.pk, series=POINTS)
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
    r = send_final(client, run.pk, state="cancelled", series=POINTS, log=["stopped"])
    assert r.status_code == 200, r.content
    assert stored_counts(run) == (2, 1)
    fresh = Run.objects.get(pk=run.pk)
    assert fresh.state == "cancelled" and fresh.results_at is not None
    send_final(client, run.pk, state="cancelled", series=POINTS, log=["stopped"])
    assert stored_counts(run) == (2, 1)


def test_a_final_report_with_a_bad_batch_is_a_400_and_changes_nothing(running):
    run, client = running
    local, _ = Backend.objects.update_or_create(
        name="final-local", defaults={"kind": "local", "cores": 64, "memory_gb": 256}
    )
    Run.objects.filter(pk=run.pk).update(backend=local)
    r = send_final(client, run.pk, series={"residual.Ux": [[1, "high"]]})
    assert r.status_code == 400 and "residual.Ux: non-numeric point" in str(r.json())
    r = send_final(client, run.pk, series=POINTS, log=["a\x00b"])
    assert r.status_code == 400 and "NUL" in str(r.json())
    fresh = Run.objects.get(pk=run.pk)
    assert fresh.state == "running" and fresh.released_at is None  # no cores given back
    assert stored_counts(run) == (0, 0)
    stranger = APIClient()
    stranger.credentials(HTTP_AUTHORIZATION="Bearer wrong")
    assert send_final(stranger, run.pk, series=POINTS).status_code == 401
    assert stored_counts(run) == (0, 0)


def test_a_run_no_longer_says_it_is_queued_once_it_runs_or_ends(running):
    """A Slurm job that waited says so ('queued'); its agent's reports clear that."""
    run, client = running
    Run.objects.filter(pk=run.pk).update(
        state="provisioning", started_at=None, phase="queued", message="queued on slurm: Resources"
    )
    assert (
        send_report(client, run.pk, "state", {"attempt": 2, "state": "running"}).status_code == 200
    )
    fresh = Run.objects.get(pk=run.pk)
    assert (fresh.phase, fresh.message) == ("", "")
    Run.objects.filter(pk=run.pk).update(phase="queued")
    assert send_final(client, run.pk).status_code == 200
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
    assert (
        send_report(client, run.pk, "state", {"attempt": 2, "state": "running"}).status_code == 200
    )
    fresh = Run.objects.get(pk=run.pk)
    assert (fresh.phase, fresh.message) == ("", "attempt 1 ended: Slurm: NODE_FAIL (node failure)")


def test_the_solvers_own_count_of_steps_wins_over_the_points_stored(running):
    """An agent that had to thin out points of a very fast solver still knows how many steps
    it ran: the run's iterations and last time are the solver's, not the points'."""
    run, client = running
    r = send_final(
        client,
        run.pk,
        series={"residual.p": [[1, 0.5], [2, 0.25]]},
        iterations=100_000,
        last_time=50.0,
    )
    assert r.status_code == 200, r.content
    run.refresh_from_db()
    assert (run.iterations, run.last_time) == (100_000, 50.0)
    assert send_final(client, run.pk, iterations=-1).status_code == 400  # a count is ≥ 0


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
            send_telemetry(client, run.pk, series={"f.s": [list(p) for p in part]}).status_code
            == 200
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
    # a failed run has no result: what its series gave is partial, apart
    assert run.objectives == {"p_res": None, "speed": None}
    assert run.partial_objectives == {"speed": 0.5}
    assert run.trust_detail["objective_errors"] == {
        "p_res": "no series named residual.p: the run sent no residuals"
    }


# --- a batch sent again (its answer lost on the way) is stored once -------------------------


def test_the_final_report_keeps_the_runs_peak_memory_and_cpu_time_once(running):
    """What the steps used arrives with the final state and stays the run's: the API shows
    it beside the run's core-hours; a report that repeats cannot change it, and a figure
    that is not one is refused naming the field."""
    run, agent = running
    url = f"/api/v1/ingest/runs/{run.pk}/state/"
    bad = agent.post(
        url, {"attempt": 2, "state": "completed", "peak_memory_bytes": -5}, format="json"
    )
    assert bad.status_code == 400 and "peak_memory_bytes" in bad.json()["field"]
    bad = agent.post(url, {"attempt": 2, "state": "completed", "cpu_seconds": "4 s"}, format="json")
    assert bad.status_code == 400 and "cpu_seconds" in bad.json()["field"]
    assert Run.objects.get(pk=run.pk).state == "running"  # refused: nothing changed

    body = {
        "attempt": 2,
        "state": "completed",
        "peak_memory_bytes": 118_000_000,
        "cpu_seconds": 41.5,
    }
    assert agent.post(url, body, format="json").status_code == 200
    again = agent.post(url, {**body, "peak_memory_bytes": 1, "cpu_seconds": 1.0}, format="json")
    assert again.status_code == 409
    ended = Run.objects.get(pk=run.pk)
    assert (ended.peak_memory_bytes, ended.cpu_seconds) == (118_000_000, 41.5)
    assert ended.finished_at and ended.started_at
    held = (ended.finished_at - ended.started_at).total_seconds() / 3600  # one core
    assert ended.core_hours == pytest.approx(held)


def test_the_live_row_of_an_ended_run_carries_its_resource_figures_as_a_reload_would(
    running, published
):
    """The runs table updates a row from the study's live events: the event of the final
    report carries the run's peak memory, CPU time, core-hours and wall time, the values
    the REST API answers once the run ended (no row keeps a "—" until the page reloads)."""
    run, client = running
    r = send_final(client, run.pk, series=POINTS, peak_memory_bytes=123_456_789, cpu_seconds=4.5)
    assert r.status_code == 200, r.content
    rows = [
        row
        for _, m in published.messages
        if m["type"] == "runs"
        for row in m["runs"]
        if row["id"] == str(run.pk) and row["state"] == "completed"
    ]
    assert rows, published.messages
    row = rows[-1]
    stored = Run.objects.get(pk=run.pk)
    assert row["peak_memory_bytes"] == 123_456_789 == stored.peak_memory_bytes
    assert row["cpu_seconds"] == 4.5 == stored.cpu_seconds
    assert row["wall_seconds"] == pytest.approx(stored.wall_seconds, abs=1e-3)
    assert row["core_hours"] == pytest.approx(stored.core_hours, rel=1e-6)
    assert row["core_hours"] > 0
