"""The reaper: silent agents, lost starts, studies whose refresh was lost."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from catalog.models import Backend
from compute.drivers import RunPhase, RunStatus
from core import jobs
from core.jobs import Job
from dispatch import reaper
from dispatch.reaper import runs_reap
from runs import services as run_services
from runs.services import run_requeue_or_fail
from studies import services, state
from studies.models import Run, Study


def test_the_reaper_settles_a_study_whose_last_refresh_was_lost(api, monkeypatch):
    """A study still shown running with no active run left (its refresh task lost to a
    crash) is refreshed by the periodic reaper; an active study is left alone."""

    def refresh_now(job, *args, **kwargs):
        assert job == Job.REFRESH_STUDY
        state.study_refresh_state(study_id=args[0])

    monkeypatch.setattr(jobs, "send", refresh_now)
    spec = {"template": "cavity", "parameters": {"lid_velocity": {"values": [1, 2]}}}
    done = services.study_create(
        tenant=api.tenant, owner=api.tenant.user, spec={**spec, "name": "done"}, submit=True
    )
    busy = services.study_create(
        tenant=api.tenant, owner=api.tenant.user, spec={**spec, "name": "busy"}, submit=True
    )
    Run.objects.filter(study=done).update(state="completed")
    Run.objects.filter(study=busy).update(state="running")
    Run.objects.filter(study=busy).filter(index=0).update(state="completed")
    empty = services.study_create(
        tenant=api.tenant, owner=api.tenant.user, spec={**spec, "name": "empty"}, submit=True
    )
    Run.objects.filter(study=empty).delete()  # no runs: nothing to derive, every tick
    Study.objects.filter(pk__in=[done.pk, busy.pk, empty.pk]).update(state="running")
    assert runs_reap()["settled"] == 1
    done.refresh_from_db()
    busy.refresh_from_db()
    assert (done.state, busy.state) == ("completed", "running")
    assert done.finished_at is not None


def _running_run(api) -> Run:
    spec = {"name": "silent", "template": "cavity", "parameters": {"lid_velocity": 1}}
    study = services.study_create(tenant=api.tenant, owner=api.tenant.user, spec=spec, submit=True)
    run = Run.objects.get(study=study)
    silent_since = timezone.now() - timedelta(hours=1)
    Run.objects.filter(pk=run.pk).update(
        state="running", attempt=2, handle="job-2", heartbeat_at=silent_since
    )
    return Run.objects.get(pk=run.pk)


def test_a_silent_run_requeued_and_admitted_again_since_the_reaper_looked_stays_admitted(api):
    """A pass of the reaper that judged a run lost a minute ago (its backend slow to answer)
    must not requeue it again once another pass did and the scheduler admitted it: the run
    keeps its attempt until it starts, so only the state it was seen in tells them apart."""
    seen = _running_run(api)
    assert run_requeue_or_fail(run=seen, reason="agent_lost", message="lost", as_seen=True)
    Run.objects.filter(pk=seen.pk).update(state="admitted", wait_reason="")  # admitted again
    stale = Run.objects.get(pk=seen.pk)
    stale.state, stale.heartbeat_at = seen.state, seen.heartbeat_at  # the slow pass's reading
    assert run_requeue_or_fail(run=stale, reason="agent_lost", message="lost", as_seen=True) == ""
    run = Run.objects.get(pk=seen.pk)
    assert (run.state, run.attempt, run.wait_reason) == ("admitted", 2, "")


def test_a_run_whose_agent_spoke_since_the_reaper_looked_is_not_requeued(api):
    seen = _running_run(api)
    Run.objects.filter(pk=seen.pk).update(heartbeat_at=timezone.now())  # a late heartbeat
    assert run_requeue_or_fail(run=seen, reason="agent_lost", message="lost", as_seen=True) == ""
    assert Run.objects.get(pk=seen.pk).state == "running"
    # without the fence (a caller that just read the run) the same call ends the attempt
    fresh = Run.objects.get(pk=seen.pk)
    assert run_requeue_or_fail(run=fresh, reason="agent_lost", message="lost") == "pending"


class _Slurm:
    """What a Slurm backend's poll says of the job (and what the reaper asked to cancel)."""

    def __init__(self, status):
        self.status, self.cancelled = status, []

    def poll(self, handle):
        return self.status

    def cancel(self, handle, *, grace=10.0):
        self.cancelled.append(handle)


def _provisioning_on_slurm(api, *, dispatched_ago: float) -> Run:
    """A run dispatched to a Slurm backend `dispatched_ago` seconds ago whose agent never spoke."""
    backend = Backend.objects.update_or_create(
        name="hpc-reaped", defaults={"kind": "slurm", "cores": 8, "memory_gb": 16, "max_nodes": 2}
    )[0]
    spec = {"name": "launch", "template": "cavity", "parameters": {"lid_velocity": 1}}
    study = services.study_create(tenant=api.tenant, owner=api.tenant.user, spec=spec, submit=True)
    then = timezone.now() - timedelta(seconds=dispatched_ago)
    Run.objects.filter(study=study).update(
        state="provisioning",
        attempt=2,
        handle="305",
        backend=backend,
        provisioning_at=then,
        updated_at=then,
        heartbeat_at=None,
        phase="",
    )
    return Run.objects.get(study=study)


@pytest.mark.parametrize(
    ("settling", "requeued"), [(True, False), (False, True)], ids=["completing", "running"]
)
def test_a_job_slurm_is_still_ending_or_requeueing_is_not_an_agent_lost(
    api, monkeypatch, settling, requeued
):
    """A job whose node failed at launch shows COMPLETING while Slurm requeues it onto another
    node (which may have to boot): its agent has not started, and is not lost for it. A job
    that runs and whose agent stays silent past the allowance is."""
    run = _provisioning_on_slurm(api, dispatched_ago=30)  # past 3 × the 8 s test allowance
    slurm = _Slurm(
        RunStatus(phase=RunPhase.RUNNING, reason="Slurm: COMPLETING (None)", settling=settling)
    )
    monkeypatch.setattr(reaper, "driver_for", lambda backend: slurm)
    monkeypatch.setattr(run_services, "driver_for", lambda backend: slurm)
    assert runs_reap()["requeued"] == int(requeued)
    after = Run.objects.get(pk=run.pk)
    assert (after.state, after.attempt) == (("pending", 2) if requeued else ("provisioning", 2))
    assert slurm.cancelled == (["305"] if requeued else [])
