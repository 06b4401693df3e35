"""On the portal's own cores a run hands its cores to the next run shortly before its last
step ends (orchestration/agent/handover.py): the agent's `finishing` gives them back and
schedules the tenant, and a run started then is told to wait for it (run.json `after`)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from catalog.models import Backend
from compute.drivers import driver_for, run_work_dir
from core.jobs import Job
from dispatch.start import run_spec, with_handover
from ingest.tests.reports import send_report
from studies.models import Run
from studies.transitions import run_token
from studies.usage import usage_for_tenant


def _on(run, kind: str) -> Backend:
    backend, _ = Backend.objects.update_or_create(
        name=f"handover-{kind}", defaults={"kind": kind, "cores": 64, "memory_gb": 256}
    )
    Run.objects.filter(pk=run.pk).update(backend=backend, handle="4194304:1.0")
    return backend


def test_a_local_run_about_to_end_gives_its_cores_to_the_next_run(running, published):
    run, client = running
    local = _on(run, "local")
    assert usage_for_tenant(tenant_id=run.tenant_id).cores == run.processes
    beat = send_report(client, run.pk, "heartbeat", {"attempt": 2, "phase": "finishing"})
    assert beat.status_code == 200 and beat.json()["stop"] is False
    fresh = Run.objects.get(pk=run.pk)
    assert (fresh.state, fresh.phase) == ("running", "finishing")
    assert fresh.released_at is not None
    assert usage_for_tenant(tenant_id=run.tenant_id).cores == 0
    assert any(job == Job.SCHEDULE_TENANT for job, _, _ in published.jobs)
    # a run started on that backend now waits for this one's last step
    assert with_handover(local, []) == []
    spec = run_spec(run=fresh, study=fresh.study, token=run_token(run_id=run.pk, attempt=2))
    (handed,) = with_handover(local, [spec])
    assert handed.handover == 0.5
    assert handed.after == (run_work_dir(run_id=run.pk, attempt=2),)
    # its final report in, it is over: nobody waits for it any more
    final = send_report(client, run.pk, "state", {"attempt": 2, "state": "completed"})
    assert final.status_code == 200, final.content
    assert with_handover(local, [spec])[0].after == ()


def test_a_run_elsewhere_keeps_its_cores_until_its_final_report(running, published):
    run, client = running
    _on(run, "slurm")
    beat = send_report(client, run.pk, "heartbeat", {"attempt": 2, "phase": "finishing"})
    assert beat.status_code == 200
    assert Run.objects.get(pk=run.pk).released_at is None
    assert usage_for_tenant(tenant_id=run.tenant_id).cores == run.processes


def test_the_local_driver_writes_the_lead_and_the_locks_to_wait_for(running, settings, tmp_path):
    run, _ = running
    settings.RUNS_DIR = tmp_path / "runs"
    local = _on(run, "local")
    run.refresh_from_db()
    earlier = run_work_dir(run_id="00000000-0000-0000-0000-000000000001", attempt=1)
    spec = run_spec(run=run, study=run.study, token="t")
    spec = dataclasses.replace(spec, handover=0.5, after=(earlier,))
    driver = driver_for(local)
    driver.prepare(spec)
    written = json.loads((Path(spec.work_dir) / "run.json").read_text())
    assert written["handover"] == 0.5
    assert written["after"] == [f"{earlier}/handover.lock"]
