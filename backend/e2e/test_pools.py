"""Warm pools on the loopback OpenStack (docs/pools.md): the real stack (uvicorn, Celery with
beat and the autoscaler, PostgreSQL) against Keystone, Glance, Nova (fake driver) and Neutron.

Fake servers go ACTIVE without booting, so the tests play each pool worker: they read the
server's user data back from Nova and run it here, which starts the real pilot; it registers,
leases runs, and runs the real agent (real OpenFOAM) for each, as a booted worker would.
"""

from __future__ import annotations

import os

# the live stack reads these when it starts (the stack fixture is per session)
os.environ.setdefault("WINDTUNNEL_POOL_AUTOSCALE_SECONDS", "1")
os.environ.setdefault("WINDTUNNEL_POOL_WORKER_TIMEOUT", "12")

import base64  # noqa: E402
import json  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402

import psutil  # noqa: E402
import pytest  # noqa: E402
from rest_framework.test import APIClient  # noqa: E402

from catalog.models import Backend  # noqa: E402
from core.testing import wait_for  # noqa: E402
from e2e.test_openstack import CLOUD_JSON, FINAL, ROOT, Live  # noqa: E402
from e2e.test_openstack import cloud_live as cloud_live_fixture  # noqa: E402, F401
from pools.models import Pool, PoolDecision, PoolWorker  # noqa: E402
from studies.models import Run  # noqa: E402

pytestmark = [
    pytest.mark.solver,
    pytest.mark.slow,
    pytest.mark.xdist_group("cluster"),
    pytest.mark.skipif(not CLOUD_JSON.is_file(), reason="no OpenStack control plane"),
]


def _cloud() -> dict:
    return json.loads(CLOUD_JSON.read_text())


def _admin():
    import openstack

    c = _cloud()
    return openstack.connection.Connection(
        auth=c["admin"], region_name=c["region"], compute_api_version="2.79"
    )


def _set_project_quota(**limits) -> None:
    _admin().set_compute_quotas(_cloud()["tenant"]["project_id"], **limits)


def _gone(server_id: str) -> bool:
    return _admin().compute.find_server(server_id, ignore_missing=True) is None


def _play_vm(server) -> subprocess.Popen:
    """Do what cloud-init would: run the server's user data (on this machine)."""
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(ROOT),
        "WM_PROJECT_DIR": "/usr/share/openfoam",
        "HOME": os.environ.get("HOME", "/root"),
    }
    script = base64.b64decode(server.user_data).decode()
    return subprocess.Popen(["sh", "-c", script], env=env, start_new_session=True)


def _runs(study_id) -> list[Run]:
    return list(Run.objects.filter(study_id=study_id).order_by("index"))


def _cavity(live: Live, name: str, runs: int = 2) -> dict:
    r = live.http.post(
        "/api/v1/studies/",
        json={
            "name": name,
            "template": "cavity",
            "backend": live.backend.name,
            "image": live.image.digest,
            "parameters": {
                "lid_velocity": {"linspace": [1, 2, runs]} if runs > 1 else 1,
                "cells": 10,
                "end_time": 0.1,
            },
        },
    )
    assert r.status_code == 201, r.text
    return r.json()


@pytest.fixture
def cloud(cloud_live_fixture) -> Live:  # noqa: F811
    """test_openstack's OpenStack backend, VM image and tenant on the live stack."""
    return cloud_live_fixture


@pytest.fixture
def staff(make_tenant):
    ops = make_tenant("ops")
    ops.user.is_staff = True
    ops.user.save()
    client = APIClient()
    client.force_authenticate(ops.user)
    yield client
    for server in _admin().compute.servers(all_projects=True, name="^wt-pool-"):
        _admin().compute.delete_server(server.id, ignore_missing=True)


@pytest.fixture
def vms():
    """The pool workers this test plays; killed (with their agents) at its end."""
    played: dict[str, subprocess.Popen] = {}
    yield played
    for proc in played.values():
        _kill_tree(proc)


def _kill_tree(proc: subprocess.Popen) -> None:
    """What a worker's server dying does: the pilot and every agent it started, at once."""
    try:
        tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for p in tree:
        try:
            p.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    proc.wait(timeout=30)


def _pool(staff, live: Live, name: str, **extra) -> dict:
    r = staff.post(
        "/api/v1/admin/pools/",
        {
            "name": name,
            "backend": live.backend.name,
            "flavor": "wt.small",
            "image": live.image.digest,
            "min_workers": 0,
            "max_workers": 2,
            "idle_timeout": 6,
            "boot_timeout": 120,
            **extra,
        },
        format="json",
    )
    assert r.status_code == 201, r.content
    return r.json()


def _worker_servers(pool: str) -> list:
    return [
        s
        for s in _admin().compute.servers(all_projects=True, name="^wt-pool-")
        if s.metadata.get("windtunnel_pool") == pool
    ]


def _play_new_workers(pool: str, vms: dict) -> int:
    """Play every ACTIVE worker server of the pool not played yet; how many are played."""
    for server in _worker_servers(pool):
        if server.id not in vms and server.status == "ACTIVE":
            vms[server.id] = _play_vm(_admin().compute.get_server(server.id))
    return len(vms)


def _study_done(live: Live, study: dict, pool: str, vms: dict) -> dict | None:
    _play_new_workers(pool, vms)
    body = live.http.get(f"/api/v1/studies/{study['id']}/").json()
    return body if body["state"] in FINAL else None


def test_a_study_runs_through_a_pool_from_zero_then_the_pool_scales_down(cloud, staff, vms):
    _pool(staff, cloud, "cfd-small")
    assert _worker_servers("cfd-small") == []  # min 0: nothing before a run waits
    study = _cavity(cloud, "cavity through a pool", runs=3)

    def waiting():
        runs = [cloud.http.get(f"/api/v1/runs/{r.id}/").json() for r in _runs(study["id"])]
        return [r for r in runs if r["wait_reason"] == "pool_worker"] or None

    shown = wait_for(waiting, timeout=60, what="runs waiting for a pool worker")
    assert "(pool cfd-small, " in shown[0]["wait_detail"] and "booting" in shown[0]["wait_detail"]
    body = wait_for(
        lambda: _study_done(cloud, study, "cfd-small", vms),
        timeout=300,
        interval=1,
        what="the study to finish on the pool",
    )
    runs = _runs(study["id"])
    assert body["state"] == "completed", [(r.state, r.message) for r in runs]
    assert all(r.handle.startswith("worker:") and r.attempt == 1 for r in runs)
    assert len(vms) <= 2  # never more workers than max
    servers = {r.handle.partition(":")[2].partition("/")[0] for r in runs}
    assert servers <= set(vms)  # every run ran on a pool worker
    rows = cloud.http.get(f"/api/v1/studies/{study['id']}/results/").json()["rows"]
    assert len(rows) == 3 and all(row["objectives"] for row in rows)
    pool = Pool.objects.get(name="cfd-small")
    ups = [d.reason for d in PoolDecision.objects.filter(pool=pool, action="up")]
    assert ups and "run(s) wait" in ups[-1]

    # idle past the idle timeout: deleted (min 0), servers gone, pilots told to exit
    wait_for(
        lambda: (
            not PoolWorker.objects.filter(pool=pool, state__in=["idle", "busy", "booting"]).exists()
        ),
        timeout=90,
        what="the idle workers scaled down",
    )
    down = PoolDecision.objects.filter(pool=pool, action="down").first()
    assert down is not None
    assert "idle for" in down.reason
    wait_for(lambda: all(_gone(s) for s in vms), timeout=60, what="worker servers deleted")
    for proc in vms.values():
        assert proc.wait(timeout=60) == 0  # the pilot exits once the portal lets it go
    page = staff.get("/api/v1/admin/pools/cfd-small/").json()
    assert {w["state"] for w in page["workers"]} == {"deleted"}
    assert any(w["runs_done"] >= 1 and w["utilisation"] > 0 for w in page["workers"])
    assert [d["action"] for d in page["decisions"]][0] == "down"


def test_a_worker_killed_mid_run_is_lost_and_its_run_requeued_once(cloud, staff, vms):
    _pool(staff, cloud, "cfd-kill", max_workers=1)
    # a longer solve, so the worker dies mid-run
    study = cloud.http.post(
        "/api/v1/studies/",
        json={
            "name": "killed worker, long",
            "template": "cavity",
            "backend": cloud.backend.name,
            "image": cloud.image.digest,
            "parameters": {"lid_velocity": 1, "cells": 60, "end_time": 3},
        },
    ).json()
    run = wait_for(
        lambda: (
            _play_new_workers("cfd-kill", vms)
            and (r := _runs(study["id"])[0]).state == "running"
            and r
        ),
        timeout=180,
        interval=1,
        what="the run running on the pool's worker",
    )
    first_server = run.handle.partition(":")[2].partition("/")[0]
    first = PoolWorker.objects.get(server_id=first_server)
    _kill_tree(vms[first_server])  # the worker's server dies, its agent with it
    lost = wait_for(
        lambda: PoolDecision.objects.filter(pool__name="cfd-kill", action="lost").first(),
        timeout=90,
        what="the worker declared lost",
    )
    assert "no heartbeat" in lost.reason and "1 run(s) requeued" in lost.reason
    first.refresh_from_db()
    assert first.state == "lost"
    wait_for(lambda: _gone(first_server), timeout=60, what="the lost worker's server deleted")
    body = wait_for(
        lambda: _study_done(cloud, study, "cfd-kill", vms),
        timeout=300,
        interval=1,
        what="the run to finish on a new worker",
    )
    run.refresh_from_db()
    assert body["state"] == "completed", run.message
    assert run.attempt == 2  # requeued once, with the next attempt
    second = PoolWorker.objects.get(server_id=run.handle.partition(":")[2].partition("/")[0])
    assert second.pk != first.pk
    # never twice at once: the second attempt was leased after the first worker was fenced
    assert first.ended_at is not None and run.provisioning_at > first.ended_at


def test_a_boot_that_never_registers_fails_and_is_retried_with_backoff(cloud, staff, vms):
    _pool(staff, cloud, "cfd-mute", max_workers=1, boot_timeout=5)
    study = _cavity(cloud, "mute boot", runs=1)
    failed = wait_for(
        lambda: PoolDecision.objects.filter(pool__name="cfd-mute", action="boot_failed").first(),
        timeout=90,
        what="a failed boot",
    )
    assert "did not register within 5 s" in failed.reason and "next boot in 10 s" in failed.reason
    # how its console ended, read from the cloud before the server went (the fake compute
    # driver's console says the same three lines for every server)
    console = "its console ended: FAKE CONSOLE OUTPUT | ANOTHER | LAST LINE"
    assert failed.reason.endswith(console)
    mute = PoolWorker.objects.get(pool__name="cfd-mute", state="failed")
    assert mute.end_reason.endswith(console)
    wait_for(lambda: _gone(mute.server_id), timeout=60, what="the mute server deleted")
    page = staff.get("/api/v1/admin/pools/cfd-mute/").json()
    assert page["boot_failures"] >= 1 and page["next_boot_at"]
    assert any(w["state"] == "failed" for w in page["workers"])
    # the admin gives boots more time (5 s is too short for a loaded machine to start a pilot);
    # after the backoff a new worker boots, is played this time, registers and takes the run
    r = staff.patch("/api/v1/admin/pools/cfd-mute/", {"boot_timeout": 120}, format="json")
    assert r.status_code == 200, r.content
    body = wait_for(
        lambda: _study_done(cloud, study, "cfd-mute", vms),
        timeout=300,
        interval=1,
        what="the run to finish on a worker that registered",
    )
    assert body["state"] == "completed"
    assert Pool.objects.get(name="cfd-mute").boot_failures == 0  # a registration resets it


def test_pool_settings_out_of_range_are_400s_naming_the_field(cloud, staff):
    base = {
        "name": "bad",
        "backend": cloud.backend.name,
        "flavor": "wt.small",
        "image": cloud.image.digest,
    }
    for change, field in (
        ({"flavor": "no-such-flavor"}, "flavor"),
        ({"image": "sha256:nope"}, "image"),
        ({"min_workers": 3, "max_workers": 2}, "max_workers"),
        ({"max_workers": 51}, "max_workers"),  # the project allows 50 instances
        ({"max_workers": -1}, "max_workers"),
        ({"backend": "no-such-backend"}, "backend"),
        ({"nodes": 2}, "nodes"),
    ):
        r = staff.post("/api/v1/admin/pools/", {**base, **change}, format="json")
        assert r.status_code == 400, (change, r.content)
        assert r.json()["field"] == field, (change, r.content)  # the form shows it there
    _set_project_quota(cores=4)
    r = staff.post(
        "/api/v1/admin/pools/", {**base, "flavor": "wt.large", "max_workers": 2}, format="json"
    )
    assert r.status_code == 400 and r.json()["field"] == "max_workers", r.content
    assert "the OpenStack project allows 4" in r.json()["message"]
    assert not Pool.objects.filter(name="bad").exists()
    ok = staff.post("/api/v1/admin/pools/", {**base, "max_workers": 2}, format="json")
    assert ok.status_code == 201, ok.content
    r = staff.patch("/api/v1/admin/pools/bad/", {"min_workers": 3}, format="json")
    assert r.status_code == 400 and r.json()["field"] == "max_workers", r.content
    r = staff.patch(
        "/api/v1/admin/pools/bad/", {"max_workers": 1, "idle_timeout": 30}, format="json"
    )
    assert r.status_code == 200 and r.json()["max_workers"] == 1
    assert staff.delete("/api/v1/admin/pools/bad/").status_code == 204  # no workers: gone


def test_deleting_a_pool_with_a_running_run_drains_it_first(cloud, staff, vms):
    _pool(staff, cloud, "cfd-drain", max_workers=1)
    study = cloud.http.post(
        "/api/v1/studies/",
        json={
            "name": "drained",
            "template": "cavity",
            "backend": cloud.backend.name,
            "image": cloud.image.digest,
            "parameters": {"lid_velocity": 1, "cells": 40, "end_time": 1},
        },
    ).json()
    wait_for(
        lambda: _play_new_workers("cfd-drain", vms) and _runs(study["id"])[0].state == "running",
        timeout=180,
        interval=1,
        what="the run running",
    )
    r = staff.delete("/api/v1/admin/pools/cfd-drain/")
    assert r.status_code == 202 and r.json()["draining"] is True
    body = wait_for(
        lambda: _study_done(cloud, study, "cfd-drain", vms),
        timeout=300,
        interval=1,
        what="the run to finish on the draining pool",
    )
    run = Run.objects.get(study_id=study["id"])
    assert body["state"] == "completed", (run.message, run.end_reason)  # not cut short
    wait_for(
        lambda: not Pool.objects.filter(name="cfd-drain").exists(), timeout=60, what="pool gone"
    )
    wait_for(lambda: all(_gone(s) for s in vms), timeout=60, what="its server deleted")
    assert Run.objects.get(study_id=study["id"]).attempt == 1


def test_the_leak_reaper_deletes_pool_servers_of_no_live_worker_and_spares_the_live(cloud, staff):
    from dispatch.leaks import leaks_reap
    from orchestration.drivers.base import build_driver
    from orchestration.drivers.capabilities import WorkerSpec

    pool = Pool.objects.get(name=_pool(staff, cloud, "cfd-leaks")["name"])
    Backend.objects.filter(pk=cloud.backend.pk).update(
        settings={**cloud.backend.settings, "leak_grace": 0}
    )
    driver = build_driver("openstack", {**cloud.backend.settings, "leak_grace": 0})
    live = PoolWorker.objects.create(pool=pool, state="idle", cores=1)
    servers = {}
    for worker_id in (str(live.pk), "00000000-0000-4000-8000-00000000dead"):
        spec = WorkerSpec(
            worker_id=worker_id,
            pool=pool.name,
            flavor="wt.small",
            image=_cloud()["image"]["id"],
            portal_url="http://127.0.0.1:9",
            token="x",
            cores=1,
        )
        servers[worker_id] = driver.boot_worker(spec)[0]
    deleted = leaks_reap()
    assert any(
        name.startswith("wt-pool-cfd-leaks-00000000")
        for name in deleted.get(cloud.backend.name, [])
    )
    wait_for(
        lambda: _gone(servers["00000000-0000-4000-8000-00000000dead"]),
        timeout=60,
        what="the leaked worker deleted",
    )
    assert not _gone(servers[str(live.pk)])  # a live worker's server is the portal's: kept
