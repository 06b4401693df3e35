"""The reaper: silent agents, lost starts, studies whose refresh was lost."""

from __future__ import annotations

from core import jobs
from core.jobs import Job
from dispatch.reaper import runs_reap
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
