"""The quota panel's core-hour budget and storage: what the tenant's runs used this period
(calendar month, UTC) and what the portal stores for it, next to the limits."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from studies.models import Run, Upload
from studies.services import study_create
from studies.usage import GB, budget_period_start

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


def test_storage_sums_uploads_and_result_archives_and_shows_the_limit(api, make_tenant):
    Upload.objects.create(
        tenant=api.tenant, filename="a.zip", size_bytes=10, unpacked_bytes=2 * GB, path="/x"
    )
    first, second, *_ = _runs(api.tenant)
    Run.objects.filter(pk=first.pk).update(archive_bytes=GB // 2)
    Run.objects.filter(pk=second.pk).update(archive_bytes=GB // 4)
    other = make_tenant()
    Upload.objects.create(
        tenant=other, filename="b.zip", size_bytes=10, unpacked_bytes=40 * GB, path="/y"
    )
    api.tenant.quota.storage_gb = 5
    api.tenant.quota.save()

    body = api.get("/api/v1/quota/").json()
    assert body["storage"] == {"used_gb": 2.75, "limit_gb": 5.0}
    assert body["core_hours"]["budget"] is None and body["core_hours"]["used"] == 0


def test_the_panels_cost_does_not_grow_with_runs(api):
    _runs(api.tenant)
    api.get("/api/v1/quota/")  # the first request's one-time lookups out of the count
    with CaptureQueriesContext(connection) as few:
        api.get("/api/v1/quota/")
    for _ in range(3):
        _runs(api.tenant)
    with CaptureQueriesContext(connection) as many:
        api.get("/api/v1/quota/")
    assert len(many) == len(few)
