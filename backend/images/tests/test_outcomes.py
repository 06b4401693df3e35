"""What a build's end means for the runs that wait for its image."""

from __future__ import annotations

from typing import Any

from catalog.models import Image
from core.jobs import Job
from images.outcomes import fail
from studies.models import Run
from studies.services import study_create


def _runs(study) -> list[Run]:
    return list(Run.objects.filter(study=study).order_by("index"))


def _put(run: Run, **fields: Any) -> Run:
    Run.objects.filter(pk=run.pk).update(**fields)
    run.refresh_from_db()
    return run


def test_a_failed_image_build_fails_its_waiting_runs_fenced_and_live(
    api, containers, published
) -> None:
    """The image's build failed: its study's queued runs fail through their transition (an
    open page sees it), a run that already left the queue is not touched."""
    study = study_create(
        tenant=api.tenant,
        owner=api.tenant.user,
        spec={
            "name": "img",
            "template": "cavity",
            "backend": containers.name,
            "parameters": {"lid_velocity": {"values": [1, 2]}},
        },
        submit=True,
    )
    study.refresh_from_db()
    assert isinstance(study.image, Image)
    queued, gone = _runs(study)
    _put(gone, state="cancelled")
    fail(study.image, "the recipe failed\nmore")
    fresh = Run.objects.get(pk=queued.pk)
    assert (fresh.state, fresh.end_reason) == ("failed", "dispatch_failed")
    assert "failed to build: the recipe failed" in fresh.message
    assert Run.objects.get(pk=gone.pk).state == "cancelled"
    assert [s for s, _ in published.states(queued)] == ["failed"]
    assert published.states(gone) == []
    assert Job.REFRESH_STUDY in published.job_names()  # its last active run ended
