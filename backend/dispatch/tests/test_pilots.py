"""The pilot's side of a warm pool (dispatch/pilots.py) over the real ingest API: a worker's
token, its lease of admitted runs with the attempt fence, its heartbeat's cancel list, a
release without a final report, and the 409 of a worker the portal no longer counts."""

from __future__ import annotations

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from catalog.choices import ImageKind, ImageStatus
from catalog.models import Image
from core import jobs
from dispatch.pilots import worker_token
from dispatch.start import runs_dispatch
from pools.models import Pool, PoolWorker
from studies import services
from studies.models import Run
from studies.transitions import run_token


@pytest.fixture
def pooled(api, monkeypatch):
    """A study of three 1-core runs, admitted, on a backend with a 2-core pool and a booting
    worker of it."""
    sent: list = []
    monkeypatch.setattr(jobs, "send", lambda job, *a, **k: sent.append(job))
    spec = {"template": "cavity", "parameters": {"lid_velocity": {"values": [1, 2, 3]}}}
    study = services.study_create(
        tenant=api.tenant, owner=api.tenant.user, spec={**spec, "name": "pooled"}, submit=True
    )
    backend = Run.objects.filter(study=study).select_related("backend")[0].backend
    image = Image.objects.create(
        name="pool-image",
        kind=ImageKind.VM,
        digest="sha256:pool",
        status=ImageStatus.READY,
        references={backend.name: "glance-id"},
    )
    study.image = image
    study.save(update_fields=["image"])
    pool = Pool.objects.create(
        backend=backend, name="cfd", flavor="f", image=image, cores=2, memory_gb=4, max_workers=2
    )
    Run.objects.filter(study=study).update(state="admitted", admitted_at=timezone.now())
    worker = PoolWorker.objects.create(
        pool=pool, cores=2, server_id="srv1", server_name="wt-pool-cfd-1"
    )
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {worker_token(worker_id=worker.pk)}")
    return study, pool, worker, client, sent


def _post(client, worker, what, body):
    return client.post(f"/api/v1/ingest/workers/{worker.pk}/{what}/", body, format="json")


def test_dispatch_leaves_pooled_runs_admitted_for_the_pool_and_wakes_the_autoscaler(pooled):
    study, _, _, _, sent = pooled
    ids = [str(r.pk) for r in Run.objects.filter(study=study)]
    assert runs_dispatch(run_ids=ids) == 0
    assert set(Run.objects.filter(study=study).values_list("state", flat=True)) == {"admitted"}
    assert "dispatch.pools_autoscale" in [str(j) for j in sent]


def test_a_worker_registers_leases_what_fits_and_each_lease_is_a_fenced_attempt(pooled):
    study, _, worker, client, _ = pooled
    stranger = APIClient()
    stranger.credentials(HTTP_AUTHORIZATION="Bearer nope")
    assert _post(stranger, worker, "register", {"cores": 2}).status_code == 401
    r = _post(client, worker, "register", {"cores": 2})
    assert r.status_code == 200 and r.json()["stop"] is False and r.json()["heartbeat_interval"] > 0
    worker.refresh_from_db()
    assert worker.state == "idle"
    r = _post(client, worker, "lease", {"free_cores": 2})
    assert r.status_code == 200
    specs = r.json()["runs"]
    assert len(specs) == 2  # two 1-core runs fit a 2-core worker; the third waits
    for spec in specs:
        run = Run.objects.get(pk=spec["run_id"])
        assert run.state == "provisioning" and run.attempt == spec["attempt"] == 1
        assert run.handle == f"worker:srv1/{worker.pk}"
        assert spec["token"] == run_token(run_id=run.pk, attempt=1)
    worker.refresh_from_db()
    assert worker.state == "busy"
    assert Run.objects.filter(study=study, state="admitted").count() == 1
    assert _post(client, worker, "lease", {"free_cores": 0}).json()["runs"] == []


def test_the_heartbeat_names_attempts_no_longer_the_workers_and_a_silent_agent_is_requeued(pooled):
    _, _, worker, client, _ = pooled
    _post(client, worker, "register", {})
    specs = _post(client, worker, "lease", {"free_cores": 1}).json()["runs"]
    held = {"run_id": specs[0]["run_id"], "attempt": 1}
    stale = {"run_id": specs[0]["run_id"], "attempt": 7}
    answer = _post(client, worker, "heartbeat", {"runs": [held, stale]}).json()
    assert answer["cancel"] == [stale] and answer["stop"] is False
    r = _post(client, worker, "release", {**held, "exit_code": -9})
    assert r.status_code == 200
    run = Run.objects.get(pk=held["run_id"])
    assert run.state == "pending" and "without a final report" in run.message  # requeued
    worker.refresh_from_db()
    assert worker.state == "idle" and worker.idle_since is not None and worker.runs_done == 1
    answer = _post(client, worker, "heartbeat", {"runs": [held]}).json()
    assert answer["cancel"] == [held]  # its attempt is over: the pilot stops that agent


def test_a_lost_worker_is_told_409_on_every_call(pooled):
    _, _, worker, client, _ = pooled
    _post(client, worker, "register", {})
    PoolWorker.objects.filter(pk=worker.pk).update(state="lost")
    for what, body in (
        ("register", {}),
        ("lease", {"free_cores": 1}),
        ("heartbeat", {"runs": []}),
    ):
        assert _post(client, worker, what, body).status_code == 409, what


@pytest.mark.parametrize(
    ("what", "body", "field"),
    [
        ("lease", {"free_cores": "many"}, "free_cores"),
        ("lease", {}, "free_cores"),
        ("heartbeat", {"runs": [{"run_id": "x", "attempt": 1}]}, "runs[0].run_id"),
        (
            "heartbeat",
            {"runs": [{"run_id": "00000000-0000-4000-8000-000000000000", "attempt": 0}]},
            "attempt",
        ),
        ("release", {"run_id": "00000000-0000-4000-8000-000000000000"}, "attempt"),
        ("register", {"cores": -1}, "cores"),
    ],
)
def test_bad_pilot_messages_are_400s_naming_the_field(pooled, what, body, field):
    _, _, worker, client, _ = pooled
    _post(client, worker, "register", {})
    r = _post(client, worker, what, body)
    assert r.status_code == 400, r.content
    assert field in r.json().get("field", "") + r.json().get("message", "")
