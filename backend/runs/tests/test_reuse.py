"""Reuse of identical runs (docs/reuse.md): a repeated study is not computed again; its runs
show the earlier runs' series, objectives and archive, cost no quota, and keep them when the
earlier study is deleted. Never across tenants; `reuse: false` computes again; anything that
changes the result is another identity."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.utils import timezone
from rest_framework.test import APIClient

from catalog.models import Image
from studies.deletion import study_delete_rows
from studies.identity import identity_base, identity_inputs, run_identity
from studies.models import Run, Study
from studies.usage import (
    core_hours_used,
    queued_demand_for_tenant,
    storage_used_bytes,
    usage_for_tenant,
)
from telemetry.ingest import telemetry_ingest
from telemetry.models import SeriesChunk

SPEC = {
    "name": "cavity sweep",
    "template": "cavity",
    "parameters": {"lid_velocity": {"values": [1, 2, 3]}},
}


def submit(api, spec: dict) -> dict:
    r = api.post("/api/v1/studies/", spec, format="json")
    assert r.status_code == 201, r.json()
    return r.json()


def complete_all(study_id: str) -> list[Run]:
    """Every run of the study ended completed with a series, an archive and objectives, as
    an agent's reports leave them."""
    now = timezone.now()
    runs = list(Run.objects.filter(study_id=study_id).order_by("index"))
    for run in runs:
        Run.objects.filter(pk=run.pk).update(
            state="running", attempt=1, admitted_at=now, started_at=now, heartbeat_at=now
        )
        run.refresh_from_db()
        velocity = float(run.parameters["lid_velocity"])
        telemetry_ingest(
            run=run,
            attempt=1,
            series={"residual.p": [[1.0, 1.0], [2.0, 0.1], [3.0, velocity]]},
        )
        archive = Path(settings.ARCHIVE_DIR) / str(run.pk) / "attempt-1.tar.gz"
        archive.parent.mkdir(parents=True, exist_ok=True)
        archive.write_bytes(f"archive of run {run.index}".encode())
        Run.objects.filter(pk=run.pk).update(
            state="completed",
            end_reason="success",
            exit_code=0,
            finished_at=now,
            results_at=now,
            iterations=3,
            objectives={"res_p": velocity},
            trust="converged",
            archive_path=str(archive),
            archive_bytes=archive.stat().st_size,
        )
    return runs


def content(response) -> bytes:
    """A streamed download's bytes (the archive is sent by an async iterator)."""
    assert response.status_code == 200, response
    return b"".join(async_to_sync(_collect)(response))


async def _collect(response) -> list[bytes]:
    return [chunk async for chunk in response.streaming_content]


def csv_rows(api, study_id: str) -> list[dict]:
    response = api.get(f"/api/v1/studies/{study_id}/results.csv")
    assert response.status_code == 200
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


def runs_of(study_id: str) -> list[Run]:
    return list(Run.objects.filter(study_id=study_id).order_by("index"))


def test_a_repeated_study_reuses_every_run_and_shows_the_source_results(api):
    first = submit(api, SPEC)
    sources = complete_all(first["id"])
    hours_before = core_hours_used(
        tenant_id=api.tenant.id, since=timezone.now().replace(year=2000), until=timezone.now()
    )
    again = submit(api, {**SPEC, "name": "cavity sweep again"})
    runs = runs_of(again["id"])
    # not computed: completed at once, reused, each pointing to the identical run
    assert [r.state for r in runs] == ["completed"] * 3
    assert all(r.reused for r in runs)
    assert [r.reused_from_id for r in runs] == [s.pk for s in sources]
    assert [r.identity for r in runs] == [s.identity for s in sources]
    assert [r.objectives for r in runs] == [{"res_p": 1.0}, {"res_p": 2.0}, {"res_p": 3.0}]
    # no quota: nothing holds resources, nothing queued, no core-hours
    assert usage_for_tenant(tenant_id=api.tenant.id).cores == 0
    assert queued_demand_for_tenant(tenant_id=api.tenant.id).runs == 0
    assert all(r.started_at is None and r.admitted_at is None for r in runs)
    assert core_hours_used(
        tenant_id=api.tenant.id, since=timezone.now().replace(year=2000), until=timezone.now()
    ) == pytest.approx(hours_before)
    # the run page: its badge's source, the series and the archive by pointer
    detail = api.get(f"/api/v1/runs/{runs[1].pk}/").json()
    assert detail["reused"] is True
    assert detail["reused_from"] == str(sources[1].pk)
    assert detail["reused_source"] == {
        "run": str(sources[1].pk),
        "study": first["id"],
        "study_name": "cavity sweep",
        "index": 1,
    }
    assert detail["provenance"]["run"] == str(sources[1].pk)
    assert detail["archive_available"] is True
    tel = api.get(f"/api/v1/runs/{runs[1].pk}/telemetry/?series=residual.p").json()
    assert tel["run"] == str(runs[1].pk)
    assert tel["series"]["residual.p"]["y"][-1] == 2.0
    assert content(api.get(f"/api/v1/runs/{runs[1].pk}/archive/")) == b"archive of run 1"
    # the study page's list, and the results: which runs were reused, from where
    listed = api.get(f"/api/v1/studies/{again['id']}/runs/").json()["results"]
    assert [row["reused"] for row in listed] == [True] * 3
    table = csv_rows(api, again["id"])
    assert [row["reused_from"] for row in table] == [str(s.pk) for s in sources]
    response = api.get(f"/api/v1/studies/{again['id']}/results/")
    rows = json.loads(b"".join(response.streaming_content))["rows"]
    assert [row["reused_from"] for row in rows] == [str(s.pk) for s in sources]
    # the sources themselves show nothing reused
    table = csv_rows(api, first["id"])
    assert [row["reused_from"] for row in table] == ["", "", ""]


def test_a_reuse_of_a_reused_run_points_to_the_run_that_computed_it(api):
    first = submit(api, SPEC)
    sources = complete_all(first["id"])
    submit(api, {**SPEC, "name": "second"})
    third = submit(api, {**SPEC, "name": "third"})
    assert [r.reused_from_id for r in runs_of(third["id"])] == [s.pk for s in sources]


def test_reuse_false_computes_every_run_again(api):
    first = submit(api, SPEC)
    complete_all(first["id"])
    again = submit(api, {**SPEC, "reuse": False})
    runs = runs_of(again["id"])
    assert [r.state for r in runs] == ["pending"] * 3
    assert not any(r.reused for r in runs)
    assert Study.objects.get(pk=again["id"]).reuse is False
    # the identity is still computed: these runs may be reused later
    assert [r.identity for r in runs] == [r.identity for r in runs_of(first["id"])]


def test_reuse_must_be_a_boolean(api):
    r = api.post("/api/v1/studies/", {**SPEC, "reuse": "yes"}, format="json")
    assert r.status_code == 400
    assert r.json()["field"] == "reuse"
    assert "true or false" in r.json()["message"]


def test_another_tenants_identical_run_is_never_reused(api, make_tenant):
    first = submit(api, SPEC)
    complete_all(first["id"])
    other = make_tenant("other")
    client = APIClient()
    client.force_authenticate(other.user)
    theirs = submit(client, SPEC)
    runs = runs_of(theirs["id"])
    assert [r.identity for r in runs] == [r.identity for r in runs_of(first["id"])]
    assert [r.state for r in runs] == ["pending"] * 3 and not any(r.reused for r in runs)


def test_a_changed_parameter_or_process_count_is_another_identity(api):
    first = submit(api, SPEC)
    complete_all(first["id"])
    # lid velocity 3 is there already, 4 is new: only that run is computed
    wider = submit(api, {**SPEC, "parameters": {"lid_velocity": {"values": [3, 4]}}})
    assert [(r.state, r.reused) for r in runs_of(wider["id"])] == [
        ("completed", True),
        ("pending", False),
    ]
    parallel = submit(api, {**SPEC, "resources": {"processes": 2}})
    runs = runs_of(parallel["id"])
    assert [r.state for r in runs] == ["pending"] * 3
    assert not {r.identity for r in runs} & {r.identity for r in runs_of(first["id"])}


def test_other_objectives_are_not_reused_from_a_study_that_computed_others(api):
    first = submit(api, SPEC)
    complete_all(first["id"])
    spec = {**SPEC, "objectives": {"res_p": {"series": "residual.Ux", "reduce": "last"}}}
    again = submit(api, spec)
    assert [r.state for r in runs_of(again["id"])] == ["pending"] * 3


def test_an_image_or_case_change_is_another_identity(api):
    study = Study.objects.get(pk=submit(api, SPEC)["id"])
    image = Image.objects.create(name="of-a", digest="sha256:" + "a" * 64, closure=[])
    other = Image.objects.create(name="of-b", digest="sha256:" + "b" * 64, closure=[])
    common = {
        "case_dir": study.case_dir,
        "solver": study.solver,
        "steps": study.steps,
        "decompose": study.decompose,
        "processes": 1,
        "env": study.env,
        "convergence": study.convergence,
        "fields": [],
    }
    context = b'{"lid_velocity":1}'

    def identity(**change) -> str:
        return run_identity(identity_base(identity_inputs(**{**common, **change})), context)

    assert identity(image=image) == identity(image=image)
    assert identity(image=image) != identity(image=other)
    assert identity(image=None) not in (identity(image=image), identity(image=other))
    assert identity(image=None, processes=2) != identity(image=None)
    steps = [{**s, "argv": [*s["argv"], "-noFunctionObjects"]} for s in study.steps]
    assert identity(image=None, steps=steps) != identity(image=None)


def test_extend_and_clone_reuse_at_once(api):
    first = submit(api, SPEC)
    complete_all(first["id"])
    clone = api.post(f"/api/v1/studies/{first['id']}/clone/", {}, format="json")
    assert clone.status_code == 201, clone.json()
    r = api.post(f"/api/v1/studies/{clone.json()['id']}/submit/", {}, format="json")
    assert r.status_code == 200, r.json()
    assert all(r.reused for r in runs_of(clone.json()["id"]))
    narrow = submit(api, {**SPEC, "parameters": {"lid_velocity": {"values": [5]}}})
    r = api.post(
        f"/api/v1/studies/{narrow['id']}/extend/",
        {"parameters": {"lid_velocity": {"values": [1, 2]}}},
        format="json",
    )
    assert r.status_code == 200, r.json()
    assert [(r.index, r.reused) for r in runs_of(narrow["id"])] == [
        (0, False),
        (1, True),
        (2, True),
    ]


def test_deleting_the_source_study_hands_its_results_to_the_reusing_runs(
    api, django_capture_on_commit_callbacks
):
    first = submit(api, SPEC)
    sources = complete_all(first["id"])
    for source in sources:  # each ran in a directory the portal keeps, as a local run does
        Run.objects.filter(pk=source.pk).update(
            results_dir=str(Path(settings.RUNS_DIR) / str(source.pk) / "attempt-1" / "case"),
            disk_bytes=1_000_000 * (source.index + 1),
        )
    stored = storage_used_bytes(tenant_id=api.tenant.id)
    assert stored == 6_000_000 + sum(len(f"archive of run {i}") for i in range(3))
    second = submit(api, {**SPEC, "name": "second"})
    third = submit(api, {**SPEC, "name": "third"})
    # a reused run has no directory or archive of its own: stored once, by its source
    assert storage_used_bytes(tenant_id=api.tenant.id) == stored
    with django_capture_on_commit_callbacks(execute=True):  # the files move on commit
        assert api.delete(f"/api/v1/studies/{first['id']}/").status_code == 204
        study_delete_rows(study_id=first["id"])  # the worker's job
    # the heirs took the files over (moved under their ids): still stored, still counted
    assert storage_used_bytes(tenant_id=api.tenant.id) == stored
    assert not Run.objects.filter(pk__in=[s.pk for s in sources]).exists()
    heirs = runs_of(second["id"])
    # the heirs hold the results now; the third study's runs point to them
    assert all(h.reused and h.reused_from_id is None for h in heirs)
    assert [r.reused_from_id for r in runs_of(third["id"])] == [h.pk for h in heirs]
    for run in (*heirs, *runs_of(third["id"])):
        tel = api.get(f"/api/v1/runs/{run.pk}/telemetry/?series=residual.p").json()
        assert tel["series"]["residual.p"]["y"][-1] == float(run.parameters["lid_velocity"])
        archive = content(api.get(f"/api/v1/runs/{run.pk}/archive/"))
        assert archive == f"archive of run {run.index}".encode()
    assert SeriesChunk.objects.filter(run__in=heirs).count() == 3
    # the heirs' files live under their own ids (the source's directory was moved)
    assert all(str(h.pk) in h.archive_path for h in heirs)


def test_a_deleted_study_takes_its_runs_series_and_log_and_its_clones_keep_going(api):
    """Deleting a study is a few set statements, not a walk over its runs: its runs, their
    series and log go; a clone of it stays, no longer linked to it."""
    from telemetry.models import LogChunk

    first = submit(api, {**SPEC, "reuse": False})
    runs = complete_all(first["id"])
    LogChunk.objects.create(run=runs[0], attempt=1, seq=1, lines=["Time = 1", "End"])
    clone = api.post(f"/api/v1/studies/{first['id']}/clone/", {}, format="json").json()
    assert SeriesChunk.objects.filter(run__study_id=first["id"]).count() == 3
    assert LogChunk.objects.filter(run__study_id=first["id"]).exists()
    assert api.delete(f"/api/v1/studies/{first['id']}/").status_code == 204
    study_delete_rows(study_id=first["id"])  # the worker's job
    assert not Study.objects.filter(pk=first["id"]).exists()
    assert not Run.objects.filter(pk__in=[r.pk for r in runs]).exists()
    assert not SeriesChunk.objects.filter(run_id__in=[r.pk for r in runs]).exists()
    assert not LogChunk.objects.filter(run_id__in=[r.pk for r in runs]).exists()
    kept = api.get(f"/api/v1/studies/{clone['id']}/")
    assert kept.status_code == 200 and kept.json()["cloned_from"] is None
    assert api.get(f"/api/v1/studies/{first['id']}/").status_code == 404
