"""A tenant's storage quota, measured and enforced: the run directories the portal keeps
count at the size their agents report, a tenant whose storage is used up submits nothing
and its queued runs wait until something is deleted, and each run's own disk budget
(run.json's sandbox.limits.disk_gb) never exceeds the quota."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from compute.drivers import driver_for, run_work_dir
from dispatch.start import run_spec
from dispatch.tests.conftest import submitted
from quotas.services import quota_set
from scheduler.admission import admit
from scheduler.models import QueueReasons
from studies.choices import RunState
from studies.deletion import study_delete_rows
from studies.models import Run, Study
from studies.transitions import runs_claim, runs_record_handles
from studies.usage import storage_used_bytes

MB = 1024**2
CAVITY = {"name": "c", "template": "cavity", "backend": "bench"}
SWEEP = {**CAVITY, "parameters": {"lid_velocity": {"values": [0.5, 1, 1.5]}}}


def _start(tenant) -> list[tuple[Run, APIClient]]:
    """Admit the tenant's queued runs and start them as dispatch does (claimed with their
    tokens; their directory under the portal's runs directory recorded as a local driver
    records it); each with an HTTP client holding its agent's token."""
    runs, tokens = runs_claim(run_ids=admit(tenant_id=tenant.id, publish=False))
    runs_record_handles(
        rows=[
            (str(r.pk), r.attempt, f"pid-{r.index}", f"{run_work_dir(run_id=r.pk, attempt=1)}/case")
            for r in runs
        ]
    )
    started = []
    for run in runs:
        agent = APIClient()
        agent.credentials(HTTP_AUTHORIZATION=f"Bearer {tokens[run.pk]}")
        r = agent.post(
            f"/api/v1/ingest/runs/{run.pk}/state/",
            {"attempt": run.attempt, "state": "running"},
            format="json",
        )
        assert r.status_code == 200, r.content
        started.append((run, agent))
    return started


def _used_gb(api) -> float:
    return api.get("/api/v1/quota/").json()["storage"]["used_gb"]


def test_the_disk_a_run_reports_counts_in_its_tenants_storage(api, make_tenant, bench):
    submitted(api, CAVITY)
    ((run, agent),) = _start(api.tenant)
    other = make_tenant()
    assert _used_gb(api) == 0

    # a heartbeat of an agent that names its attempt in the URL: one statement, as before
    with CaptureQueriesContext(connection) as queries:
        r = agent.post(
            f"/api/v1/ingest/runs/{run.pk}/heartbeat/?attempt={run.attempt}",
            {"attempt": run.attempt, "phase": "solving", "resources": {"disk_bytes": 300 * MB}},
            format="json",
        )
    assert r.status_code == 200, r.content
    assert len(queries) == 1, queries.captured_queries
    assert _used_gb(api) == pytest.approx(300 / 1024, abs=0.001)
    # a size that is not a byte count is refused, naming the field, and changes nothing
    r = agent.post(
        f"/api/v1/ingest/runs/{run.pk}/heartbeat/",
        {"attempt": run.attempt, "resources": {"disk_bytes": -1}},
        format="json",
    )
    assert r.status_code == 400 and "disk_bytes" in r.json()["field"]
    assert _used_gb(api) == pytest.approx(300 / 1024, abs=0.001)

    # a telemetry batch stands for a heartbeat: still the one statement
    with CaptureQueriesContext(connection) as queries:
        r = agent.post(
            f"/api/v1/ingest/runs/{run.pk}/telemetry/?attempt={run.attempt}",
            {
                "attempt": run.attempt,
                "series": {"residual.p": [[1, 0.5]]},
                "resources": {"disk_bytes": 700 * MB},
            },
            format="json",
        )
    assert r.status_code == 200, r.content
    assert len(queries) == 1, queries.captured_queries
    assert _used_gb(api) == pytest.approx(700 / 1024, abs=0.001)

    # the final report says what the directory ended at
    r = agent.post(
        f"/api/v1/ingest/runs/{run.pk}/state/",
        {"attempt": run.attempt, "state": "completed", "exit_code": 0, "disk_bytes": 650 * MB},
        format="json",
    )
    assert r.status_code == 200, r.content
    assert Run.objects.get(pk=run.pk).state == RunState.COMPLETED
    assert _used_gb(api) == pytest.approx(650 / 1024, abs=0.001)
    assert storage_used_bytes(tenant_id=other.id) == 0


def test_a_run_directory_the_portal_does_not_keep_is_not_counted(api, bench):
    """A run on a cloud server or a remote cluster (no results_dir): its directory is on that
    machine, gone with it; only the archive it uploads is the portal's."""
    submitted(api, CAVITY)
    runs, tokens = runs_claim(run_ids=admit(tenant_id=api.tenant.id, publish=False))
    (run,) = runs
    runs_record_handles(rows=[(str(run.pk), run.attempt, "server-1", "")])
    agent = APIClient()
    agent.credentials(HTTP_AUTHORIZATION=f"Bearer {tokens[run.pk]}")
    r = agent.post(
        f"/api/v1/ingest/runs/{run.pk}/heartbeat/",
        {"attempt": run.attempt, "resources": {"disk_bytes": 900 * MB}},
        format="json",
    )
    assert r.status_code == 200, r.content
    assert Run.objects.get(pk=run.pk).disk_bytes == 900 * MB
    assert _used_gb(api) == 0


def test_a_tenant_whose_storage_is_used_up_submits_nothing_and_its_queued_runs_wait(
    api, make_tenant, bench, django_capture_on_commit_callbacks
):
    # 50 MB, and one run at a time: the second study's runs queue behind the first's
    quota_set(tenant=api.tenant, limits={"storage_gb": 0.05, "max_runs": 1})
    big = submitted(api, {**CAVITY, "name": "big"})
    ((run, agent),) = _start(api.tenant)
    queued = submitted(api, {**SWEEP, "name": "queued"})
    r = agent.post(
        f"/api/v1/ingest/runs/{run.pk}/state/",
        {"attempt": run.attempt, "state": "completed", "exit_code": 0, "disk_bytes": 218 * MB},
        format="json",
    )
    assert r.status_code == 200, r.content

    # the panel says it is full, with the figures and what to do
    storage = api.get("/api/v1/quota/").json()["storage"]
    assert storage["used_gb"] == pytest.approx(0.213, abs=0.001)
    assert storage["limit_gb"] == 0.05 and storage["full"] is True
    assert "storage quota of 0.05 GB used up (0.21 GB stored)" in storage["problem"]

    # a submission is a 400 naming the storage quota, the figures and the fix
    r = api.post("/api/v1/studies/", {**CAVITY, "name": "more"}, format="json")
    assert r.status_code == 400
    body = r.json()
    assert body["code"] == "quota_exceeded" and body["field"] == "storage_gb"
    assert "storage quota (storage_gb) of 0.05 GB is used up (0.21 GB stored" in body["message"]
    assert "delete studies or uploads" in body["message"]
    assert body["details"] == {"storage_gb": 0.05, "stored_gb": 0.213}
    assert not Study.objects.filter(name="more").exists()
    # the preview says it too, beside the other figures
    preview = api.post("/api/v1/studies/preview/", CAVITY, format="json").json()["quota"]
    assert preview["fits"] is False and preview["storage_full"] is True
    assert "storage_gb" in preview["problem"] and preview["summary"] == preview["problem"]
    assert preview["limits"]["storage_gb"] == 0.05
    assert preview["in_use"]["storage_gb"] == pytest.approx(0.213, abs=0.001)
    # a draft is saved; its submission and an extension are refused the same way
    draft = api.post("/api/v1/studies/", {**CAVITY, "name": "later", "draft": True}, format="json")
    assert draft.status_code == 201, draft.json()
    r = api.post(f"/api/v1/studies/{draft.json()['id']}/submit/", {}, format="json")
    assert r.status_code == 400 and r.json()["field"] == "storage_gb"
    r = api.post(
        f"/api/v1/studies/{queued['id']}/extend/",
        {"parameters": {"lid_velocity": {"values": [2]}}},
        format="json",
    )
    assert r.status_code == 400 and r.json()["field"] == "storage_gb"
    assert Run.objects.filter(study_id=queued["id"]).count() == 3

    # the queued runs are held (the concurrent run has ended: only storage stops them),
    # and say why
    assert admit(tenant_id=api.tenant.id) == []
    waiting = Run.objects.filter(study_id=queued["id"])
    assert {(r.state, r.wait_reason) for r in waiting} == {(RunState.PENDING, "storage")}
    assert waiting[0].wait_detail.startswith("storage quota of 0.05 GB used up (0.21 GB stored)")
    run_page = api.get(f"/api/v1/runs/{waiting[0].pk}/").json()
    assert run_page["wait_reason"] == "storage"
    # a moment later (nothing submitted since), the next pass concludes the same and
    # writes nothing to the queue
    recorded = QueueReasons.objects.get(tenant=api.tenant).recorded_at
    Study.objects.filter(tenant=api.tenant).update(updated_at=recorded - timedelta(seconds=3))
    with CaptureQueriesContext(connection) as again:
        assert admit(tenant_id=api.tenant.id) == []
    assert not [q for q in again.captured_queries if q["sql"].startswith("UPDATE")]

    # another tenant is not held
    other = make_tenant()
    other_api = APIClient()
    other_api.force_authenticate(other.user)
    submitted(other_api, {**CAVITY, "name": "theirs"})
    assert len(admit(tenant_id=other.id)) == 1

    # deleting the study that stored it frees the room once its files are removed (in the
    # background): the next pass admits the queue
    with django_capture_on_commit_callbacks(execute=True):  # the files go on commit
        assert api.delete(f"/api/v1/studies/{big['id']}/").status_code == 204
        study_delete_rows(study_id=big["id"])  # the worker's job
    assert _used_gb(api) == 0
    admitted = admit(tenant_id=api.tenant.id)
    assert len(admitted) == 1  # max_runs
    assert Run.objects.get(pk=admitted[0]).study_id == Study.objects.get(name="queued").pk
    assert not Run.objects.filter(study_id=queued["id"], wait_reason="storage").exists()


def test_a_tenant_at_exactly_its_quota_is_full_and_just_below_it_is_not(api, bench):
    quota_set(tenant=api.tenant, limits={"storage_gb": 1})
    submitted(api, CAVITY)
    ((run, agent),) = _start(api.tenant)

    def report(size: int) -> None:
        r = agent.post(
            f"/api/v1/ingest/runs/{run.pk}/heartbeat/",
            {"attempt": run.attempt, "resources": {"disk_bytes": size}},
            format="json",
        )
        assert r.status_code == 200, r.content

    report(1024 * MB - 1)
    assert api.get("/api/v1/quota/").json()["storage"]["full"] is False
    assert api.post("/api/v1/studies/", CAVITY, format="json").status_code == 201
    report(1024 * MB)
    assert api.get("/api/v1/quota/").json()["storage"]["full"] is True
    assert api.post("/api/v1/studies/", CAVITY, format="json").status_code == 400


@pytest.mark.parametrize(
    ("setting", "quota", "budget"),
    [(50.0, 0.05, 0.05), (2.0, 50.0, 2.0), (0.0, 7.5, 7.5), (50.0, 0.0, 0.001)],
)
def test_a_started_runs_run_json_carries_its_disk_budget_capped_by_the_quota(
    api, settings, setting, quota, budget
):
    """The agent ends a run whose directory outgrows sandbox.limits.disk_gb: the deployment's
    WINDTUNNEL_RUN_DISK_GB (0: none of its own), never more than the tenant's whole storage
    quota (0 means "no budget" to the agent, so a tenant allowed nothing gets the smallest
    budget instead)."""
    settings.WINDTUNNEL = {**settings.WINDTUNNEL, "RUN_DISK_GB": setting}
    submitted(api, {"name": "local", "template": "cavity", "backend": "local"})
    admitted = admit(tenant_id=api.tenant.id, publish=False)
    # the quota as it is when the run starts (lowered to 0 after its admission: no room)
    quota_set(tenant=api.tenant, limits={"storage_gb": quota})
    ((run,), tokens) = runs_claim(run_ids=admitted)
    spec = run_spec(run=run, study=run.study, token=tokens[run.pk])
    driver_for(run.backend).prepare(spec)  # writes the run.json the agent reads
    written = json.loads((Path(spec.work_dir) / "run.json").read_text())
    assert written["sandbox"]["limits"]["disk_gb"] == budget
    assert written["sandbox"]["limits"]["file_size_gb"] == 64  # the other limits stay
