"""Whole studies through the Slurm backend on the real stack and the private test cluster of
scripts/start-slurm: uvicorn, Celery, PostgreSQL, slurmctld + slurmd, sshd, the run agent
inside batch jobs and real OpenFOAM on tiny cases."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from catalog.models import Backend
from core.crypto import encrypt_json
from core.testing import wait_for
from orchestration.drivers.base import build_driver
from orchestration.drivers.slurm import parse_handle
from orchestration.tests.test_slurm_cluster import (
    ROOT,
    cluster,
    needs_slurm,
    needs_ssh,
    slurm_settings,
    squeue,
    ssh_secrets,
    ssh_settings,
)
from studies.choices import TERMINAL_STATES
from studies.models import Run
from studies.usage import usage_for_tenant
from tenancy.testing import LiveClient

pytestmark = [pytest.mark.solver, pytest.mark.slow, needs_slurm, pytest.mark.xdist_group("cluster")]

FINAL = ("completed", "completed_with_failures", "cancelled")


def _backend(name: str, settings: dict, *, cores: int = 20, secrets: dict | None = None):
    backend, _ = Backend.objects.update_or_create(
        name=name,
        defaults={
            "kind": "slurm",
            "settings": settings,
            "cores": cores,  # more than the test node's CPUs: Slurm itself queues the rest
            "memory_gb": 40,
            "max_nodes": 1,
            "enabled": True,
            "secrets": encrypt_json(secrets or {}),
        },
    )
    return backend


@pytest.fixture
def cluster_live(stack, transactional_db, catalog, make_tenant):
    """The stack, Slurm backends (local transport; SSH; a 1-minute time limit) and a tenant
    whose quota lets 20 runs in at once."""
    from tenancy.services import api_token_create

    _backend("slurm", slurm_settings())
    _backend("slurm-short", slurm_settings(time_limit="1"))
    if (ROOT / ".data/slurm/ssh/sshd.pid").exists():
        _backend("slurm-ssh", ssh_settings(), secrets=ssh_secrets())
    tenant = make_tenant(cores=20, memory_gb=40, max_runs=20, max_nodes=20)
    token = api_token_create(user=tenant.user)
    client = LiveClient(base_url=stack.url, headers={"Authorization": f"Token {token}"}, timeout=30)
    client.tenant = tenant
    yield client
    client.close()
    for run in Run.objects.exclude(handle="").filter(
        backend__kind="slurm", state__in=("provisioning", "running")
    ):
        b = run.backend
        opts = {**b.settings, "secrets": ssh_secrets()} if b.name == "slurm-ssh" else b.settings
        build_driver("slurm", opts).cancel(run.handle, grace=0)


def _finished(client, study_id, timeout=240):
    def done():
        body = client.get(f"/api/v1/studies/{study_id}/").json()
        return body if body["state"] in FINAL else None

    return wait_for(done, timeout=timeout, what=f"study {study_id} to finish")


def _objectives(client, study_id, key):
    rows = client.get(f"/api/v1/studies/{study_id}/results/").json()["rows"]
    return {row["parameters"][key]: row["objectives"] for row in rows}


def _submit(client, spec):
    r = client.post("/api/v1/studies/", json=spec)
    assert r.status_code == 201, r.text
    return r.json()


def test_airfoil_study_through_slurm_equals_the_local_backend(cluster_live):
    base = {"template": "airfoil2d", "parameters": {"aoa": {"values": [0, 4, 8]}, "iterations": 60}}
    on_slurm = _submit(cluster_live, {**base, "name": "aoa on slurm", "backend": "slurm"})
    on_local = _submit(cluster_live, {**base, "name": "aoa locally", "backend": "local"})
    s, loc = _finished(cluster_live, on_slurm["id"]), _finished(cluster_live, on_local["id"])
    assert s["state"] == loc["state"] == "completed", (s, loc)
    slurm_rows, local_rows = (
        _objectives(cluster_live, x["id"], "aoa") for x in (on_slurm, on_local)
    )
    assert slurm_rows.keys() == local_rows.keys() == {0, 4, 8}
    for aoa, objectives in local_rows.items():
        for name, value in objectives.items():
            assert slurm_rows[aoa][name] == pytest.approx(value, rel=1e-9, abs=1e-12), (aoa, name)
    runs = list(Run.objects.filter(study_id=on_slurm["id"]))
    assert all(parse_handle(r.handle) for r in runs)  # Slurm job ids (array tasks or jobs)
    assert all(r.attempt == 1 for r in runs)
    run = runs[0]
    detail = cluster_live.get(f"/api/v1/runs/{run.id}/").json()
    assert detail["backend_handle"] == run.handle  # the job id to look for in squeue/sacct
    tele = cluster_live.get(f"/api/v1/runs/{run.id}/telemetry/").json()
    assert "forceCoeffs.Cl" in tele["available"] and "residual.p" in tele["available"]
    assert cluster_live.get(f"/api/v1/runs/{run.id}/archive/").status_code == 200
    assert usage_for_tenant(tenant_id=cluster_live.tenant.id).cores == 0


@needs_ssh
def test_cavity_study_over_ssh_equals_the_local_backend(cluster_live):
    base = {
        "template": "cavity",
        "parameters": {"lid_velocity": {"values": [1, 2]}, "cells": 10, "end_time": 0.1},
    }
    over_ssh = _submit(cluster_live, {**base, "name": "cavity ssh", "backend": "slurm-ssh"})
    on_local = _submit(cluster_live, {**base, "name": "cavity local", "backend": "local"})
    s, loc = _finished(cluster_live, over_ssh["id"]), _finished(cluster_live, on_local["id"])
    assert s["state"] == loc["state"] == "completed", (s, loc)
    remote, local = (
        _objectives(cluster_live, x["id"], "lid_velocity") for x in (over_ssh, on_local)
    )
    assert remote.keys() == local.keys() == {1, 2}
    for lid, objectives in local.items():
        for name, value in objectives.items():
            assert remote[lid][name] == pytest.approx(value, rel=1e-9, abs=1e-12), (lid, name)
    home = cluster()["ssh"]["home"]
    for run in Run.objects.filter(study_id=over_ssh["id"]):
        assert parse_handle(run.handle)
        remote_dir = Path(home) / "windtunnel-test" / "runs" / str(run.id) / "attempt-1"
        assert (remote_dir / "run.json").is_file()  # written over SFTP as the cluster user
        assert remote_dir.stat().st_uid != 0
        archive = cluster_live.get(f"/api/v1/runs/{run.id}/archive/")
        assert archive.status_code == 200  # results came back through the agent


def test_twenty_runs_go_as_one_job_array_and_wait_with_slurms_reason(cluster_live):
    spec = {
        "name": "array",
        "template": "cavity",
        "backend": "slurm",
        "parameters": {
            "lid_velocity": {"linspace": [0.5, 2.0, 20]},
            "cells": 10,
            "end_time": 0.1,
        },
    }
    study = _submit(cluster_live, spec)
    reasons: set[str] = set()

    def done():
        for run in cluster_live.get(
            f"/api/v1/studies/{study['id']}/runs/", params={"page_size": 50}
        ).json()["results"]:
            if run["phase"] == "queued":
                reasons.add(run["message"])
        body = cluster_live.get(f"/api/v1/studies/{study['id']}/").json()
        return body if body["state"] in FINAL else None

    body = wait_for(done, timeout=300, interval=0.5, what="the array study")
    runs = list(Run.objects.filter(study_id=study["id"]))
    assert body["state"] == "completed", [(r.state, r.message) for r in runs]
    handles = [parse_handle(r.handle) for r in runs]
    tasks = [h for h in handles if h is not None and h[1] is not None]  # (job, array task)
    assert len(runs) == 20 and len(tasks) == len(handles), handles
    assert len({job for job, _ in tasks}) <= 2  # one array (two if admission came in two waves)
    assert any("queued on slurm: Resources" in r or "Priority" in r for r in reasons), reasons
    assert all(r.attempt == 1 for r in runs)


def _long_cavity(client, name, backend="slurm", *, runs=1, cells=20, end_time=100):
    spec = {
        "name": name,
        "template": "cavity",
        "backend": backend,
        "parameters": {
            "cells": cells,
            "end_time": end_time,
            "lid_velocity": {"linspace": [1, 2, runs]},
        },
    }
    return _submit(client, spec)


def _job_state(handle: str) -> str:
    return squeue("-h", "-t", "all", "-j", handle, "-o", "%T").strip()


def test_cancel_of_pending_and_running_slurm_runs_frees_their_jobs(cluster_live):
    cpus = cluster()["cpus"]
    study = _long_cavity(cluster_live, "to cancel", runs=cpus + 1)  # one more than fits

    def started():
        runs = list(Run.objects.filter(study_id=study["id"]).exclude(handle=""))
        running = [r for r in runs if r.state == "running"]
        waiting = [r for r in runs if r.state == "provisioning"]
        return (running[0], waiting[0]) if len(running) == cpus and waiting else None

    running, pending = wait_for(started, timeout=90, what="runs to start and queue")
    assert _job_state(pending.handle) == "PENDING"
    r = cluster_live.post(f"/api/v1/runs/{pending.id}/cancel/")
    assert r.status_code == 200 and r.json()["state"] == "cancelled"
    wait_for(lambda: _job_state(pending.handle) == "CANCELLED", timeout=30, what="scancel")
    r = cluster_live.post(f"/api/v1/runs/{running.id}/cancel/")
    assert r.status_code == 200
    wait_for(
        lambda: _job_state(running.handle) in ("COMPLETED", "CANCELLED", "FAILED"),
        timeout=40,
        what="the running job to end",
    )
    cluster_live.post(f"/api/v1/studies/{study['id']}/cancel/")
    wait_for(
        lambda: all(
            _job_state(r.handle) not in ("RUNNING", "PENDING", "COMPLETING")
            for r in Run.objects.filter(study_id=study["id"]).exclude(handle="")
        ),
        timeout=40,
        what="every job of the study to end",
    )
    assert usage_for_tenant(tenant_id=cluster_live.tenant.id).runs == 0


def test_a_slurm_time_limit_fails_the_run_with_slurms_reason(cluster_live):
    # 60x60 to t=100: minutes of icoFoam here, far past the 1-minute limit
    study = _long_cavity(cluster_live, "too long", backend="slurm-short", cells=60)
    run_id = Run.objects.get(study_id=study["id"]).id
    body = _finished(cluster_live, study["id"], timeout=200)  # 1 min + Slurm's 30 s check
    run = cluster_live.get(f"/api/v1/runs/{run_id}/").json()
    assert body["state"] == "completed_with_failures"
    assert run["state"] == "failed", run
    assert "Slurm: TIMEOUT (time limit)" in run["message"], run["message"]
    assert run["end_reason"] == "terminated"


def test_slurmctld_restarted_mid_study_loses_nothing(cluster_live):
    spec = {
        "name": "restart",
        "template": "cavity",
        "backend": "slurm",
        # 400-1,400 steps each, a few seconds of work in all on two CPUs: the controller goes
        # down while runs are still queued or solving (a started run may already have ended:
        # the first sight of one can come after its short life)
        "parameters": {"cells": 10, "end_time": {"values": [2, 3, 4, 5, 6, 7]}},
    }
    study = _submit(cluster_live, spec)
    runs = Run.objects.filter(study_id=study["id"])
    wait_for(
        lambda: runs.filter(started_at__isnull=False).exists(),
        timeout=90,
        what="a run to start",
    )
    pidfile = ROOT / ".data/slurm/run/slurmctld.pid"
    pid = int(pidfile.read_text())
    os.kill(pid, signal.SIGTERM)
    assert runs.exclude(state__in=TERMINAL_STATES).exists()  # mid-study, really
    wait_for(lambda: not _alive(pid), timeout=30, what="slurmctld to stop")
    time.sleep(2)  # jobs finish, agents report, the portal polls, all without a controller
    out = subprocess.run(
        [str(ROOT / "scripts/start-slurm")], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    body = _finished(cluster_live, study["id"], timeout=240)
    ended = list(runs)
    assert body["state"] == "completed", [(r.state, r.message) for r in ended]
    assert all(r.attempt == 1 for r in ended)  # nothing lost, nothing run twice
    assert len({r.handle for r in ended}) == 6


def test_a_study_submitted_while_slurmctld_is_down_waits_and_runs_once_it_is_back(
    cluster_live,
):
    """sbatch cannot reach the controller: the runs go back to the queue with backoff
    (wait reason 'retry', saying when), without using up a retry, and run once the
    controller is back: every run completes, no retry counted."""
    # no retries in the driver: the portal's own (with backoff, counted apart) take over
    _backend("slurm-quick", slurm_settings(submit_retry_seconds=0, retries=0))
    pidfile = ROOT / ".data/slurm/run/slurmctld.pid"
    pid = int(pidfile.read_text())
    os.kill(pid, signal.SIGTERM)
    wait_for(lambda: not _alive(pid), timeout=30, what="slurmctld to stop")
    try:
        spec = {
            "name": "outage",
            "template": "cavity",
            "backend": "slurm-quick",
            "parameters": {"cells": 10, "end_time": {"values": [0.2, 0.3]}},
        }
        study = _submit(cluster_live, spec)
        runs = Run.objects.filter(study_id=study["id"])
        waiting = wait_for(
            lambda: (r := runs.filter(dispatch_failures__gte=1, state="pending").first()) and r,
            timeout=90,
            what="a run to wait for the controller",
        )
        assert waiting.wait_reason == "retry", waiting.wait_reason
        # sbatch's own words, or (a Slurm command waits 9 s for a controller that is down,
        # longer than the tests' dispatch timeout) the reaper's
        detail = waiting.wait_detail
        assert "Unable to contact slurm controller" in detail or "did not take the run" in detail
        assert "trying again at" in detail, detail
    finally:
        out = subprocess.run(
            [str(ROOT / "scripts/start-slurm")], capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, out.stderr
    body = _finished(cluster_live, study["id"], timeout=240)
    done = list(runs)
    assert body["state"] == "completed", [(r.state, r.message) for r in done]
    assert all(r.attempt - r.dispatch_failures == 1 for r in done)  # no retry used up
    assert any(r.dispatch_failures >= 1 for r in done)


def test_a_job_that_ends_before_its_agent_reports_fails_at_once_with_its_log(cluster_live):
    """No agent on the nodes (here: a Python that does not exist): the job fails at once;
    the run says so with the last lines of agent.log, and is not retried (it would fail the
    same way), instead of waiting for the heartbeat timeout."""
    _backend("slurm-broken", slurm_settings(python="/opt/nowhere/bin/python3"))
    spec = {"name": "broken", "template": "cavity", "backend": "slurm-broken"}
    study = _submit(cluster_live, spec)
    body = _finished(cluster_live, study["id"], timeout=120)
    (run,) = Run.objects.filter(study_id=study["id"])
    assert body["state"] == "completed_with_failures" and run.state == "failed", run.message
    assert "ended before its agent reported" in run.message, run.message
    assert "/opt/nowhere/bin/python3" in run.message, run.message  # the shell's own words
    assert run.attempt == 1 and run.end_reason == "dispatch_failed"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is not alive
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def _scontrol(*args: str, check: bool = True) -> None:
    subprocess.run(
        ["scontrol", *args],
        env={**os.environ, "SLURM_CONF": cluster()["slurm_conf"]},
        check=check,
        timeout=30,
    )


def test_a_node_failure_requeues_the_run_and_the_next_attempt_finishes(cluster_live):
    spec = {
        "name": "node failure",
        "template": "cavity",
        "backend": "slurm",
        # long enough (20,000 steps, several seconds of icoFoam) to be still solving when its
        # first points are in: an unwatched run reports after 2 s, then every 2 s
        "parameters": {"cells": 20, "end_time": 50},
    }
    study = _submit(cluster_live, spec)
    run_id = Run.objects.get(study_id=study["id"]).id
    wait_for(
        lambda: cluster_live.get(f"/api/v1/runs/{run_id}/telemetry/").json()["available"],
        timeout=90,
        what="the run to solve",
    )
    node = cluster()["node"]
    try:
        _scontrol("update", f"nodename={node}", "state=down", "reason=windtunnel-test")
        run = wait_for(
            lambda: (r := Run.objects.get(pk=run_id)).attempt >= 2 and r,
            timeout=90,
            what="the run to be requeued",
        )
        assert "NODE_FAIL" in run.message or "NODE_FAIL" in run.wait_detail, (
            run.message,
            run.wait_detail,
        )
    finally:
        # ReturnToService=2 may have brought it back already
        _scontrol("update", f"nodename={node}", "state=resume", check=False)
    body = _finished(cluster_live, study["id"], timeout=180)
    run = Run.objects.get(pk=run_id)
    assert body["state"] == "completed", (run.state, run.message)
    assert run.attempt == 2 and run.state == "completed"


def test_a_job_slurm_ends_before_its_agent_starts_is_retried(cluster_live):
    """Slurm itself ends a job before its agent has written a line (here an scancel from
    outside the portal while the job waits; in the chaos benchmark, a job Slurm could not
    launch for a duplicate job id after slurmctld lost its state): nothing of the run ran,
    so it goes back to the queue and its next attempt finishes."""
    node = cluster()["node"]
    env = {**os.environ, "SLURM_CONF": cluster()["slurm_conf"]}
    _scontrol("update", f"nodename={node}", "state=drain", "reason=windtunnel-test")
    try:
        study = _submit(
            cluster_live, {"name": "cancelled by Slurm", "template": "cavity", "backend": "slurm"}
        )
        run = wait_for(
            lambda: (
                (r := Run.objects.filter(study_id=study["id"]).exclude(handle="").first())
                and r.state == "provisioning"
                and r
            ),
            timeout=90,
            what="the run's job to wait in Slurm's queue",
        )
        assert _job_state(run.handle) == "PENDING"
        subprocess.run(["scancel", run.handle], env=env, check=True, timeout=30)
        requeued = wait_for(
            lambda: (r := Run.objects.get(pk=run.pk)).attempt >= 2 and r,
            timeout=90,
            what="the run to go back to the queue",
        )
        assert "CANCELLED" in requeued.message or "CANCELLED" in requeued.wait_detail, (
            requeued.message,
            requeued.wait_detail,
        )
    finally:
        _scontrol("update", f"nodename={node}", "state=resume", check=False)
    body = _finished(cluster_live, study["id"], timeout=180)
    run = Run.objects.get(pk=run.pk)
    assert body["state"] == "completed", (run.state, run.message)
    assert run.attempt == 2


def test_a_run_on_slurm_continues_from_its_write_in_the_clusters_run_folder(cluster_live):
    """The next attempt's batch job finds the earlier attempt's folder beside its own on the
    cluster and goes on from its write; its series go on from the old ones."""
    study = _submit(
        cluster_live,
        {
            "name": "continued on slurm",
            "template": "airfoil2d",
            "backend": "slurm",
            "parameters": {"aoa": {"values": [4]}, "iterations": 30},
        },
    )
    assert _finished(cluster_live, study["id"])["state"] == "completed"
    run = Run.objects.get(study_id=study["id"])
    r = cluster_live.post(f"/api/v1/runs/{run.pk}/continue/", json={"iterations": 15})
    assert r.status_code == 202, r.text

    def ended():
        body = cluster_live.get(f"/api/v1/runs/{run.pk}/").json()
        return body if body["attempt"] == 2 and body["state"] in TERMINAL_STATES else None

    done = wait_for(ended, timeout=240, what="the continued run to end")
    assert done["state"] == "completed", done["message"]
    assert done["iterations"] == 45 and done["continuation"]["writes"] == ["30", "45"]
    assert done["provenance"]["resumed_from"]["time"] == "30"
    cl = cluster_live.get(
        f"/api/v1/runs/{run.pk}/telemetry/", params={"series": "forceCoeffs.Cl"}
    ).json()["series"]["forceCoeffs.Cl"]
    assert cl["x"] == [float(i) for i in range(1, 46)]
