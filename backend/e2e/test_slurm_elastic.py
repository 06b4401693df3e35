"""A Slurm backend with an elastic partition, end to end: the admin API validates it against
the cloud, renders what the controller needs and lists the nodes; studies run on cloud
nodes that Slurm's power saving brings up (the harness plays each boot: a slurmd for the
node once its server is ACTIVE in the loopback Nova); a lost node's run is requeued by the
portal and finishes on another node."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from administration.selectors import elastic_nodes_with_runs
from catalog.models import Backend
from compute.backends import elastic_report
from core.testing import wait_for
from dispatch.leaks import leaks_reap
from orchestration.drivers.slurm.elastic_testing import TEST_SETTINGS, BootPlayer
from orchestration.tests.conftest import OPENSTACK_CLOUD_JSON
from orchestration.tests.test_slurm_cluster import cluster, slurm_settings
from orchestration.tests.test_slurm_elastic import needs_elastic
from studies.models import Run
from tenancy.services import api_token_create
from tenancy.testing import LiveClient

CLOUD_JSON = OPENSTACK_CLOUD_JSON
pytestmark = [
    pytest.mark.slow,
    pytest.mark.xdist_group("cluster"),
    needs_elastic,
    pytest.mark.skipif(not CLOUD_JSON.exists(), reason="no OpenStack (scripts/start-openstack)"),
]
URL = "/api/v1/admin/backends/"


def elastic_settings(**extra: Any) -> dict[str, Any]:
    facts = json.loads(CLOUD_JSON.read_text())
    return {
        **TEST_SETTINGS,
        "clouds_yaml": facts["clouds_yaml"],
        "programs_dir": str(Path(cluster()["slurm_conf"]).parent / "elastic"),
        **extra,
    }


def _slurm(*argv: str) -> str:
    env = {**os.environ, "SLURM_CONF": cluster()["slurm_conf"]}
    return subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout


# -- the admin API ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"flavor": "wt.huge"}, "settings.elastic.flavor"),
        ({"image": "no-such-image"}, "settings.elastic.image"),
        ({"nodes": 60}, "settings.elastic.nodes"),  # the project may run 50 instances
        ({"suspend_time": -5}, "settings.elastic.suspend_time"),
        ({"resume_timeout": "soon"}, "settings.elastic.resume_timeout"),
    ],
)
def test_bad_elastic_settings_are_refused_naming_the_field(staff, change, field):
    body = {
        "name": "burst",
        "kind": "slurm",
        "settings": slurm_settings(partition="elastic", elastic=elastic_settings(**change)),
    }
    r = staff.post(URL, body, format="json")
    assert r.status_code == 400, r.json()
    assert r.json()["field"] == field, r.json()


def test_the_admin_renders_the_controllers_files_and_lists_the_nodes(staff):
    body = {
        "name": "burst",
        "kind": "slurm",
        "settings": slurm_settings(partition="elastic", elastic=elastic_settings()),
        "cores": 3,
        "memory_gb": 3,
    }
    r = staff.post(URL, body, format="json")
    assert r.status_code == 201, r.json()
    files = staff.get(f"{URL}burst/elastic/files/").json()["files"]
    conf = files["slurm.conf"]
    # CPUs and memory of the flavor wt.small (1 vCPU, 1024 MB), asked of the cloud
    assert "NodeName=elastic-[1-3] State=CLOUD Feature=cloud CPUs=1 RealMemory=1024" in conf
    assert "SuspendTime=10 ResumeTimeout=40 SuspendTimeout=10" in conf
    config = json.loads(next(v for k, v in files.items() if k.endswith("elastic.json")))
    assert config["cloud"] == "windtunnel-tenant" and "password" not in json.dumps(config)
    report = staff.get(f"{URL}burst/elastic/").json()
    assert report["ok"] is True, report
    assert [n["node"] for n in report["nodes"]] == ["elastic-1", "elastic-2", "elastic-3"]
    assert all(n["slurm_state"] for n in report["nodes"])
    # a backend without an elastic partition: 400 naming the field, never a 500
    plain = {"name": "plain", "kind": "slurm", "settings": slurm_settings(), "cores": 2}
    assert staff.post(URL, {**plain, "memory_gb": 2}, format="json").status_code == 201
    r = staff.get(f"{URL}plain/elastic/")
    assert r.status_code == 400 and r.json()["field"] == "settings.elastic"


# -- studies on cloud nodes ---------------------------------------------------------------


@pytest.fixture
def elastic_live(stack, transactional_db, catalog, make_tenant):
    Backend.objects.update_or_create(
        name="slurm-elastic",
        defaults={
            "kind": "slurm",
            "settings": slurm_settings(partition="elastic", elastic=elastic_settings()),
            "cores": 3,
            "memory_gb": 3,
            "max_nodes": 1,
            "enabled": True,
        },
    )
    tenant = make_tenant(cores=20, memory_gb=40, max_runs=20, max_nodes=20)
    token = api_token_create(user=tenant.user)
    client = LiveClient(base_url=stack.url, headers={"Authorization": f"Token {token}"}, timeout=30)
    with BootPlayer(elastic_dir=elastic_settings()["programs_dir"], boot_delay=2.0) as player:
        yield client, player
    client.close()


def _finished(client, study_id, timeout=300):
    def done():
        body = client.get(f"/api/v1/studies/{study_id}/").json()
        return (
            body if body["state"] in ("completed", "completed_with_failures", "cancelled") else None
        )

    return wait_for(done, timeout=timeout, what=f"study {study_id} to finish")


@pytest.mark.solver
def test_a_study_runs_on_cloud_nodes_slurm_powers_up(elastic_live):
    elastic_live, player = elastic_live
    spec = {
        "name": "cavity on the cloud",
        "template": "cavity",
        "backend": "slurm-elastic",
        "parameters": {"lid_velocity": {"values": [1, 2]}, "cells": 10, "end_time": 0.1},
    }
    r = elastic_live.post("/api/v1/studies/", json=spec)
    assert r.status_code == 201, r.text
    body = _finished(elastic_live, r.json()["id"])
    assert body["state"] == "completed", body
    runs = list(Run.objects.filter(study_id=r.json()["id"]))
    assert len(runs) == 2 and all(run.attempt == 1 for run in runs)
    booted = {e[1] for e in player.events if e[2] == "booted"}
    assert booted, "no cloud node was booted"
    assert booted <= {"elastic-1", "elastic-2", "elastic-3"}


@pytest.mark.solver
def test_a_lost_cloud_node_requeues_its_run_which_finishes_on_another(elastic_live):
    elastic_live, player = elastic_live
    spec = {
        "name": "lost node",
        "template": "cavity",
        "backend": "slurm-elastic",
        "parameters": {"cells": 20, "end_time": 50},  # still solving when the node is lost
    }
    r = elastic_live.post("/api/v1/studies/", json=spec)
    assert r.status_code == 201, r.text
    run_id = Run.objects.get(study_id=r.json()["id"]).id
    wait_for(
        lambda: elastic_live.get(f"/api/v1/runs/{run_id}/telemetry/").json()["available"],
        timeout=180,
        what="the run to solve on a cloud node",
    )
    handle = Run.objects.get(pk=run_id).handle
    node = _slurm("squeue", "-h", "-j", handle, "-o", "%N").strip()
    assert node.startswith("elastic-")
    # the admin page shows the run on its node, the node's CPUs held, its server's image
    backend = Backend.objects.get(name="slurm-elastic")
    report = elastic_nodes_with_runs(backend=backend, report=elastic_report(backend=backend))
    row = next(n for n in report["nodes"] if n["node"] == node)
    assert row["runs"] == [str(run_id)] and row["jobs"] == [handle], row
    assert row["utilisation"] == 1.0 and row["image"] == elastic_settings()["image"], row
    player.lose(node)  # the VM hangs: no more heartbeats from its slurmd
    try:
        run = wait_for(
            lambda: (x := Run.objects.get(pk=run_id)).attempt >= 2 and x,
            timeout=240,
            what="the run requeued after Slurm marks the node DOWN",
        )
        assert "NODE_FAIL" in run.message or "NODE_FAIL" in run.wait_detail or run.attempt == 2
        # the lost node's server goes: Slurm powers the DOWN node off, or the reaper does
        backend = Backend.objects.get(name="slurm-elastic")

        def server_gone():
            leaks_reap()
            return node not in player.cloud.node_servers()

        wait_for(server_gone, timeout=180, what="the lost node's server deleted")
        body = _finished(elastic_live, r.json()["id"], timeout=400)
        run = Run.objects.get(pk=run_id)
        assert body["state"] == "completed", (run.state, run.message)
        assert run.attempt == 2
        assert backend.name == "slurm-elastic"
    finally:
        # the admin's step after a lost node: back into service, powered down
        wait_for(
            lambda: _slurm("sinfo", "-h", "-N", "-n", node, "-o", "%T").strip().endswith("~"),
            timeout=120,
            what="the lost node powered down",
        )
        _slurm("scontrol", "update", f"nodename={node}", "state=resume")
