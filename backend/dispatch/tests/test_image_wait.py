"""Runs wait for their study's image without holding quota, then start in it."""

from __future__ import annotations

from catalog.models import Image
from dispatch.start import run_spec
from scheduler.admission import admit
from studies.models import Run
from studies.services import study_create


def submitted(**kwargs):
    study = study_create(**kwargs, submit=True)
    study.refresh_from_db()
    return study


def test_runs_wait_for_their_image_without_holding_quota_then_are_admitted(
    api, containers, builds
) -> None:
    study = submitted(
        tenant=api.tenant,
        owner=api.tenant.user,
        spec={"name": "s", "template": "cavity", "backend": containers.name},
    )
    Image.objects.filter(pk=study.image_id).update(status="building", progress=0.42)
    assert admit(tenant_id=api.tenant.id) == []
    run = Run.objects.get(study=study)
    assert run.state == "pending" and run.wait_reason == "image"
    assert run.wait_detail == (
        f"image openfoam-icofoam-meshing@{study.image.digest[:19]}… is building (42%)"
    )
    Image.objects.filter(pk=study.image_id).update(
        status="ready", references={"container": "localhost/windtunnel/x:1"}
    )
    assert admit(tenant_id=api.tenant.id) == [run.pk]
    run.refresh_from_db()
    assert run_spec(run=run, study=run.study, token="t").image == "localhost/windtunnel/x:1"
