"""Every change of a run's state (studies.transitions): fenced by state and attempt, and
published live in the same step. Each test makes the change once as it should happen, then
again as a stale worker or agent would (an old attempt, a state already left): the second
changes nothing and publishes nothing."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from catalog.models import Backend
from core.jobs import Job
from quotas.models import Quota
from studies import transitions
from studies.models import Run
from studies.services import study_create
from studies.tasks import publish_runs
from studies.transitions import effects


@pytest.fixture
def study(api, settings):
    settings.WINDTUNNEL = {**settings.WINDTUNNEL, "STOP_GRACE": 7.0}
    return study_create(
        tenant=api.tenant,
        owner=api.tenant.user,
        spec={
            "name": "t",
            "template": "cavity",
            "parameters": {"lid_velocity": {"values": [1, 2, 3]}},
        },
        submit=True,
    )


def _runs(study) -> list[Run]:
    return list(Run.objects.filter(study=study).order_by("index"))


def _put(run: Run, **fields: Any) -> Run:
    """Set a run up in a state, as earlier steps would have left it (not a transition)."""
    Run.objects.filter(pk=run.pk).update(**fields)
    run.refresh_from_db()
    return run


def _started(run: Run, state: str = "running", **fields: Any) -> Run:
    now = timezone.now()
    started = {
        "state": state,
        "attempt": 1,
        "handle": "4194304:1.0",
        "admitted_at": now,
        "provisioning_at": now,
        "started_at": now if state == "running" else None,
        "heartbeat_at": now,
    }
    return _put(run, **{**started, **fields})


def test_admit_takes_pending_runs_only(study, published) -> None:
    first, second, _ = _runs(study)
    _put(second, state="cancelled")
    assert transitions.runs_admit(run_ids=[first.pk, second.pk]) == 1
    assert Run.objects.get(pk=first.pk).state == "admitted"
    assert Run.objects.get(pk=second.pk).state == "cancelled"  # fenced: not pending
    assert [s for s, _ in published.states(first)] == ["admitted"]


def test_claim_starts_a_new_attempt_with_a_fresh_token_once(study, published) -> None:
    run = _put(_runs(study)[0], state="admitted")
    claimed, tokens = transitions.runs_claim(run_ids=[run.pk])
    assert [r.pk for r in claimed] == [run.pk]
    fresh = Run.objects.get(pk=run.pk)
    assert (fresh.state, fresh.attempt) == ("provisioning", 1)
    assert fresh.token_hash == transitions.hash_run_token(tokens[run.pk])
    again, _ = transitions.runs_claim(run_ids=[run.pk])  # a redelivered dispatch task
    assert again == [] and Run.objects.get(pk=run.pk).attempt == 1
    assert [s for s, _ in published.states(run)] == ["provisioning"]
    # the claim took the event's seq with the change: its event carries it, none is skipped
    assert published.states(run)[0][1] == fresh.event_seq == run.event_seq + 1


def test_each_attempts_token_is_its_own_and_still_recognised_once_it_is_over(
    study, published
) -> None:
    """The token is derived from the run and the attempt (run_token): the ingest API can
    tell the agent of an attempt that is over (409: stop) from a stranger (401)."""
    first_run, second_run, _ = _runs(study)
    run = _put(first_run, state="admitted")
    _, tokens = transitions.runs_claim(run_ids=[run.pk])
    first = tokens[run.pk]
    _put(run, state="admitted")  # requeued
    _, tokens = transitions.runs_claim(run_ids=[run.pk])
    second = tokens[run.pk]
    assert second != first
    assert Run.objects.get(pk=run.pk).token_hash == transitions.hash_run_token(second)
    assert transitions.run_token_is_of(first, run_id=run.pk, attempt=1)
    assert transitions.run_token_is_of(second, run_id=run.pk, attempt=2)
    assert not transitions.run_token_is_of(first, run_id=run.pk, attempt=2)
    assert not transitions.run_token_is_of(first, run_id=second_run.pk, attempt=1)
    assert not transitions.run_token_is_of("a guess", run_id=run.pk, attempt=1)


def test_handles_are_stored_only_for_the_attempt_that_started(study, published) -> None:
    run = _started(_runs(study)[0], state="provisioning", handle="")
    assert transitions.runs_record_handles(rows=[(str(run.pk), 0, "old", "")]) == set()
    assert transitions.runs_record_handles(rows=[(str(run.pk), 1, "h-1", "/d")]) == {str(run.pk)}
    fresh = Run.objects.get(pk=run.pk)
    assert (fresh.handle, fresh.results_dir) == ("h-1", "/d")


def test_the_running_report_is_fenced_by_attempt_state_and_token(study, published) -> None:
    run = _started(_runs(study)[0], state="provisioning", token_hash="abc")
    assert transitions.run_report_running(run_id=run.pk, attempt=2, token_hash="abc") is None
    assert transitions.run_report_running(run_id=run.pk, attempt=1, token_hash="xyz") is None
    assert transitions.run_report_running(run_id=run.pk, attempt=1, token_hash="abc") is False
    assert Run.objects.get(pk=run.pk).state == "running"
    assert transitions.run_report_running(run_id=run.pk, attempt=1, token_hash="abc") is None
    assert [s for s, _ in published.states(run)] == ["running"]
    assert Job.REFRESH_STUDY in published.job_names()  # the study's first run started


def test_end_is_fenced_and_publishes_with_a_higher_seq(study, published) -> None:
    run = _started(_runs(study)[0])
    stale = Run.objects.get(pk=run.pk)
    stale.attempt = 0
    assert not transitions.run_end(run=stale, state="completed", end_reason="success")
    assert published.states(run) == []
    results = {"objectives": {"Cl": 1.5}, "iterations": 7, "trust": "converged"}
    assert transitions.run_end(
        run=run, state="completed", end_reason="success", message="ok", results=results
    )
    fresh = Run.objects.get(pk=run.pk)
    assert (fresh.state, fresh.objectives, fresh.iterations) == ("completed", {"Cl": 1.5}, 7)
    assert fresh.results_at is not None and fresh.finished_at is not None
    assert not transitions.run_end(run=run, state="failed", end_reason="exit_code")  # over
    ((state, seq),) = published.states(run)
    assert state == "completed" and seq == Run.objects.get(pk=run.pk).event_seq > fresh.event_seq
    assert Job.SCHEDULE_TENANT in published.job_names()  # its cores go to the next run


def test_a_policy_stop_ends_the_run_and_kills_it_after_the_grace(study, published) -> None:
    run = _started(_runs(study)[0])
    stale = Run.objects.get(pk=run.pk)
    stale.attempt = 5
    assert not transitions.run_stop_by_policy(run=stale, outcome="diverged", detail="NaN")
    assert transitions.run_stop_by_policy(run=run, outcome="diverged", detail="p became NaN")
    fresh = Run.objects.get(pk=run.pk)
    assert (fresh.state, fresh.end_reason, fresh.stop_requested) == ("failed", "diverged", True)
    assert [s for s, _ in published.states(run)] == ["failed"]
    kill = [(a, kw) for job, a, kw in published.jobs if job == Job.KILL_RUN]
    assert kill == [((str(run.pk), 1, run.handle), {"countdown": 7.0})]


def test_cancel_ends_a_queued_run_once(study, published) -> None:
    run = _runs(study)[0]
    assert transitions.run_cancel(run=run, by=None)
    assert not transitions.run_cancel(run=run, by=None)  # ended already
    fresh = Run.objects.get(pk=run.pk)
    assert (fresh.state, fresh.end_reason) == ("cancelled", "cancelled_by_user")
    assert [s for s, _ in published.states(run)] == ["cancelled"]
    assert Job.KILL_RUN not in published.job_names()  # nothing started: nothing to kill


def test_cancelling_a_study_cancels_its_active_runs_in_one_step(study, published) -> None:
    queued, running, done = _runs(study)
    _started(running)
    _put(done, state="completed")
    assert transitions.runs_cancel_for_study(study=study) == 2
    assert {r.pk: r.state for r in _runs(study)} == {
        queued.pk: "cancelled",
        running.pk: "cancelled",
        done.pk: "completed",
    }
    assert [s for s, _ in published.states(queued)] == ["cancelled"]
    assert [s for s, _ in published.states(running)] == ["cancelled"]
    assert published.states(done) == []
    kills = [(a, kw) for job, a, kw in published.jobs if job == Job.KILL_RUN]
    assert kills == [((str(running.pk), 1, running.handle), {"countdown": 7.0})]
    assert transitions.runs_cancel_for_study(study=study) == 0


def test_requeue_and_fail_are_fenced_by_attempt(study, published) -> None:
    first, second, _ = _runs(study)
    _started(first)
    _started(second)
    stale = Run.objects.get(pk=first.pk)
    stale.attempt = 0
    assert not transitions.run_requeue(run=stale, message="agent lost")
    assert transitions.run_requeue(run=first, message="agent lost")
    fresh = Run.objects.get(pk=first.pk)
    assert (fresh.state, fresh.wait_reason, fresh.handle) == ("pending", "retry", "")
    assert fresh.wait_detail == "attempt 1 ended: agent lost"
    assert transitions.run_fail(run=second, reason="agent_lost", message="no heartbeat")
    assert not transitions.run_fail(run=second, reason="agent_lost", message="again")
    assert Run.objects.get(pk=second.pk).state == "failed"
    assert [s for s, _ in published.states(first)] == ["pending"]
    assert [s for s, _ in published.states(second)] == ["failed"]


def test_dispatch_later_waits_with_backoff_and_schedules_the_tenant_then(study, published) -> None:
    run = _started(_runs(study)[0], state="provisioning")
    assert transitions.run_dispatch_later(run=run, message="slurmctld down", tries=2, delay=10)
    fresh = Run.objects.get(pk=run.pk)
    assert (fresh.state, fresh.dispatch_failures, fresh.wait_reason) == ("pending", 2, "retry")
    assert fresh.retry_at is not None
    assert not transitions.run_dispatch_later(run=run, message="again", tries=3, delay=20)
    assert [s for s, _ in published.states(run)] == ["pending"]
    schedule = [(a, kw) for job, a, kw in published.jobs if job == Job.SCHEDULE_TENANT]
    assert ((run.tenant_id,), {"countdown": 10}) in schedule


def test_the_release_of_a_cloud_server_follows_the_end_of_its_run(api, published) -> None:
    Backend.objects.create(name="cloud", kind="openstack", cores=8, memory_gb=16, max_nodes=2)
    study = study_create(
        tenant=api.tenant,
        owner=api.tenant.user,
        spec={"name": "vm", "template": "cavity", "backend": "cloud"},
        submit=True,
    )
    run = _started(_runs(study)[0], handle="server:abc")
    assert transitions.run_end(run=run, state="completed", end_reason="success")
    release = [a for job, a, _ in published.jobs if job == Job.RELEASE_RUN]
    assert release == [(str(run.pk), 1, "server:abc")]


def test_a_large_cancel_answers_with_the_studys_counts_and_leaves_each_runs_event_to_the_worker(
    api, published, monkeypatch
) -> None:
    # "large" at a tenth of the real thresholds (500 runs inline, chunks of 2,000): the same
    # paths, past the inline limit and over several chunks, with 250 runs instead of 2,500
    monkeypatch.setattr(effects, "PUBLISH_INLINE", 50)
    monkeypatch.setattr(effects, "PUBLISH_CHUNK", 100)
    Quota.objects.filter(tenant=api.tenant).update(max_queued_runs=5000)
    big = study_create(
        tenant=api.tenant,
        owner=api.tenant.user,
        spec={
            "name": "big",
            "template": "cavity",
            "parameters": {"lid_velocity": {"linspace": [0.5, 2.0, 250]}},
        },
        submit=True,
    )
    runs = _runs(big)
    assert len(runs) == 250
    published.messages.clear()
    published.jobs.clear()
    assert transitions.runs_cancel_for_study(study=big) == 250
    # in the request: the study's own event, with its counts, and no event per run
    study_events = [m for _, m in published.messages if m.get("type") == "study"]
    assert [m["progress"] for m in study_events] == [{"cancelled": 250}]
    assert not [m for _, m in published.messages if m.get("type") == "state"]
    chunks = [a[0] for job, a, _ in published.jobs if job == Job.PUBLISH_RUNS]
    assert sorted(i for chunk in chunks for i in chunk) == sorted(str(r.pk) for r in runs)
    assert len(chunks) == 3 and max(len(c) for c in chunks) <= transitions.PUBLISH_CHUNK
    # the worker's jobs: every run's own `state` event
    for chunk in chunks:
        publish_runs(chunk)
    assert all([s for s, _ in published.states(r)] == ["cancelled"] for r in runs)
