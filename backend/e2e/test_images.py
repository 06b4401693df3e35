"""Images end to end on the real stack: the Celery worker builds with buildah, the container
backend runs the agent inside the image with podman, results equal the local backend's."""

from __future__ import annotations

import subprocess

import pytest

from catalog.images import composition_for
from catalog.models import Backend, Image
from core.testing import wait_for
from orchestration.composer import Buildah
from orchestration.composer.testing import image_tools_missing
from orchestration.drivers.base import build_driver
from studies.models import Run

pytestmark = [
    pytest.mark.solver,
    pytest.mark.slow,
    pytest.mark.skipif(bool(image_tools_missing()), reason=image_tools_missing() or "ok"),
]
COLD_BUILD_TIMEOUT = 900  # a build from nothing (debootstrap + OpenFOAM) takes about 2 min here


@pytest.fixture
def containers(live):
    backend, _ = Backend.objects.update_or_create(
        name="containers-e2e",
        defaults={"kind": "container", "cores": 2, "memory_gb": 4, "settings": {}, "enabled": True},
    )
    yield backend
    for run in Run.objects.filter(backend=backend, state__in=("provisioning", "running")):
        if run.handle:
            build_driver("container", {}).cancel(run.handle, grace=2)


def _finished(live, study_id, timeout):
    def done():
        body = live.get(f"/api/v1/studies/{study_id}/").json()
        return (
            body if body["state"] in ("completed", "completed_with_failures", "cancelled") else None
        )

    return wait_for(done, timeout=timeout, what=f"study {study_id} to finish")


def _objectives(live, study_id) -> list[dict]:
    rows = live.get(f"/api/v1/studies/{study_id}/results/").json()["rows"]
    return [r["objectives"] for r in sorted(rows, key=lambda r: r["index"])]


def test_cavity_study_in_its_composed_image_matches_the_local_backend(live, containers) -> None:
    base = {
        "template": "cavity",
        "parameters": {"cells": 12, "end_time": 0.1, "lid_velocity": {"values": [1.0, 2.0]}},
    }
    local = live.post("/api/v1/studies/", json={**base, "name": "local"})
    in_image = live.post(
        "/api/v1/studies/",
        json={**base, "name": "container", "backend": containers.name, "packages": ["icofoam"]},
    )
    assert local.status_code == in_image.status_code == 201, (local.text, in_image.text)
    a = _finished(live, local.json()["id"], 300)
    b = _finished(live, in_image.json()["id"], COLD_BUILD_TIMEOUT)
    runs = list(Run.objects.filter(study_id=b["id"]))
    assert b["state"] == "completed", [(r.state, r.message) for r in runs]
    assert a["state"] == "completed"
    assert all(r.handle.startswith("container:podman:") for r in runs)
    image = Image.objects.get(study__id=b["id"])
    assert image.name == "openfoam-icofoam-meshing" and image.status == "ready"
    assert image.references["container"].startswith(
        "localhost/windtunnel/openfoam-icofoam-meshing:"
    )
    local_values, image_values = _objectives(live, a["id"]), _objectives(live, b["id"])
    assert image_values == local_values  # same OpenFOAM build: identical numbers
    assert all(v["u_min"] < 0 for v in image_values)


def test_a_study_waits_for_its_image_to_build_then_runs(live, containers) -> None:
    packages = ["icofoam", "meshing", "potentialfoam"]  # a digest of its own; layers cached
    composition = composition_for(packages=packages)
    Image.objects.filter(digest=composition.digest).delete()
    for name in subprocess.run(
        ["podman", "ps", "-aq", "--filter", f"ancestor={composition.ref}"],
        capture_output=True, text=True, check=False,
    ).stdout.split():  # fmt: skip
        subprocess.run(["podman", "rm", "-f", name], capture_output=True, check=False)
    Buildah().remove(composition.ref)  # so a build must happen
    assert Buildah().find(composition.digest) is None
    spec = {
        "name": "waits",
        "template": "cavity",
        "backend": containers.name,
        "packages": packages,
        "parameters": {"cells": 10, "end_time": 0.05},
    }
    r = live.post("/api/v1/studies/", json=spec)
    assert r.status_code == 201, r.text
    image = Image.objects.get(digest=composition.digest)
    seen: set[str] = set()

    def run_waited_or_done():
        run = Run.objects.get(study_id=r.json()["id"])
        if run.wait_reason == "image":
            seen.add(run.wait_detail)
        return run.state in ("completed", "failed", "cancelled")

    wait_for(run_waited_or_done, timeout=COLD_BUILD_TIMEOUT, interval=0.2, what="the run")
    # (with the layers cached the build takes a second or two, so the "image" wait reason
    # is seen only when the scheduler ticks during it)
    assert all(d.startswith(f"image {image.name}@sha256:") for d in seen), seen
    study = _finished(live, r.json()["id"], 120)
    assert study["state"] == "completed"
    image.refresh_from_db()
    run = Run.objects.get(study_id=study["id"])
    assert run.admitted_at and image.built_at
    assert run.admitted_at >= image.built_at  # admitted only once its image was built
    detail = live.get(f"/api/v1/images/{image.id}/", params={"log_lines": 400}).json()
    assert detail["status"] == "ready" and detail["progress"] == 1.0
    assert any(line.startswith("STEP 1/") for line in detail["log_tail"])
    assert detail["solvers"] == ["icoFoam", "potentialFoam"]
    listed = live.get("/api/v1/images/").json()
    assert image.id in [i["id"] for i in listed]
