"""Which completed run a warm-starting run starts from: the nearest of its own mesh, and
while none of its mesh has completed, the nearest of another mesh, mapped (mapFields)."""

from __future__ import annotations

import pytest

from catalog.models import Backend
from dispatch.start import study_case_plan
from studies.models import Run
from studies.services import study_create
from studies.warm import warm_sources_pick

pytestmark = pytest.mark.django_db


@pytest.fixture
def levels(api):
    """A warm-starting pitzDaily study over its mesh and inlet speed, on a local backend."""
    backend = Backend.objects.filter(kind="local").first()
    assert backend is not None
    spec = {
        "name": "levels",
        "template": "pitzdaily",
        "backend": backend.name,
        "warm_start": True,
        "reuse": False,
        "parameters": {"mesh": {"values": [0.5, 1.0]}, "inlet_velocity": {"values": [5, 10]}},
    }
    study = study_create(tenant=api.tenant, owner=api.tenant.user, spec=spec, submit=True)
    return study, {
        (r.parameters["mesh"], r.parameters["inlet_velocity"]): r for r in study.runs.all()
    }


def _complete(run: Run) -> None:
    Run.objects.filter(pk=run.pk).update(
        state="completed", end_reason="success", attempt=1, writes={"attempt": 1, "times": ["60"]}
    )


def _pick(study, *runs: Run) -> dict:
    for run in runs:
        run.refresh_from_db()
    warm_sources_pick(study=study, runs=list(runs), plan=study_case_plan(study))
    return {run.pk: run.resume for run in runs}


def test_a_run_of_a_mesh_no_run_has_completed_maps_from_the_nearest_other_mesh(levels):
    study, runs = levels
    _complete(runs[(0.5, 5)])
    picked = _pick(study, runs[(1.0, 5)], runs[(0.5, 10)])
    mapped, same = picked[runs[(1.0, 5)].pk], picked[runs[(0.5, 10)].pk]
    assert mapped["source"] == str(runs[(0.5, 5)].pk) and mapped["map"] is True
    assert "blend" not in mapped
    assert same["source"] == str(runs[(0.5, 5)].pk) and "map" not in same


def test_a_run_of_its_own_mesh_is_preferred_over_a_nearer_one_of_another(levels):
    study, runs = levels
    _complete(runs[(0.5, 5)])  # the same speed, another mesh
    _complete(runs[(1.0, 10)])  # its mesh, another speed
    picked = _pick(study, runs[(1.0, 5)])[runs[(1.0, 5)].pk]
    assert picked["source"] == str(runs[(1.0, 10)].pk) and "map" not in picked
