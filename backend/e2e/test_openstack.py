"""Whole studies on the OpenStack backend: the real stack (uvicorn, Celery, PostgreSQL) against
the loopback control plane of scripts/start-openstack (Keystone, Glance, Nova with the fake
compute driver, Neutron, Heat).

Fake servers go ACTIVE without booting, so the tests play the VM's part: they read each
server's user data back from Nova (as an admin) and run it here, which starts the real agent;
it downloads the case from the portal with its run token, runs real OpenFOAM and reports.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from rest_framework.test import APIClient

from catalog.choices import ImageKind, ImageStatus
from catalog.images import image_compose
from catalog.models import Backend, Image
from compute.cloud import cloud_limits_refresh
from core.testing import wait_for
from dispatch.leaks import leaks_reap
from orchestration.drivers.base import build_driver
from studies.models import Run
from studies.usage import usage_for_tenant
from tenancy.services import api_token_create

ROOT = Path(__file__).resolve().parents[2]
# WT_OPENSTACK_DIR: a control plane of its own (scripts/start-openstack honours it too)
CLOUD_JSON = Path(os.environ.get("WT_OPENSTACK_DIR") or ROOT / ".data" / "openstack") / "cloud.json"
FINAL = ("completed", "completed_with_failures", "cancelled")

pytestmark = [
    pytest.mark.solver,
    pytest.mark.slow,
    pytest.mark.xdist_group("cluster"),
    pytest.mark.skipif(
        not CLOUD_JSON.is_file(),
        reason="no OpenStack control plane (scripts/start-openstack writes .data/openstack/cloud.json)",
    ),
]


def _cloud() -> dict:
    return json.loads(CLOUD_JSON.read_text())


def _admin():
    import openstack

    c = _cloud()
    return openstack.connection.Connection(
        auth=c["admin"], region_name=c["region"], compute_api_version="2.79"
    )


def _settings(tmp_path: Path, **extra) -> dict:
    c = _cloud()
    return {
        "cloud": c["clouds"]["tenant"],
        "clouds_yaml": c["clouds_yaml"],
        "network": "none",
        "boot_timeout": 120,
        "leak_grace": 30,  # a server without a tracked run is a leak after this
        "api_timeout": 5,
        "vm_work_root": str(tmp_path / "vm"),
        "vm_python": sys.executable,  # the VM's python3 (this machine plays the VM)
        **extra,
    }


def _backend(name: str, settings: dict, *, cores: int = 8) -> Backend:
    backend, _ = Backend.objects.update_or_create(
        name=name,
        defaults={
            "kind": "openstack",
            "settings": settings,
            "cores": cores,
            "memory_gb": 16,
            "max_nodes": 8,
            "enabled": True,
        },
    )
    return backend


def _vm_image(backend: Backend) -> Image:
    """The study's VM image, registered as the cloud's base image (what an admin does with
    POST /api/v1/admin/images/<id>/register/ when the image is baked elsewhere)."""
    image, _ = image_compose(packages=["icofoam", "meshing"], kind=ImageKind.VM, build=False)
    glance = _admin().image.find_image(_cloud()["image"]["name"])
    refs = {**(image.references or {}), backend.name: glance.id}
    Image.objects.filter(pk=image.pk).update(status=ImageStatus.READY, references=refs)
    image.refresh_from_db()
    return image


def _set_project_quota(**limits) -> None:
    _admin().set_compute_quotas(_cloud()["tenant"]["project_id"], **limits)


@dataclasses.dataclass(frozen=True)
class Live:
    """A tenant's API client on the live stack, with its OpenStack backend and VM image."""

    http: httpx.Client
    tenant: Any
    backend: Backend
    image: Image
    tmp: Path


@pytest.fixture
def cloud_live(stack, transactional_db, catalog, make_tenant, tmp_path):
    backend = _backend("os-test", _settings(tmp_path))
    image = _vm_image(backend)
    tenant = make_tenant(cores=8, memory_gb=16, max_runs=8, max_nodes=8)
    token = api_token_create(user=tenant.user)
    client = httpx.Client(
        base_url=stack.url, headers={"Authorization": f"Token {token}"}, timeout=30
    )
    base = _cloud()["base_quotas"]
    yield Live(http=client, tenant=tenant, backend=backend, image=image, tmp=tmp_path)
    client.close()
    _set_project_quota(cores=base["cores"], instances=base["instances"], ram=base["ram"])
    driver = build_driver("openstack", backend.settings)
    handles = list(
        Run.objects.exclude(handle="").filter(backend=backend).values_list("handle", flat=True)
    )
    for handle in handles:
        driver.release(handle)
    # the next test starts with an empty project (deletes finish asynchronously in Nova)
    servers = [h.partition(":")[2] for h in handles if h.startswith("server:")]
    wait_for(
        lambda: all(_gone(s) for s in servers) or None,
        timeout=60,
        what="the test's servers deleted",
    )


def _submit(live: Live, spec) -> dict:
    r = live.http.post("/api/v1/studies/", json=spec)
    assert r.status_code == 201, r.text
    return r.json()


def _cavity(live: Live, name, runs=2, **extra) -> dict:
    return _submit(
        live,
        {
            "name": name,
            "template": "cavity",
            "backend": live.backend.name,
            "image": live.image.digest,
            "parameters": {
                "lid_velocity": {"linspace": [1, 2, runs]} if runs > 1 else 1,
                "cells": 10,
                "end_time": 0.1,
            },
            **extra,
        },
    )


def _server(run: Run):
    kind, _, ident = run.handle.partition(":")
    assert kind == "server", run.handle
    return _admin().compute.get_server(ident)


def _user_data(server) -> str:
    return base64.b64decode(server.user_data).decode()


def _play_vm(server) -> subprocess.Popen:
    """Do what cloud-init would: run the server's user data (as root, on this machine)."""
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(ROOT),
        "WM_PROJECT_DIR": "/usr/share/openfoam",
        "HOME": os.environ.get("HOME", "/root"),
    }
    return subprocess.Popen(["sh", "-c", _user_data(server)], env=env, start_new_session=True)


def _runs(study_id) -> list[Run]:
    return list(Run.objects.filter(study_id=study_id).order_by("index"))


def _gone(server_id: str) -> bool:
    return _admin().compute.find_server(server_id, ignore_missing=True) is None


def test_a_study_runs_on_servers_that_are_deleted_when_the_runs_end(cloud_live):
    study = _cavity(cloud_live, "cavity on openstack")
    runs = wait_for(
        lambda: (rs := _runs(study["id"])) and all(r.handle for r in rs) and rs,
        timeout=120,
        what="both runs to get a server",
    )
    servers = [_server(r) for r in runs]
    for run, server in zip(runs, servers, strict=True):
        assert server.metadata["windtunnel_run"] == str(run.id)
        assert server.metadata["windtunnel_attempt"] == str(run.attempt)
        data = _user_data(server)
        assert "-m orchestration.agent" in data and '"fetch_case":true' in data
        assert run.context["lid_velocity"] in (1, 2, 1.0, 2.0)
    wait_for(
        lambda: all(_admin().compute.get_server(s.id).status == "ACTIVE" for s in servers),
        timeout=60,
        what="servers ACTIVE",
    )
    vms = [_play_vm(s) for s in servers]
    try:
        body = wait_for(
            lambda: (
                (b := cloud_live.http.get(f"/api/v1/studies/{study['id']}/").json())["state"]
                in FINAL
                and b
            ),
            timeout=240,
            what="the study to finish",
        )
    finally:
        for vm in vms:
            vm.wait(timeout=60)
    runs = _runs(study["id"])
    assert body["state"] == "completed", [(r.state, r.message) for r in runs]
    rows = cloud_live.http.get(f"/api/v1/studies/{study['id']}/results/").json()["rows"]
    assert len(rows) == 2 and all(row["objectives"] for row in rows)
    for run in runs:
        assert cloud_live.http.get(f"/api/v1/runs/{run.id}/archive/").status_code == 200
        work = cloud_live.tmp / "vm" / str(run.id) / f"attempt-{run.attempt}"
        assert (work / "source" / "system" / "controlDict").is_file()  # fetched from the portal
    wait_for(lambda: all(_gone(s.id) for s in servers), timeout=60, what="servers deleted")
    assert usage_for_tenant(tenant_id=cloud_live.tenant.id).cores == 0


def test_a_project_limit_below_the_quota_holds_runs_as_cloud_project_limit(cloud_live):
    wait_for(  # servers being deleted still count in the project's usage
        lambda: (
            (limits := cloud_limits_refresh(backend=cloud_live.backend)) is not None
            and limits["cores_used"] == 0
        ),
        timeout=60,
        what="an idle project",
    )
    _set_project_quota(cores=1)
    limits = cloud_limits_refresh(backend=cloud_live.backend)
    assert limits is not None and limits["cores"] == 1
    quota = cloud_live.http.get("/api/v1/quota/").json()
    mine = next(b for b in quota["backends"] if b["backend"] == cloud_live.backend.name)
    assert mine["limits"]["cores"] == {"value": 1, "source": "cloud project limit"}
    assert mine["limits"]["memory_gb"]["source"] in ("portal quota", "backend capacity")
    study = _cavity(cloud_live, "held by the cloud", runs=3)

    def held():
        runs = _runs(study["id"])
        started = [r for r in runs if r.handle]
        waiting = [r for r in runs if r.state == "pending" and r.wait_reason == "cloud_limit"]
        return len(started) == 1 and len(waiting) == 2 and waiting

    waiting = wait_for(held, timeout=60, what="one run in, two held by the cloud's limit")
    assert "1 cores in use + 1 for this run, over the 1 cores the OpenStack project" in (
        waiting[0].wait_detail
    )
    api_run = cloud_live.http.get(f"/api/v1/runs/{waiting[0].id}/").json()
    assert api_run["wait_reason"] == "cloud_limit"
    cloud_live.http.post(f"/api/v1/studies/{study['id']}/cancel/")


def test_the_leak_reaper_deletes_a_server_no_run_holds(cloud_live):
    backend = _backend("os-leaks", _settings(cloud_live.tmp, leak_grace=0))
    driver = build_driver("openstack", backend.settings)
    c = _cloud()
    stray = driver.create_server(
        {
            "name": "wt-00000000-0000-4000-8000-00000000dead-a1",
            "image_id": c["image"]["id"],
            "flavor_id": c["flavors"][0]["id"],
            "networks": "none",
            "metadata": {
                "windtunnel_run": "00000000-0000-4000-8000-00000000dead",
                "windtunnel_attempt": "1",
                "windtunnel_kind": "run",
            },
        }
    )
    untouched = driver.create_server(
        {
            "name": "not-ours",
            "image_id": c["image"]["id"],
            "flavor_id": c["flavors"][0]["id"],
            "networks": "none",
        }
    )
    try:
        deleted = leaks_reap()
        assert stray.name in deleted.get("os-leaks", []), deleted
        wait_for(lambda: _gone(stray.id), timeout=60, what="the stray server deleted")
        assert not _gone(untouched.id)  # not made by the portal: never touched
    finally:
        driver.delete_server(untouched.id)
        driver.delete_server(stray.id)


def _nova_api_tree() -> list[psutil.Process]:
    pid = int((ROOT / ".data/openstack/run/nova-api.pid").read_text().split()[0])
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def test_nova_api_stopping_mid_study_leaves_no_leaked_servers(cloud_live):
    study = _cavity(cloud_live, "nova goes away", runs=3)
    wait_for(lambda: any(r.handle for r in _runs(study["id"])), timeout=120, what="a server")
    tree = _nova_api_tree()
    for proc in tree:
        proc.send_signal(signal.SIGSTOP)
    try:
        time.sleep(8)  # dispatches and polls time out and retry meanwhile
    finally:
        for proc in tree:
            proc.send_signal(signal.SIGCONT)
    cloud_live.http.post(f"/api/v1/studies/{study['id']}/cancel/")
    wait_for(
        lambda: all(r.state in ("cancelled", "failed", "completed") for r in _runs(study["id"])),
        timeout=120,
        what="every run ended",
    )
    admin = _admin()

    def ours():
        return [
            s
            for s in admin.compute.servers(all_projects=True, name="^wt-")
            if s.metadata.get("windtunnel_run") in {str(r.id) for r in _runs(study["id"])}
        ]

    # deletions that failed while nova-api was away are retried by the reaper
    leftover = wait_for(
        lambda: (leaks_reap() or True) and not ours() and [True],
        timeout=180,
        interval=5,
        what="no server of the study left",
    )
    assert leftover


def test_the_admin_check_logs_in_and_reads_the_projects_limits(cloud_live, make_tenant):
    ops = make_tenant("ops")
    ops.user.is_staff = True
    ops.user.save()
    client = APIClient()
    client.force_authenticate(ops.user)
    r = client.post(f"/api/v1/admin/backends/{cloud_live.backend.name}/check/")
    assert r.status_code == 200, r.content
    report = r.json()
    assert report["ok"] is True
    assert report["project_limits"]["cores"] == _cloud()["base_quotas"]["cores"]
    assert {f["name"] for f in _cloud()["flavors"]} <= set(report["flavors"])
    broken = _backend("os-broken", {**cloud_live.backend.settings, "cloud": "no-such-cloud"})
    r = client.post(f"/api/v1/admin/backends/{broken.name}/check/")
    assert r.status_code == 200 and r.json()["ok"] is False
    assert "no-such-cloud" in r.json()["error"] or "cloud" in r.json()["error"]


def test_a_two_node_run_is_a_heat_stack_whose_events_reach_the_run_log(cloud_live):
    study = _cavity(
        cloud_live, "two nodes", runs=1, resources={"processes": 2, "nodes": 2, "memory_gb": 2}
    )
    run = wait_for(
        lambda: (rs := _runs(study["id"])) and rs[0].handle and rs[0],
        timeout=120,
        what="the run's stack",
    )
    assert run.handle.startswith("stack:"), run.handle
    driver = build_driver("openstack", cloud_live.backend.settings)
    ident = run.handle.partition(":")[2]
    name, stack_id = ident.split("/", 1)

    def servers():
        return [
            s
            for s in _admin().compute.servers(all_projects=True, name="^wt-")
            if s.metadata.get("windtunnel_stack") == name
        ]

    wait_for(lambda: len(servers()) == 2, timeout=120, what="the stack's two servers")
    assert {s.metadata["windtunnel_role"] for s in servers()} == {"head", "worker"}
    assert all(s.metadata["windtunnel_run"] == str(run.id) for s in servers())

    def logged():
        lines = cloud_live.http.get(f"/api/v1/runs/{run.id}/log/").json().get("lines", [])
        return [x for x in lines if x.startswith("[heat]")] or None

    heat_lines = wait_for(logged, timeout=120, what="stack events in the run log")
    assert any("CREATE_IN_PROGRESS" in x or "CREATE_COMPLETE" in x for x in heat_lines)
    cloud_live.http.post(f"/api/v1/studies/{study['id']}/cancel/")
    wait_for(
        lambda: driver.poll(run.handle).phase.value == "unknown" and not servers(),
        timeout=180,
        what="the stack and its servers deleted",
    )
