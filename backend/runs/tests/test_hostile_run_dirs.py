"""A run's directory is the tenant's: what the portal serves from it (the result archive it
makes on the first download, the flow fields) holds nothing the case linked to, whichever
way the links were planted (before the run ended, or swapped in as the run's uid while the
portal works)."""

from __future__ import annotations

import io
import json
import os
import secrets
import tarfile
from pathlib import Path

import pytest
from django.utils import timezone

from orchestration.agent.sandbox import Sandbox
from runs.flow_fields import run_make_fields
from studies.models import Run
from studies.services import study_create

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the portal's rights are root's")


def _finished_run(api, case: Path) -> Run:
    study = study_create(
        tenant=api.tenant,
        owner=api.tenant.user,
        spec={"name": "hostile dir", "template": "cavity"},
        submit=True,
    )
    run = Run.objects.get(study=study)
    Run.objects.filter(pk=run.pk).update(
        state="completed", attempt=1, results_dir=str(case), results_at=timezone.now()
    )
    run.refresh_from_db()
    return run


def _as_the_runs_uid(run: Run, case: Path) -> int:
    """Give the case to the run's uid, as its agent did before the steps ran."""
    uid = Sandbox({"mode": "uid"}, run_id=str(run.pk)).uid
    assert uid is not None
    for path in [case, *case.rglob("*")]:
        os.chown(path, uid, uid, follow_symlinks=False)
    return uid


def test_the_archive_made_on_download_holds_no_host_file_the_case_linked_to(api, tmp_path):
    """`constant` swapped for a link to a root-only host folder, a log and a time folder's
    file linked to the portal's secrets: the archive, made by the run's uid in its sandbox,
    has the case's own files and none of the host's."""
    host = tmp_path / "host"
    host.mkdir(mode=0o700)
    token = f"TOPSECRET-{secrets.token_hex(8)}"
    (host / "transportProperties").write_text(token)
    (host / "transportProperties").chmod(0o600)
    case = tmp_path / "attempt-1" / "case"
    (case / "system").mkdir(parents=True)
    (case / "system/controlDict").write_text("endTime 1;\n")
    (case / "1").mkdir()
    (case / "1/U").write_text("internalField uniform (1 0 0);\n")
    (case / "log.icoFoam").write_text("Time = 1\nEnd\n")
    run = _finished_run(api, case)
    _as_the_runs_uid(run, case)
    (case / "constant").symlink_to(host)
    (case / "log.secret").symlink_to(host / "transportProperties")
    (case / "1/p").symlink_to(host / "transportProperties")
    os.mkfifo(case / "log.fifo")  # a reader that opened it would wait for ever
    r = api.get(f"/api/v1/runs/{run.pk}/archive/")
    assert r.status_code == 200
    with tarfile.open(fileobj=io.BytesIO(b"".join(r)), mode="r:gz") as tar:
        names = sorted(tar.getnames())
        data = b"".join((tar.extractfile(m) or io.BytesIO()).read() for m in tar.getmembers())
    assert names == ["1/U", "log.icoFoam", "system/controlDict"]
    assert token.encode() not in data


def test_flow_fields_are_made_by_the_runs_uid_and_never_from_what_the_case_links_to(api, tmp_path):
    """The portal makes a run's flow fields itself, by the run's uid in its sandbox: an
    artifact the case left (here a link to a well-formed one in a root-only host folder) is
    not served, and a mesh that is a link to the host is not read (no fields, and why)."""
    host = tmp_path / "host"
    host.mkdir(mode=0o700)
    artifact = {
        "version": 1,
        "regions": [{"name": "domain", "x0": 0, "y0": 0, "dx": 1, "dy": 1, "nx": 2, "ny": 2}],
        "fields": {"p": {"values": {"domain": [1, 2, 3, 4]}}},
    }
    (host / "fields.json").write_text(json.dumps(artifact))
    (host / "polyMesh").mkdir()
    case = tmp_path / "attempt-1" / "case"
    (case / "system").mkdir(parents=True)
    (case / "system/controlDict").write_text("application icoFoam;\n")
    (case / "constant").mkdir()
    (case / "1").mkdir()
    run = _finished_run(api, case)
    _as_the_runs_uid(run, case)
    (case / "windtunnel").symlink_to(host)  # the artifact's folder is a link
    (case / "constant/polyMesh").symlink_to(host / "polyMesh")
    first = api.get(f"/api/v1/runs/{run.pk}/fields/").json()
    assert first["available"] is False and first["preparing"] is True
    run_make_fields(run_id=str(run.pk), attempt=run.attempt)
    index = api.get(f"/api/v1/runs/{run.pk}/fields/").json()
    assert index["available"] is False and index["preparing"] is False
    assert any("not made" in note for note in index["notes"]), index["notes"]
    assert api.get(f"/api/v1/runs/{run.pk}/fields/data/", {"field": "p"}).status_code == 404
