"""A run's watchdog as the portal sets and reads it: the stall floor and the wall-time limit
its agent gets (its study's, else its backend's, capped by its backend), the wall time the
portal holds it to, and an agent's `stalled` end as its owner sees it."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from catalog.models import Backend
from dispatch.start import run_watchdog
from ingest.tests.reports import POINTS, send_report, send_telemetry
from studies.models import Run, Study
from studies.policy import wall_seconds_effective


def _set_limits(run: Run, **limits) -> Backend:
    Backend.objects.filter(pk=run.backend_id).update(**limits)
    return Backend.objects.get(pk=run.backend_id)


def _set_convergence(run: Run, convergence: dict) -> Study:
    Study.objects.filter(pk=run.study_id).update(convergence=convergence)
    return Study.objects.get(pk=run.study_id)


@pytest.mark.parametrize(
    ("study", "default", "cap", "expected"),
    [
        (None, None, None, None),  # no limit anywhere
        (None, 3600.0, None, 3600.0),  # the backend's default when the study sets none
        (600.0, 3600.0, None, 600.0),  # the study's own wins over the default
        (7200.0, None, 3600.0, 3600.0),  # … but not over the cap
        (None, None, 3600.0, 3600.0),  # a cap alone is a limit too
    ],
)
def test_a_runs_wall_time_limit_is_its_studys_else_its_backends_default_never_over_the_cap(
    study, default, cap, expected
):
    assert wall_seconds_effective(study=study, default=default, cap=cap) == expected


def test_the_agent_gets_the_backends_limits_unless_the_study_sets_its_own(running, settings):
    run, _ = running
    settings.WINDTUNNEL = {
        **settings.WINDTUNNEL,
        "STALL_SECONDS": 120.0,
        "STALL_FACTOR": 10.0,
        "STALL_STARTUP_SECONDS": 600.0,
    }
    run.backend = _set_limits(run, default_wall_seconds=5400, max_wall_seconds=7200)
    study = _set_convergence(run, {})
    assert run_watchdog(run=run, study=study) == {
        "stall_seconds": 120.0,
        "stall_factor": 10.0,
        "startup_seconds": 600.0,
        "wall_seconds": 5400,
    }
    run.backend = _set_limits(run, stall_seconds=300)
    study = _set_convergence(run, {"max_wall_seconds": 90000, "stall_seconds": 45})
    limits = run_watchdog(run=run, study=study)
    assert (limits["stall_seconds"], limits["wall_seconds"]) == (45, 7200)
    study = _set_convergence(run, {})
    assert run_watchdog(run=run, study=study)["stall_seconds"] == 300


def test_a_backends_default_wall_time_stops_a_run_whose_study_sets_none(running):
    run, client = running
    _set_limits(run, default_wall_seconds=60)
    Run.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(seconds=90))
    r = send_telemetry(client, run.pk, series=POINTS, log=[])
    assert r.status_code == 200, r.content
    assert r.json()["stop"] is True
    fresh = Run.objects.get(pk=run.pk)
    assert (fresh.state, fresh.end_reason) == ("failed", "max_wall_time")
    assert "over the 60 s limit" in fresh.message


def test_a_run_within_its_backends_cap_goes_on(running):
    run, client = running
    _set_limits(run, max_wall_seconds=3600)
    _set_convergence(run, {"max_wall_seconds": 100000})
    Run.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(seconds=90))
    r = send_telemetry(client, run.pk, series=POINTS, log=[])
    assert r.json()["stop"] is False
    assert Run.objects.get(pk=run.pk).state == "running"


def test_an_agents_stalled_end_is_shown_to_the_owner_with_how_long_it_made_no_progress(running):
    run, client = running
    message = "icoFoam made no progress for 121 s (after time step 5; …)"
    body = {"attempt": 2, "state": "failed", "exit_code": -15, "reason": "stalled"}
    r = send_report(client, run.pk, "state", {**body, "message": message})
    assert r.status_code == 200, r.content
    owner = APIClient()
    owner.force_authenticate(run.study.owner)
    shown = owner.get(f"/api/v1/runs/{run.pk}/").json()
    assert (shown["state"], shown["end_reason"]) == ("failed", "stalled")
    assert shown["message"] == message
