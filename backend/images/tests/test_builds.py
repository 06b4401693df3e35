"""Images: compose, build, rebuild, retire, the API, and the image keys of a study."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from catalog import images
from catalog.choices import ImageStatus
from catalog.models import Image
from core.exceptions import ApplicationError
from images import builds as builds_svc
from images.log_stream import LogStream
from studies.models import Run
from studies.services import study_create


def submitted(**kwargs):
    study = study_create(**kwargs, submit=True)
    study.refresh_from_db()
    return study


# -- compose, rebuild, retire ----------------------------------------------------------------------


def test_compose_is_find_or_create_by_digest_and_starts_one_build(catalog, builds) -> None:
    image, created = images.image_compose(packages=["icofoam"])
    assert created and image.status == ImageStatus.PENDING
    assert image.name == "openfoam-icofoam" and image.solvers == ["icoFoam"]
    assert [p["name"] for p in image.closure][-1] == "icofoam"
    assert image.recipe.startswith("# Windtunnel composer recipe")
    again, created_again = images.image_compose(packages=["icofoam", "openfoam-core"])
    assert (again.pk, created_again) == (image.pk, False)
    assert builds == [(image.pk, False)]  # one build, on commit


def test_unknown_packages_are_a_400_naming_the_chain(catalog, builds) -> None:
    with pytest.raises(ApplicationError) as info:
        images.image_compose(packages=["icofoam", "openfoam-nonesuch"])
    assert info.value.field == "packages"
    assert "no package named 'openfoam-nonesuch'" in info.value.message
    assert info.value.details["kind"] == "missing"


def test_a_build_whose_packages_changed_fails_keeps_its_log_and_fails_waiting_runs(
    api, containers, builds
) -> None:
    study = submitted(
        tenant=api.tenant,
        owner=api.tenant.user,
        spec={"name": "w", "template": "cavity", "backend": containers.name},
    )
    image = study.image
    assert image is not None and image.status == ImageStatus.PENDING
    Image.objects.filter(pk=image.pk).update(digest="sha256:" + "0" * 64, build_log="earlier\n")
    assert builds_svc.image_build(image_id=image.pk) == "failed"
    image.refresh_from_db()
    assert image.status == ImageStatus.FAILED and "packages changed" in image.error
    run = Run.objects.get(study=study)
    assert run.state == "failed" and run.end_reason == "dispatch_failed"
    assert "failed to build" in run.message


def test_the_log_stream_appends_about_once_a_second(catalog, builds) -> None:
    image, _ = images.image_compose(packages=["icofoam"])
    stream = LogStream(image.pk)
    stream.line("STEP 1/5: FROM base")
    stream.progress(0.25)
    stream.flush()
    stream.line("STEP 2/5: RUN apt-get")
    stream.flush()
    image.refresh_from_db()
    assert image.build_log == "STEP 1/5: FROM base\nSTEP 2/5: RUN apt-get\n"
    assert image.progress == 0.25


def test_retire_refuses_while_runs_hold_the_image(api, containers, builds) -> None:
    study = submitted(
        tenant=api.tenant,
        owner=api.tenant.user,
        spec={"name": "r", "template": "cavity", "backend": containers.name},
    )
    Run.objects.filter(study=study).update(state="running", started_at=timezone.now())
    with pytest.raises(ApplicationError, match="1 run\\(s\\) are starting or running"):
        builds_svc.image_retire(image=study.image)
    Run.objects.filter(study=study).update(state="cancelled", finished_at=timezone.now())
    assert builds_svc.image_retire(image=study.image).status == ImageStatus.RETIRED


# -- the API -------------------------------------------------------------------------------------------


def test_api_compose_201_then_200_and_users_see_only_ready_images(api, builds) -> None:
    r = api.post("/api/v1/images/", {"packages": ["simplefoam"]}, format="json")
    assert r.status_code == 201, r.content
    body = r.json()
    assert body["status"] == "pending" and body["solvers"] == ["simpleFoam"]
    assert body["display"].startswith("openfoam-simplefoam@sha256:")
    assert (
        api.post("/api/v1/images/", {"packages": ["simplefoam"]}, format="json").status_code == 200
    )
    assert api.get("/api/v1/images/").json() == []  # not ready yet
    Image.objects.filter(pk=body["id"]).update(status="ready", progress=1.0, build_log="a\nb\n")
    with CaptureQueriesContext(connection) as queries:
        listed = api.get("/api/v1/images/").json()
    assert [i["id"] for i in listed] == [body["id"]] and listed[0]["solvers"] == ["simpleFoam"]
    assert len(queries) <= 6
    detail = api.get(f"/api/v1/images/{body['id']}/", {"log_lines": 1}).json()
    assert detail["log_tail"] == ["b"] and detail["references"] == {}
    log = api.get(f"/api/v1/images/{body['id']}/log/", {"offset": 2}).json()
    assert log["text"] == "b\n" and log["next_offset"] == 4
    recipe = api.get(f"/api/v1/images/{body['id']}/recipe/")
    assert recipe.content.decode().startswith("# Windtunnel composer recipe")


def test_api_compose_errors_name_the_field(api, builds) -> None:
    r = api.post("/api/v1/images/", {"packages": ["nonesuch"]}, format="json")
    assert r.status_code == 400 and r.json()["field"] == "packages"
    assert "no package named 'nonesuch'" in r.json()["message"]


def test_rebuild_and_retire_are_for_staff(api, builds) -> None:
    image_id = api.post("/api/v1/images/", {"packages": ["pisofoam"]}, format="json").json()["id"]
    Image.objects.filter(pk=image_id).update(status="failed")
    assert api.post(f"/api/v1/images/{image_id}/rebuild/").status_code == 403
    api.tenant.user.is_staff = True
    api.tenant.user.save(update_fields=["is_staff"])
    assert len(api.get("/api/v1/images/").json()) >= 1  # staff see images that are not ready
    r = api.post(f"/api/v1/images/{image_id}/rebuild/")
    assert r.status_code == 200 and r.json()["status"] == "pending"
    assert builds[-1] == (image_id, False)
    r = api.post(f"/api/v1/images/{image_id}/retire/")
    assert r.status_code == 200 and r.json()["status"] == "retired"


# -- studies and the scheduler -------------------------------------------------------------------------


def test_local_backends_refuse_image_keys(api) -> None:
    r = api.post(
        "/api/v1/studies/",
        {"name": "x", "template": "cavity", "packages": ["icofoam"]},
        format="json",
    )
    assert r.status_code == 400 and r.json()["field"] == "packages"
    assert "need a backend that runs images" in r.json()["message"]


def test_a_container_study_composes_the_solver_and_prepare_packages(
    api, containers, builds
) -> None:
    spec = {"name": "c", "template": "cavity", "backend": containers.name}
    preview = api.post("/api/v1/studies/preview/", spec, format="json")
    assert preview.status_code == 200, preview.content
    assert not Image.objects.exists()  # a preview creates nothing
    study = submitted(tenant=api.tenant, owner=api.tenant.user, spec=spec)
    assert study.image.name == "openfoam-icofoam-meshing"
    assert study.env["WM_PROJECT_DIR"] == "/usr/share/openfoam"
    assert study.steps[-1]["argv"] == ["icoFoam"]
    mpi = study_create(
        tenant=api.tenant,
        owner=api.tenant.user,
        spec={**spec, "name": "m", "packages": ["icofoam"], "resources": {"processes": 2}},
    )
    assert mpi.image is None or mpi.image.pk == study.image.pk
    assert mpi.steps[2]["argv"][:6] == [
        "mpirun",
        "--oversubscribe",
        "--bind-to",
        "none",
        "-np",
        "2",
    ]


def test_study_image_by_name_must_exist_be_usable_and_provide_the_solver(
    api, containers, builds
) -> None:
    base = {"name": "n", "template": "cavity", "backend": containers.name}
    r = api.post("/api/v1/studies/", {**base, "image": "openfoam-nonesuch"}, format="json")
    assert r.status_code == 400 and r.json()["field"] == "image"
    image, _ = images.image_compose(packages=["simplefoam"])
    r = api.post("/api/v1/studies/", {**base, "image": image.name}, format="json")
    assert r.status_code == 400 and r.json()["field"] == "solver"
    assert "provides simpleFoam, not icoFoam" in r.json()["message"]
    Image.objects.filter(pk=image.pk).update(status="failed")
    r = api.post(
        "/api/v1/studies/",
        {**base, "image": image.digest[:20], "solver": "simpleFoam"},
        format="json",
    )
    assert r.status_code == 400 and "is failed" in r.json()["message"]
