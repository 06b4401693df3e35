"""/metrics for operators (docs/metrics.md): the scrape token, runs and the queue per tenant
and backend read from PostgreSQL, and what the portal's other processes count (the Celery
worker's admissions and dispatches, the web's websocket clients) served by the web process."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from django.conf import settings
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from administration.metrics import broker
from catalog.models import Backend
from core.testing import wait_for
from studies.models import Run
from studies.services import study_create
from telemetry.ingest import telemetry_ingest

TOKEN = settings.WINDTUNNEL["METRICS_TOKEN"]  # config.settings.test sets one


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape: (name, sorted labels) → value."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(scrape: dict, name: str, **labels: str) -> float:
    """One sample's value; 0 when the scrape has no such series (nothing observed yet)."""
    return scrape.get((name, tuple(sorted(labels.items()))), 0.0)


def scrape(client: Client) -> dict:
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200, response.content
    return samples(response.content.decode())


def noop_backend(name: str) -> Backend:
    return Backend.objects.update_or_create(
        name=name, defaults={"kind": "noop", "cores": 64, "memory_gb": 256, "max_nodes": 1}
    )[0]


def submit(tenant: Any, backend: Backend, runs: int):
    return study_create(
        tenant=tenant,
        owner=tenant.user,
        spec={
            "name": "m",
            "template": "cavity",
            "backend": backend.name,
            "parameters": {"lid_velocity": {"values": list(range(1, runs + 1))}},
        },
        submit=True,
    )


# --- the scrape token -------------------------------------------------------------------------


@pytest.mark.django_db
def test_metrics_are_off_without_a_configured_token_and_say_how_to_turn_them_on(settings):
    settings.WINDTUNNEL = {**settings.WINDTUNNEL, "METRICS_TOKEN": ""}
    response = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer anything")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"
    assert "WINDTUNNEL_METRICS_TOKEN" in response.json()["message"]


@pytest.mark.django_db
def test_a_scrape_without_the_token_or_with_a_wrong_one_is_refused():
    client = Client()
    missing = client.get("/metrics")
    assert missing.status_code == 401
    assert missing["WWW-Authenticate"].startswith("Bearer")
    assert "Authorization: Bearer" in missing.json()["message"]
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Token {TOKEN}").status_code == 401
    wrong = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}x")
    assert wrong.status_code == 403
    assert wrong.json() == {
        "code": "permission_denied",
        "message": "wrong scrape token",
        "field": None,
        "details": None,
    }
    assert b"windtunnel_" not in missing.content + wrong.content


@pytest.mark.django_db
def test_a_scrape_with_the_token_answers_prometheus_text_and_only_reads():
    client = Client()
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    names = {f.name for f in text_string_to_metric_families(response.content.decode())}
    assert {
        "windtunnel_admission_duration_seconds",
        "windtunnel_celery_queue_length",
        "windtunnel_metrics_source_up",
    } <= names
    scraped = samples(response.content.decode())
    assert value(scraped, "windtunnel_metrics_source_up", source="database") == 1
    assert value(scraped, "windtunnel_metrics_source_up", source="broker") == 1
    assert client.post("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 405


# --- runs and the queue, from the database ----------------------------------------------------


@pytest.mark.django_db
def test_runs_by_state_and_the_queue_show_exact_counts_per_tenant_and_backend(make_tenant, catalog):
    acme, globex = make_tenant(), make_tenant()
    north, south = noop_backend("metrics-north"), noop_backend("metrics-south")
    a_north = list(submit(acme, north, 6).runs.order_by("index"))
    a_south = list(submit(acme, south, 2).runs.order_by("index"))
    g_north = list(submit(globex, north, 3).runs.order_by("index"))
    now = timezone.now()

    def put(runs: list[Run], **fields: Any) -> None:
        Run.objects.filter(pk__in=[r.pk for r in runs]).update(**fields)

    # acme on north: 2 queued (one for quota), 1 admitted, 1 provisioning, 1 running, 1 done
    put(a_north[:1], wait_reason="quota")
    put(a_north[2:3], state="admitted", admitted_at=now)
    put(a_north[3:4], state="provisioning", admitted_at=now, attempt=1)
    put(a_north[4:5], state="running", admitted_at=now, started_at=now, attempt=1)
    put(a_north[5:6], state="completed", finished_at=now, attempt=1)
    # acme on south: both running
    put(a_south, state="running", admitted_at=now, started_at=now, attempt=1)
    # globex on north: 1 queued for backend capacity, 2 failed
    put(g_north[:1], wait_reason="backend_capacity")
    put(g_north[1:], state="failed", finished_at=now, attempt=1)

    scraped = scrape(Client())
    ours = {acme.name, globex.name}
    runs = {
        (dict(labels)["tenant"], dict(labels)["backend"], dict(labels)["state"]): v
        for (name, labels), v in scraped.items()
        if name == "windtunnel_runs" and dict(labels)["tenant"] in ours
    }
    assert runs == {
        (acme.name, "metrics-north", "pending"): 2,
        (acme.name, "metrics-north", "admitted"): 1,
        (acme.name, "metrics-north", "provisioning"): 1,
        (acme.name, "metrics-north", "running"): 1,
        (acme.name, "metrics-south", "running"): 2,
        (globex.name, "metrics-north", "pending"): 1,
    }, "finished runs are not counted; every active one is, once"
    queue = {
        (dict(labels)["tenant"], dict(labels)["backend"], dict(labels)["wait_reason"]): v
        for (name, labels), v in scraped.items()
        if name == "windtunnel_queue_length" and dict(labels)["tenant"] in ours
    }
    assert queue == {
        (acme.name, "metrics-north", "quota"): 1,
        (acme.name, "metrics-north", "queued"): 1,
        (globex.name, "metrics-north", "backend_capacity"): 1,
    }


@pytest.mark.django_db
def test_the_oldest_wait_is_that_of_the_oldest_queued_and_the_oldest_admitted_run(
    make_tenant, catalog
):
    tenant = make_tenant()
    backend = noop_backend("metrics-wait")
    runs = list(submit(tenant, backend, 4).runs.order_by("index"))
    before = time.monotonic()
    now = timezone.now()
    Run.objects.filter(pk=runs[0].pk).update(queued_at=now - timedelta(seconds=90))
    Run.objects.filter(pk=runs[1].pk).update(queued_at=now - timedelta(seconds=600))
    Run.objects.filter(pk=runs[2].pk).update(
        state="admitted", queued_at=now - timedelta(days=1), admitted_at=now - timedelta(seconds=45)
    )
    scraped = scrape(Client())
    elapsed = time.monotonic() - before
    labels = {"tenant": tenant.name, "backend": backend.name}
    oldest = value(scraped, "windtunnel_queue_oldest_wait_seconds", **labels)
    assert 600 <= oldest <= 600 + elapsed, "the oldest pending run; not the admitted one"
    admitted = value(scraped, "windtunnel_admitted_oldest_wait_seconds", **labels)
    assert 45 <= admitted <= 45 + elapsed

    Run.objects.filter(pk=runs[1].pk).update(state="cancelled")  # the oldest leaves the queue
    oldest = value(scrape(Client()), "windtunnel_queue_oldest_wait_seconds", **labels)
    assert 90 <= oldest <= 90 + (time.monotonic() - before)


@pytest.mark.django_db
def test_stored_telemetry_points_are_counted(make_tenant, catalog):
    tenant = make_tenant()
    run = submit(tenant, noop_backend("metrics-ingest"), 1).runs.get()
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(
        state="running", attempt=1, admitted_at=now, started_at=now, heartbeat_at=now
    )
    client = Client()
    before = scrape(client)
    telemetry_ingest(
        run=run,
        attempt=1,
        series={"residual.p": [[0.1, 1.0], [0.2, 0.5], [0.3, 0.25]], "cd": [[0.1, 1.2]]},
    )
    after = scrape(client)
    points = "windtunnel_ingest_points_total"
    assert value(after, points) - value(before, points) == 4
    batches = "windtunnel_ingest_batches_total"
    assert value(after, batches) - value(before, batches) == 1


@pytest.mark.django_db
def test_the_celery_queue_length_is_the_brokers(settings):
    settings.CELERY_TASK_DEFAULT_QUEUE = queue = "windtunnel-metrics-probe"
    redis = broker()
    redis.delete(queue, f"{queue}\x06\x166")
    try:
        redis.rpush(queue, "a", "b", "c")
        redis.rpush(f"{queue}\x06\x166", "d")  # a message of priority 6
        assert value(scrape(Client()), "windtunnel_celery_queue_length", queue=queue) == 4
    finally:
        redis.delete(queue, f"{queue}\x06\x166")


# --- across processes: the Celery worker's and the web's own counts -----------------------------


def scrape_stack(stack: Any) -> dict:
    response = httpx.get(
        f"{stack.url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30
    )
    assert response.status_code == 200, response.text
    return samples(response.text)


def test_admission_and_dispatch_in_the_worker_appear_in_what_the_web_serves(live):
    backend = noop_backend("metrics-xproc")
    before = scrape_stack(live.stack)
    histogram = "windtunnel_admission_duration_seconds_count"
    latency = "windtunnel_dispatch_latency_seconds_count"
    study = live.post(
        "/api/v1/studies/",
        json={
            "name": "metrics",
            "template": "cavity",
            "backend": backend.name,
            "parameters": {"lid_velocity": {"values": [1, 2]}},
        },
    ).json()
    assert "id" in study, study

    # the web process submits; only the Celery worker admits and starts runs
    after = wait_for(
        lambda: (
            s
            if value(s := scrape_stack(live.stack), latency, backend=backend.name)
            >= value(before, latency, backend=backend.name) + 2
            else None
        ),
        what="both runs' dispatch latency in the web's /metrics",
    )
    assert value(after, histogram) > value(before, histogram)
    admitted = "windtunnel_runs_admitted_total"
    assert value(after, admitted) >= value(before, admitted) + 2
    bucket = "windtunnel_dispatch_latency_seconds_bucket"
    assert value(after, bucket, backend=backend.name, le="+Inf") == value(
        after, latency, backend=backend.name
    )


def test_websocket_clients_are_counted_while_subscribed(live):
    study = live.post(
        "/api/v1/studies/",
        json={
            "name": "ws",
            "template": "cavity",
            "backend": noop_backend("metrics-xproc").name,
            "parameters": {"lid_velocity": 1},
        },
    ).json()
    assert "id" in study, study
    token = live.headers["Authorization"].split()[1]
    url = f"{live.stack.url.replace('http://', 'ws://')}/ws/studies/{study['id']}/?token={token}"
    clients = "windtunnel_websocket_clients"
    base = value(scrape_stack(live.stack), clients, stream="study")

    async def while_subscribed() -> float:
        async with (
            websockets.connect(url, open_timeout=20) as one,
            websockets.connect(url, open_timeout=20) as two,
        ):
            for ws in (one, two):
                assert json.loads(await ws.recv())["type"] == "subscribed"
            scraped = await asyncio.to_thread(scrape_stack, live.stack)
            return value(scraped, clients, stream="study")

    assert asyncio.run(while_subscribed()) == base + 2
    wait_for(
        lambda: value(scrape_stack(live.stack), clients, stream="study") == base,
        what="the clients that left no longer counted",
    )


PROCESS = """
import django, sys
django.setup()
from core.metrics import WEBSOCKET_CLIENTS
WEBSOCKET_CLIENTS.labels(stream="probe").inc(3)
print("counted", flush=True)
sys.stdin.read()
"""


@pytest.mark.django_db
def test_a_killed_process_live_gauges_leave_the_sum():
    """A web worker killed with SIGKILL (or uvicorn, which re-raises SIGTERM and so skips
    exit handlers) cannot take its websocket clients out of the sum: the next scrape does."""
    other = subprocess.Popen(
        [sys.executable, "-c", PROCESS],
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert other.stdout is not None and other.stdout.readline().strip() == "counted"
        assert value(scrape(Client()), "windtunnel_websocket_clients", stream="probe") == 3
    finally:
        other.send_signal(signal.SIGKILL)
        other.wait()
    assert value(scrape(Client()), "windtunnel_websocket_clients", stream="probe") == 0


def test_each_installation_gets_its_own_scrape_token_also_one_made_before_metrics(tmp_path):
    script = Path(__file__).resolve().parents[3] / "scripts" / "generate-secrets"
    subprocess.run([script, tmp_path / "new"], check=True, capture_output=True)
    made = (tmp_path / "new" / "secrets.env").read_text()
    token = re.search(r"^WINDTUNNEL_METRICS_TOKEN=(\S{40,})$", made, re.M)
    assert token, made
    older = tmp_path / "older" / "secrets.env"
    older.parent.mkdir()
    older.write_text("SECRET_KEY=kept\nWINDTUNNEL_SECRETS_KEY=kept-too\n")
    subprocess.run([script, older.parent], check=True, capture_output=True)
    lines = older.read_text().splitlines()
    assert lines[:2] == ["SECRET_KEY=kept", "WINDTUNNEL_SECRETS_KEY=kept-too"]
    assert len(lines) == 3 and lines[2].startswith("WINDTUNNEL_METRICS_TOKEN=")
    assert lines[2] != f"WINDTUNNEL_METRICS_TOKEN={token.group(1)}"
    subprocess.run([script, older.parent], check=True, capture_output=True)
    assert older.read_text().splitlines() == lines, "made once"


@pytest.mark.django_db
def test_the_pools_queue_and_workers_are_what_the_autoscaler_sees(make_tenant, catalog):
    """A pool's admitted runs waiting, its live workers by state and its bounds (docs/pools.md);
    a run too large for the pool and ended workers are not counted."""
    from catalog.choices import ImageKind, ImageStatus
    from catalog.models import Image
    from pools.models import Pool, PoolWorker

    tenant = make_tenant()
    backend = noop_backend("metrics-pooled")
    study = submit(tenant, backend, 4)
    image = Image.objects.create(
        name="pooled",
        kind=ImageKind.VM,
        digest="sha256:metrics-pool",
        status=ImageStatus.READY,
        references={backend.name: "glance-id"},
    )
    study.image = image
    study.save(update_fields=["image"])
    pool = Pool.objects.create(
        backend=backend,
        name="metrics-pool",
        flavor="f",
        image=image,
        cores=2,
        memory_gb=4,
        min_workers=1,
        max_workers=3,
    )
    runs = list(study.runs.order_by("index"))
    Run.objects.filter(pk__in=[r.pk for r in runs[:3]]).update(
        state="admitted", admitted_at=timezone.now()
    )
    Run.objects.filter(pk=runs[2].pk).update(processes=4)  # does not fit a 2-core worker
    for state in ("booting", "busy", "busy", "lost"):
        PoolWorker.objects.create(pool=pool, state=state)
    scraped = scrape(Client())
    labels = {"pool": "metrics-pool", "backend": backend.name}
    assert value(scraped, "windtunnel_pool_queue_length", **labels) == 2
    assert value(scraped, "windtunnel_pool_workers", **labels, state="booting") == 1
    assert value(scraped, "windtunnel_pool_workers", **labels, state="busy") == 2
    assert value(scraped, "windtunnel_pool_workers", **labels, state="idle") == 0
    assert (
        "windtunnel_pool_workers",
        tuple(sorted({**labels, "state": "lost"}.items())),
    ) not in scraped
    assert value(scraped, "windtunnel_pool_size_bound", **labels, bound="max") == 3
    assert value(scraped, "windtunnel_pool_size_bound", **labels, bound="min") == 1
