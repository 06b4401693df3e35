"""A study's cancel answers at once, whatever its size: the study is cancelled in the
request, its queued runs are ended in chunks by the worker (studies.services), and nothing
admits them meanwhile, not even an admission pass that raced the cancel (here, with the
scheduler, because admission is the fence's other side)."""

import threading

import pytest
from django.db import connection, transaction

from catalog.models import Backend
from core.jobs import Job
from quotas.models import Quota
from scheduler.admission import admit
from studies import extension
from studies import state as study_state
from studies.choices import RunState
from studies.deletion import study_delete_rows
from studies.models import Run, Study
from studies.services import study_create
from studies.state import study_cancel, study_cancel_queued
from studies.tasks import cancel_queued_runs
from studies.transitions import runs_admit
from studies.usage import queued_demand_for_tenant

RUNS = 2500


def _big(tenant, n=RUNS):
    Backend.objects.update_or_create(
        name="bench", defaults={"kind": "noop", "cores": 64, "memory_gb": 256, "max_nodes": 1}
    )
    Quota.objects.filter(tenant=tenant).update(max_queued_runs=2 * n, cores=64, max_runs=64)
    return study_create(
        tenant=tenant,
        owner=tenant.user,
        spec={
            "name": "big",
            "template": "cavity",
            "backend": "bench",
            "parameters": {"lid_velocity": {"linspace": [0.5, 2.0, n]}},
        },
        submit=True,
    )


def _states(study) -> dict[str, int]:
    rows = Run.objects.filter(study=study).order_by().values_list("state")
    out: dict[str, int] = {}
    for (state,) in rows:
        out[state] = out.get(state, 0) + 1
    return out


def test_cancel_answers_with_the_study_cancelled_before_its_queued_runs_are_ended(
    api, published, monkeypatch
):
    monkeypatch.setattr(study_state, "CANCEL_CHUNK", 1000)
    study = _big(api.tenant)
    demand = queued_demand_for_tenant(tenant_id=api.tenant.id)
    assert (demand.runs, demand.cores) == (RUNS, RUNS * study.processes)
    assert demand.memory_gb == pytest.approx(RUNS * study.memory_gb)
    published.jobs.clear()
    published.messages.clear()
    r = api.post(f"/api/v1/studies/{study.pk}/cancel/")
    assert r.status_code == 200, r.json()
    body = r.json()
    assert body["state"] == "cancelled"
    # the queued runs are still pending in the table: the request did not wait for them...
    assert _states(study) == {"pending": RUNS}
    # ...yet every read shows them cancelled, and cancelling in the background
    progress = body["progress"]
    assert (progress["cancelled"], progress["active"], progress["cancelling"]) == (RUNS, 0, RUNS)
    assert progress["by_state"]["pending"] == 0
    page = api.get(f"/api/v1/studies/{study.pk}/runs/?page_size=5").json()
    assert {run["state"] for run in page["results"]} == {"cancelled"}
    assert {run["queue_position"] for run in page["results"]} == {None}
    csv = b"".join(api.get(f"/api/v1/studies/{study.pk}/results.csv")).decode()
    rows = csv.strip().splitlines()[1:]
    assert len(rows) == RUNS and all(",cancelled," in row for row in rows)
    # the quota panel's queued demand counts them no more
    assert queued_demand_for_tenant(tenant_id=api.tenant.id).runs == 0
    # nothing admits them: an admission pass finds nothing to start
    assert admit(tenant_id=api.tenant.id, publish=False) == []
    assert _states(study) == {"pending": RUNS}
    # the background half was asked for, by name, once
    flips = [a for job, a, _ in published.jobs if job == Job.CANCEL_QUEUED_RUNS]
    assert flips == [(str(study.pk), api.tenant.user.username)]
    published.messages.clear()
    cancel_queued_runs(*flips[0])  # the worker's job
    assert _states(study) == {"cancelled": RUNS}
    fresh = Run.objects.get(study=study, index=0)
    assert fresh.message == f"cancelled by {api.tenant.user.username}"
    assert fresh.finished_at == Study.objects.get(pk=study.pk).finished_at
    # its progress went out chunk by chunk: the page counts "cancelling: N of M" down
    study_events = [m for _, m in published.messages if m.get("type") == "study"]
    assert len(study_events) == 3  # 2,500 runs, 1,000 a chunk
    assert all(m["progress"] == {"cancelled": RUNS} for m in study_events)
    after = api.get(f"/api/v1/studies/{study.pk}/").json()["progress"]
    assert (after["cancelled"], after["cancelling"]) == (RUNS, 0)
    # every run's own event, from the worker's PUBLISH_RUNS jobs
    chunks = [a[0] for job, a, _ in published.jobs if job == Job.PUBLISH_RUNS]
    assert sum(len(c) for c in chunks) == RUNS
    # idempotent: a repeat (a redelivered job) finds nothing left
    assert study_cancel_queued(study_id=study.pk) == 0
    # a second cancel is refused, naming why
    again = api.post(f"/api/v1/studies/{study.pk}/cancel/")
    assert again.status_code == 409 and "cancelled already" in again.json()["message"]


def test_a_cancelled_study_still_ending_its_runs_can_be_deleted_but_not_extended(api, published):
    study = _big(api.tenant, n=20)
    study_cancel(study=study, by=api.tenant.user)
    r = api.post(
        f"/api/v1/studies/{study.pk}/extend/",
        {"parameters": {"lid_velocity": {"values": [9]}}},
        format="json",
    )
    assert r.status_code == 409 and "still ending" in r.json()["message"], r.json()
    assert api.delete(f"/api/v1/studies/{study.pk}/").status_code == 204
    study_delete_rows(study_id=study.pk)  # the worker's job
    assert not Run.objects.filter(study_id=study.pk).exists()


def test_runs_queued_after_the_cancel_are_not_ended_by_it(api, published):
    study = _big(api.tenant, n=20)
    study_cancel(study=study, by=api.tenant.user)
    study_cancel_queued(study_id=study.pk)
    # extended once the cancel is done: the new runs are queued and stay so
    assert extension.study_extend(study=study, parameters={"lid_velocity": {"values": [9]}}) == 1
    assert study_cancel_queued(study_id=study.pk) == 0
    assert _states(study) == {"cancelled": 20, "pending": 1}


def _until_a_session_waits_for_a_lock() -> None:
    with connection.cursor() as cur:
        for _ in range(3000):
            cur.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND wait_event_type = 'Lock'"
            )
            if cur.fetchone()[0]:
                return
            cur.execute("SELECT pg_sleep(0.01)")
    raise AssertionError("the cancel never waited for the admission pass")


@pytest.mark.django_db(transaction=True)
def test_an_admission_pass_racing_the_cancel_leaves_no_run_to_start(make_tenant, catalog):
    """The pass holds the quota row; the cancel waits for it, then cancels what it
    admitted (the running-run path); the queued rest is never admitted."""
    tenant = make_tenant(cores=64, memory_gb=256, max_runs=64)
    study = _big(tenant, n=200)
    ids = list(study.runs.order_by("index").values_list("pk", flat=True)[:10])
    holding = threading.Event()
    errors: list[BaseException] = []

    def admission_pass():  # as scheduler.admission does: quota row first, then admit
        try:
            with transaction.atomic():
                Quota.objects.select_for_update().get(tenant=tenant)
                holding.set()
                _until_a_session_waits_for_a_lock()  # the cancel, behind this pass
                # it read the queue before the cancel: it admits 10 runs of the study
                assert runs_admit(run_ids=ids, publish=False) == 10
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=admission_pass)
    thread.start()
    assert holding.wait(30)
    cancelled_now = study_cancel(study=study, by=tenant.user)  # waits for the pass's commit
    thread.join(30)
    assert not errors, errors
    assert cancelled_now == 10  # the 10 it admitted, cancelled as running runs are
    assert admit(tenant_id=tenant.id, publish=False) == []
    assert study_cancel_queued(study_id=study.pk) == 190
    assert _states(study) == {"cancelled": 200}
    assert not Run.objects.filter(study=study, state=RunState.ADMITTED).exists()


def test_a_lost_background_cancel_is_done_again_by_the_periodic_settle(api, published):
    study = _big(api.tenant, n=20)
    study_cancel(study=study, by=api.tenant.user)
    published.jobs.clear()  # the worker lost the job
    study_state.studies_settle()
    again = [a for job, a, _ in published.jobs if job == Job.CANCEL_QUEUED_RUNS]
    assert again == [(str(study.pk),)]
    cancel_queued_runs(*again[0])
    assert _states(study) == {"cancelled": 20}
    published.jobs.clear()
    study_state.studies_settle()  # nothing left to end: not sent again
    assert not [a for job, a, _ in published.jobs if job == Job.CANCEL_QUEUED_RUNS]
