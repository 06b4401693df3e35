"""Shared fixtures. Everything is real: PostgreSQL, Redis, a Celery worker, uvicorn, OpenFOAM."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.core.management import call_command

from core.stack import Stack

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def django_db_setup(django_db_blocker):
    """Use the bootstrap's test database as it is (other processes must see the same one)."""
    with django_db_blocker.unblock():
        call_command("migrate", verbosity=0)
        from django.db import connection

        with connection.cursor() as cur:  # start clean even after an aborted session
            cur.execute(
                "TRUNCATE studies_simulation, studies_study, studies_upload, telemetry_serieschunk, "
                "telemetry_logchunk CASCADE"
            )


@pytest.fixture
def catalog(db):
    from catalog.services import catalog_sync

    catalog_sync()


@pytest.fixture
def make_tenant(db):
    from tenancy.services import tenant_create_or_update

    counter = iter(range(1, 10_000))

    def make(
        name: str | None = None,
        *,
        cores: int = 4,
        memory_gb: float = 8,
        max_runs: int = 4,
        max_nodes: int = 4,
    ):
        name = name or f"t{next(counter)}"
        tenant = tenant_create_or_update(
            name=name,
            username=f"{name}-user",
            password="pw-" + name,
            quota={
                "cores": cores,
                "memory_gb": memory_gb,
                "max_runs": max_runs,
                "max_nodes": max_nodes,
            },
        )
        tenant.user = tenant.memberships.get().user
        return tenant

    return make


@pytest.fixture
def api(make_tenant, catalog):
    """An API client signed in as a member of a fresh tenant (`api.tenant`)."""
    from rest_framework.test import APIClient

    tenant = make_tenant()
    client = APIClient()
    client.force_authenticate(tenant.user)
    client.tenant = tenant
    return client


@pytest.fixture(scope="session")
def stack(django_db_setup) -> Iterator[Stack]:
    import redis

    redis.Redis.from_url(settings.REDIS_URL).flushdb()  # no stale tasks from an aborted session
    s = Stack()
    s.start_web()
    s.start_worker()
    yield s
    s.stop()


@pytest.fixture
def live(stack, transactional_db, catalog, make_tenant):
    """The running stack plus an HTTP client with a fresh tenant's API token."""
    from tenancy.services import api_token_create

    tenant = make_tenant(cores=2, memory_gb=4, max_runs=2)
    token = api_token_create(user=tenant.user)
    client = httpx.Client(
        base_url=stack.url, headers={"Authorization": f"Token {token}"}, timeout=30
    )
    client.tenant = tenant
    client.stack = stack
    yield client
    client.close()
    _cancel_leftovers()


def _cancel_leftovers() -> None:
    """Kill the agents a test left behind (failed tests, runs stopped by the portal whose agents
    are still finishing), and let the worker go idle, so the next test starts clean."""
    import time

    from orchestration.drivers.base import get_driver
    from studies.models import Simulation

    for run in Simulation.objects.exclude(handle="").filter(backend__kind="local"):
        try:
            get_driver("local", {}).cancel(run.handle, grace=2)
        except Exception:  # noqa: BLE001
            pass
    time.sleep(0.5)  # in-flight reports of the killed agents settle before tables are emptied
