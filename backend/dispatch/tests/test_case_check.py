"""Every run's case, rendered with its own values, is checked before it starts."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext

from catalog.models import Backend
from compute.drivers import traits_of
from dispatch.start import prerendered, runs_dispatch
from orchestration.case import casecheck
from scheduler.admission import admit
from studies.models import Run
from studies.services import study_create
from studies.transitions.dispatch import CLAIMED_FIELDS

# the keyword is a placeholder: an ordinary keyword for the first run, libs for the second
CONTROL = b'application icoFoam;\n{{ key }} ("./lib/x.so");\n'


def _upload(api) -> str:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("case/system/controlDict")
        info.size = len(CONTROL)
        tar.addfile(info, io.BytesIO(CONTROL))
    f = io.BytesIO(buf.getvalue())
    f.name = "case.tar.gz"
    r = api.post("/api/v1/uploads/", {"file": f}, format="multipart")
    assert r.status_code == 201, r.json()
    return r.json()["id"]


def test_a_run_whose_values_write_a_library_path_fails_before_it_starts_saying_why(api):
    spec = {
        "name": "keys",
        "case": _upload(api),
        "solver": "icoFoam",
        "parameters": {"key": ["extraLibs", "libs"]},
    }
    r = api.post("/api/v1/studies/", spec, format="json")
    assert r.status_code == 201, r.json()  # the first run's values render an ordinary keyword
    second = Run.objects.get(study_id=r.json()["id"], index=1)
    assert second.pk in admit(tenant_id=api.tenant.id)
    assert runs_dispatch(run_ids=[str(second.pk)]) == 0
    second.refresh_from_db()
    assert second.state == "failed" and second.end_reason == "dispatch_failed"
    assert second.message.startswith(
        "the case as this run's values render it is refused: system/controlDict line 2: libs "
        "names './lib/x.so'"
    ), second.message


def _noop() -> None:
    Backend.objects.update_or_create(
        name="noop", defaults={"kind": "noop", "cores": 64, "memory_gb": 256, "max_nodes": 1}
    )


def test_in_one_batch_the_run_whose_values_are_refused_fails_and_the_others_start(api):
    _noop()
    spec = {
        "name": "keys in a batch",
        "case": _upload(api),
        "solver": "icoFoam",
        "backend": "noop",
        "parameters": {"key": ["extraLibs", "libs", "extraLibs"]},
    }
    r = api.post("/api/v1/studies/", spec, format="json")
    assert r.status_code == 201, r.json()
    admitted = admit(tenant_id=api.tenant.id)
    assert runs_dispatch(run_ids=admitted) == 2
    states = dict(Run.objects.filter(study_id=r.json()["id"]).values_list("index", "state"))
    assert states == {0: "provisioning", 1: "failed", 2: "provisioning"}


def test_a_backend_that_takes_rendered_texts_gets_each_runs_own(api):
    study = study_create(
        tenant=api.tenant,
        owner=api.tenant.user,
        spec={
            "name": "texts",
            "template": "cavity",
            "backend": "local",
            "parameters": {"lid_velocity": [1, 2.5, 7e-3], "cells": [10, 20]},
        },
        submit=True,
    )
    runs = list(Run.objects.filter(study=study).select_related("backend").order_by("index"))
    assert traits_of(runs[0].backend).prerenders_case
    etc_dir = casecheck.etc_folder(settings.WINDTUNNEL["OPENFOAM_DIR"])
    texts = [prerendered(run=run, study=study) for run in runs]
    assert texts == [
        casecheck.render_checked(Path(study.case_dir), run.context, etc_dir=etc_dir) for run in runs
    ]
    assert len({t["0/U"] for t in texts if t}) == 3  # each run's own lid velocity


def test_a_dispatch_batch_makes_the_same_queries_whatever_its_size(api, make_tenant):
    _noop()
    tenant = make_tenant(cores=64, memory_gb=256, max_runs=64)
    study_create(
        tenant=tenant,
        owner=tenant.user,
        spec={
            "name": "batch",
            "template": "cavity",
            "backend": "noop",
            "reuse": False,
            "parameters": {"lid_velocity": {"linspace": [0.1, 10, 24]}},
        },
        submit=True,
    )
    admitted = [str(x) for x in admit(tenant_id=tenant.id)]
    runs_dispatch(run_ids=admitted[:1])  # the case's plan read once for the process
    with CaptureQueriesContext(connection) as small:
        assert runs_dispatch(run_ids=admitted[1:3]) == 2
    with CaptureQueriesContext(connection) as large:
        assert runs_dispatch(run_ids=admitted[3:24]) == 21
    assert len(large) == len(small), [q["sql"][:80] for q in large.captured_queries]
    assert set(CLAIMED_FIELDS) <= {f.name for f in Run._meta.concrete_fields}
