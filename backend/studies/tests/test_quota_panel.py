"""The quota panel's core-hour budget and storage: what the tenant's runs used this period
(calendar month, UTC) and what the portal stores for it, next to the limits."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from studies.models import Run, Upload
from studies.services import study_create
from studies.usage import GB, budget_period_start, storage_used_bytes

SPEC = {"name": "s", "template": "airfoil2d", "parameters": {"aoa": {"values": [0, 2, 4, 6]}}}


def _runs(tenant) -> list[Run]:
    study = study_create(tenant=tenant, owner=tenant.user, spec=SPEC, submit=True)
    return list(study.runs.order_by("index"))


def test_core_hours_count_only_this_periods_part_of_each_run(api, make_tenant):
    now = timezone.now()
    start = budget_period_start(now=now)
    d = min(timedelta(hours=1), (now - start) / 2)  # stays in the past early in a month
    across, running, last_month, queued = _runs(api.tenant)
    # ran from before the period into it: only its part in the period counts
    Run.objects.filter(pk=across.pk).update(
        state="completed", processes=4, started_at=start - timedelta(hours=2), finished_at=start + d
    )
    # still running: counts up to now
    Run.objects.filter(pk=running.pk).update(state="running", processes=2, started_at=start + d)
    # ended last month: nothing
    Run.objects.filter(pk=last_month.pk).update(
        state="completed",
        processes=8,
        started_at=start - timedelta(hours=5),
        finished_at=start - timedelta(hours=1),
    )
    del queued  # never started: nothing
    other = make_tenant()
    Run.objects.filter(pk=_runs(other)[0].pk).update(
        state="running", processes=16, started_at=start
    )
    api.tenant.quota.core_hours_budget = 100
    api.tenant.quota.save()

    body = api.get("/api/v1/quota/").json()

    hours = (timezone.now() - (start + d)).total_seconds() / 3600
    expected = 4 * d.total_seconds() / 3600 + 2 * hours
    assert body["core_hours"]["used"] == pytest.approx(expected, abs=0.01)
    assert body["core_hours"]["budget"] == 100
    assert body["core_hours"]["period_start"].startswith(start.strftime("%Y-%m-01T00:00:00"))


def test_a_run_that_gave_its_cores_back_stops_counting_when_it_did(api):
    now = timezone.now()
    start = budget_period_start(now=now)
    run = _runs(api.tenant)[0]
    began = max(start, now - timedelta(hours=2))
    Run.objects.filter(pk=run.pk).update(
        state="running", processes=3, started_at=began, released_at=began + (now - began) / 2
    )
    used = api.get("/api/v1/quota/").json()["core_hours"]["used"]
    assert used == pytest.approx(3 * (now - began).total_seconds() / 2 / 3600, abs=0.01)


def test_storage_sums_uploads_archives_and_the_run_directories_the_portal_keeps(api, make_tenant):
    Upload.objects.create(
        tenant=api.tenant, filename="a.zip", size_bytes=10, unpacked_bytes=2 * GB, path="/x"
    )
    first, second, third, queued = _runs(api.tenant)
    Run.objects.filter(pk=first.pk).update(archive_bytes=GB // 2)
    # ran in a directory under the portal's data directory, which it reads in place
    Run.objects.filter(pk=second.pk).update(
        state="completed", results_dir="/data/runs/2/attempt-1/case", disk_bytes=GB // 4
    )
    # ran on a cloud server: its directory went with the server, its archive is the portal's
    Run.objects.filter(pk=third.pk).update(
        state="completed", results_dir="", disk_bytes=8 * GB, archive_bytes=GB // 8
    )
    del queued  # never started: no directory
    other = make_tenant()
    Upload.objects.create(
        tenant=other, filename="b.zip", size_bytes=10, unpacked_bytes=40 * GB, path="/y"
    )
    Run.objects.filter(pk=_runs(other)[0].pk).update(results_dir="/data/x", disk_bytes=9 * GB)
    api.tenant.quota.storage_gb = 5
    api.tenant.quota.save()

    body = api.get("/api/v1/quota/").json()
    assert body["storage"] == {
        "used_gb": 2.875,
        "used_bytes": 2 * GB + GB // 2 + GB // 4 + GB // 8,
        "limit_gb": 5.0,
        "full": False,
        "problem": "",
    }
    assert body["core_hours"]["budget"] is None and body["core_hours"]["used"] == 0


def test_the_panel_says_when_the_storage_quota_is_used_up_and_what_to_do(api):
    run = _runs(api.tenant)[0]
    Run.objects.filter(pk=run.pk).update(results_dir="/data/r/case", disk_bytes=218 * 1024**2)
    api.tenant.quota.storage_gb = 0.05
    api.tenant.quota.save()
    storage = api.get("/api/v1/quota/").json()["storage"]
    assert storage["full"] is True and storage["used_gb"] == 0.213
    assert storage["problem"] == (
        "storage quota of 0.05 GB used up (0.21 GB stored): delete studies or uploads you no "
        "longer need, or ask an admin for more"
    )


def test_the_panels_cost_does_not_grow_with_runs(api):
    _runs(api.tenant)
    api.get("/api/v1/quota/")  # the first request's one-time lookups out of the count
    with CaptureQueriesContext(connection) as few:
        api.get("/api/v1/quota/")
    for _ in range(3):
        for run in _runs(api.tenant)[:2]:
            Run.objects.filter(pk=run.pk).update(
                results_dir=f"/data/{run.pk}/case", disk_bytes=1000, archive_bytes=10
            )
    with CaptureQueriesContext(connection) as many:
        api.get("/api/v1/quota/")
    assert len(many) == len(few)


def test_the_storage_sum_reads_only_the_runs_that_stored_something(api):
    """The panel is polled and admission asks on every pass, for tenants with 100,000 queued
    runs: the run directories' sum reads its partial index (only runs with a directory the
    portal keeps and a size), never the tenant's runs. A table this small would be scanned
    anyway, so scans are ruled out to show the index can answer the query alone."""
    run = _runs(api.tenant)[0]
    Run.objects.filter(pk=run.pk).update(results_dir="/data/r/case", disk_bytes=5)
    with CaptureQueriesContext(connection) as asked:
        assert storage_used_bytes(tenant_id=api.tenant.id) == 5
    (query,) = asked.captured_queries  # one statement, as it ran
    with connection.cursor() as cur:
        # the planner's statistics of the rows as they are (a fresh test table has none, and
        # then another index on the tenant may cost the same as the partial one)
        cur.execute("ANALYZE studies_run")
        cur.execute("SET LOCAL enable_seqscan = off")
        cur.execute("SET LOCAL enable_bitmapscan = off")
        cur.execute("EXPLAIN (FORMAT JSON) " + query["sql"])
        plan = json.dumps(cur.fetchone()[0])
    assert '"Index Name": "run_stored"' in plan and '"Index Name": "run_archived"' in plan
    assert '"Seq Scan"' not in plan
