"""A study's deletion answers at once, whatever its size: the study is gone from every read
and list in the request, and its runs and files are removed in the background by the worker,
with progress the user can follow (`GET /studies/deletions/`); what the study stored is freed
from the tenant's storage quota as its runs go."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings

from catalog.models import Backend
from core.jobs import Job
from core.testing import wait_for
from quotas.models import Quota
from studies import deletion
from studies.models import Run, Study
from studies.services import study_create
from studies.state import study_cancel, study_cancel_queued
from studies.usage import storage_used_bytes


def _noop_study(tenant, *, runs: int, submit: bool = True) -> Study:
    Backend.objects.update_or_create(
        name="noop-delete", defaults={"kind": "noop", "cores": 64, "memory_gb": 256, "max_nodes": 1}
    )
    Quota.objects.filter(tenant=tenant).update(max_queued_runs=2 * runs)
    return study_create(
        tenant=tenant,
        owner=tenant.user,
        spec={
            "name": f"{runs} to delete",
            "template": "cavity",
            "backend": "noop-delete",
            "reuse": False,
            "parameters": {"lid_velocity": {"linspace": [0.5, 2.0, runs]}},
        },
        submit=submit,
    )


def test_a_deleted_study_is_gone_at_once_and_its_runs_go_chunk_by_chunk_with_progress(
    api, published, monkeypatch
):
    monkeypatch.setattr(deletion, "DELETE_CHUNK", 100)
    study = _noop_study(api.tenant, runs=250)
    study_cancel(study=study, by=api.tenant.user)
    study_cancel_queued(study_id=study.pk)
    kept = _noop_study(api.tenant, runs=3, submit=False)
    published.jobs.clear()

    def studies_of_runs_listed() -> set[str]:
        return {r["study"] for r in api.get("/api/v1/runs/?page_size=500").json()["results"]}

    assert studies_of_runs_listed() == {str(study.pk)}
    assert api.delete(f"/api/v1/studies/{study.pk}/").status_code == 204
    # gone from every read at once, though its rows are all still there
    assert Run.objects.filter(study_id=study.pk).count() == 250
    assert api.get(f"/api/v1/studies/{study.pk}/").status_code == 404
    assert api.get(f"/api/v1/studies/{study.pk}/runs/").status_code == 404
    assert [s["id"] for s in api.get("/api/v1/studies/").json()["results"]] == [str(kept.pk)]
    assert studies_of_runs_listed() == set()
    # a second DELETE finds nothing (to the user the study is gone)
    assert api.delete(f"/api/v1/studies/{study.pk}/").status_code == 404
    # the user sees how far the deletion is
    deletions = api.get("/api/v1/studies/deletions/").json()
    assert deletions == [
        {"id": str(study.pk), "name": "250 to delete", "runs_total": 250, "runs_deleted": 0}
    ]
    # the worker's job was asked for, by name, once
    assert [a for job, a, _ in published.jobs if job == Job.DELETE_STUDY] == [(str(study.pk),)]

    seen: list[int] = []
    chunk = deletion.study_runs_delete_chunk

    def watched(**kwargs):
        ids = chunk(**kwargs)
        seen.append(api.get("/api/v1/studies/deletions/").json()[0]["runs_deleted"])
        return ids

    monkeypatch.setattr(deletion, "study_runs_delete_chunk", watched)
    assert deletion.study_delete_rows(study_id=study.pk) == 250  # the worker's job
    # 100 at a time, each chunk counted in its own transaction
    assert seen[:3] == [0, 100, 200]
    assert not Study.objects.filter(pk=study.pk).exists()
    assert not Run.objects.filter(study_id=study.pk).exists()
    assert api.get("/api/v1/studies/deletions/").json() == []
    files_jobs = [a[0] for job, a, _ in published.jobs if job == Job.DELETE_RUN_FILES]
    assert sum(len(ids) for ids in files_jobs) == 250
    # a redelivered job finds nothing left
    assert deletion.study_delete_rows(study_id=study.pk) == 0


def test_a_study_with_queued_runs_is_not_deleted_and_the_answer_says_why(api, published):
    study = _noop_study(api.tenant, runs=5)
    r = api.delete(f"/api/v1/studies/{study.pk}/")
    assert r.status_code == 409 and "cancel it first" in r.json()["message"]
    assert api.get(f"/api/v1/studies/{study.pk}/").status_code == 200


def test_another_tenants_deletions_are_not_shown(api, make_tenant, published):
    other = make_tenant()
    study = _noop_study(other, runs=3, submit=False)
    deletion.study_delete(study=study)
    assert api.get("/api/v1/studies/deletions/").json() == []
    assert api.delete(f"/api/v1/studies/{study.pk}/").status_code == 404


def test_the_runs_pages_count_is_the_number_of_runs_it_lists(api, make_tenant, published):
    """The unfiltered runs page takes its count from the studies (not a COUNT of every run):
    it must still be exactly the runs listed, through submission, drafts, another tenant's
    runs, a cancel and a deletion whose rows are still there."""
    study = _noop_study(api.tenant, runs=250)
    _noop_study(api.tenant, runs=3, submit=False)  # a draft: its runs are made at submission
    _noop_study(make_tenant(), runs=5)

    def count(query: str = "") -> int:
        body = api.get(f"/api/v1/runs/?page_size=1000{query}").json()
        assert body["count"] == len(body["results"]), body["count"]
        return body["count"]

    assert count() == 250 == Run.objects.filter(tenant=api.tenant).count()
    assert count("&ordering=-index") == 250
    assert count("&state=pending") == 250
    study_cancel(study=study, by=api.tenant.user)
    study_cancel_queued(study_id=study.pk)
    assert (count(), count("&state=pending"), count("&state=cancelled")) == (250, 0, 250)
    assert api.delete(f"/api/v1/studies/{study.pk}/").status_code == 204
    assert Run.objects.filter(study_id=study.pk).count() == 250  # removed in the background
    assert (count(), count("&state=cancelled")) == (0, 0)


@pytest.mark.slow
def test_the_worker_removes_a_deleted_studys_runs_and_files_and_frees_its_storage(live):
    """Through the running portal: DELETE answers, the worker's job removes the rows and
    the run directories, and the tenant's storage usage falls back."""
    study = _noop_study(live.tenant, runs=1200)
    r = live.post(f"/api/v1/studies/{study.pk}/cancel/")
    assert r.status_code == 200, r.text
    wait_for(
        lambda: live.get(f"/api/v1/studies/{study.pk}/").json()["progress"]["cancelling"] == 0,
        timeout=120,
        what="the worker to end the cancelled study's queued runs",
    )
    ids = [str(x) for x in Run.objects.filter(study=study).values_list("pk", flat=True)[:3]]
    for run_id in ids:  # three runs that kept their directories, 1 MB each
        folder = Path(settings.RUNS_DIR) / run_id
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "log.icoFoam").write_bytes(b"x" * 1024)
        Run.objects.filter(pk=run_id).update(results_dir=str(folder), disk_bytes=1 << 20)
    assert storage_used_bytes(tenant_id=live.tenant.pk) >= 3 << 20

    r = live.delete(f"/api/v1/studies/{study.pk}/")
    assert r.status_code == 204, r.text
    assert live.get(f"/api/v1/studies/{study.pk}/").status_code == 404

    wait_for(
        lambda: not Study.objects.filter(pk=study.pk).exists(),
        timeout=120,
        what="the worker to delete the study",
    )
    assert not Run.objects.filter(study_id=study.pk).exists()
    assert live.get("/api/v1/studies/deletions/").json() == []
    assert storage_used_bytes(tenant_id=live.tenant.pk) < 3 << 20
    wait_for(
        lambda: not any((Path(settings.RUNS_DIR) / run_id).exists() for run_id in ids),
        timeout=60,
        what="the worker to delete the run directories",
    )
