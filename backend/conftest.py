"""Shared fixtures. Everything is real: PostgreSQL, Redis, a Celery worker, uvicorn, OpenFOAM."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis
from django.conf import settings
from django.core.management import CommandError, call_command
from django.core.management.commands import flush as flush_command
from django.db import connection
from psycopg import sql

from catalog.models import Backend
from catalog.services import catalog_sync
from core import jobs
from core.jobs import Job
from core.stack import Stack
from orchestration.drivers.base import build_driver
from quotas.services import tenant_provision
from studies import events
from studies.models import Run
from tenancy import throttle
from tenancy.services import api_token_create
from tenancy.testing import LiveClient, TenantAPIClient

ROOT = Path(__file__).resolve().parents[1]


def _uses_stack(item: pytest.Item) -> bool:
    return "stack" in getattr(item, "fixturenames", ())


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items) -> None:
    """The order pytest-xdist hands tests out in (--dist loadgroup, no reordering): first the
    xdist_groups (one worker runs each whole, one test after another), those with tests on
    the live stack first, the largest first: the run's one Slurm cluster and OpenStack are
    the longest such chain, so it starts at once beside everything else; then the slow tests
    on the live stack, the other tests without it (the slow ones first), the rest on it.

    The live stack (uvicorn + a Celery worker with beat, session-scoped, started by the
    first test that needs it) would break the expectations of tests that drive admission and
    the reaper themselves: within a group its tests without the stack come first, and a
    worker that already started its stack pauses its Celery worker for a test without it
    (_StackPauser below)."""

    def group(item: pytest.Item) -> str:
        mark = item.get_closest_marker("xdist_group")
        return str(mark.args[0]) if mark and mark.args else ""

    sizes: dict[str, int] = {}
    live_groups: dict[str, bool] = {}
    for item in items:
        if name := group(item):
            sizes[name] = sizes.get(name, 0) + 1
            live_groups[name] = live_groups.get(name, False) or _uses_stack(item)

    def rank(pair: tuple[int, pytest.Item]) -> tuple:
        index, item = pair
        name = group(item)
        if name:
            return (0, not live_groups.get(name), -sizes[name], name, _uses_stack(item), index)
        # the longest (marked slow) first, those on the live stack before the others (the
        # API fuzzing's parts), so that none starts last and ends the session late
        slow, live = item.get_closest_marker("slow") is not None, _uses_stack(item)
        return (1, 0 if slow and live else 1 if not live else 2, not slow, index)

    items[:] = [item for _, item in sorted(enumerate(items), key=rank)]


class _TestStack(Stack):
    """The session's live stack, whose Celery worker (with beat) can be paused for a test
    that drives the scheduler and the reaper itself, and started again for the next live
    test."""

    paused = False

    def pause(self) -> None:
        if not self.paused:
            self.stop_worker()
            self.paused = True

    def resume(self) -> None:
        if self.paused:
            # nothing the paused worker would find queued: tasks of tests since emptied
            redis.Redis.from_url(settings.REDIS_URL).flushdb()
            self.start_worker()
            self.paused = False


_STACK: _TestStack | None = None


class _StackPauser:
    """Before each test of the session (orchestration/tests' too: a plugin, not a hook of
    this directory's), the live stack's Celery worker paused or started as the test needs."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if _STACK is None:
            return
        if _uses_stack(item):
            _STACK.resume()
        else:
            _STACK.pause()


def pytest_configure(config) -> None:
    config.pluginmanager.register(_StackPauser(), "windtunnel-stack-pauser")


@pytest.fixture(autouse=True)
def sign_in_limits_reset() -> None:
    """Every test starts with no sign-in attempts or previews counted (tenancy.throttle keeps
    them in the cache for up to a day: tests signing in as the same username would lock it)."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    keys = [
        key
        for prefix in (throttle.KEY_PREFIX, throttle.RATE_PREFIX)
        for key in client.scan_iter(match=f"*{prefix}*", count=1000)
    ]
    if keys:
        client.delete(*keys)
    client.close()


def _database_ensure() -> None:
    """The test database of config.settings.test made if it is missing (a pytest-xdist
    worker's `<test database>_gwN`, WT_TEST_DB's); the bootstrap makes the first one."""
    db = settings.DATABASES["default"]
    with psycopg.connect(
        dbname="postgres",
        host=db["HOST"],
        port=db["PORT"] or None,
        user=db["USER"],
        password=db["PASSWORD"] or None,
        autocommit=True,
    ) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (db["NAME"],)).fetchone():
            return
        with contextlib.suppress(psycopg.errors.DuplicateDatabase):  # made by another run
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(db["NAME"])))


@pytest.fixture(scope="session")
def django_db_setup(django_db_blocker):
    """Use the test database as it is (the processes a test starts must see the same one)."""
    _database_ensure()
    with django_db_blocker.unblock():
        call_command("migrate", verbosity=0)
        with connection.cursor() as cur:  # start clean even after an aborted session
            cur.execute(
                "TRUNCATE studies_run, studies_study, studies_upload, telemetry_serieschunk, "
                "telemetry_logchunk CASCADE"
            )


@pytest.fixture
def catalog(db):
    catalog_sync()


@pytest.fixture
def make_tenant(db):
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
        tenant = tenant_provision(
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
        # tests read the tenant's one member as `tenant.user` (set here: not a field of Tenant)
        setattr(tenant, "user", tenant.memberships.get().user)  # noqa: B010
        return tenant

    return make


@pytest.fixture
def api(make_tenant, catalog):
    """An API client signed in as a member of a fresh tenant (`api.tenant`)."""
    tenant = make_tenant()
    client = TenantAPIClient()
    client.force_authenticate(tenant.user)
    client.tenant = tenant
    return client


_flush = flush_command.Command.handle


def _flush_retrying_deadlocks(self, **options):
    """Django's flush (a transactional test's teardown) tried again when PostgreSQL broke a
    deadlock by aborting it: its TRUNCATE locks the tables one by one while the session's
    live stack (worker, beat, web) may be reading them in another order (seen once in CI:
    the e2e Slurm test's teardown against the worker's periodic work). Anything else raises."""
    for attempt in range(5):
        try:
            return _flush(self, **options)
        except CommandError as exc:
            if attempt == 4 or "deadlock detected" not in str(exc.__cause__ or ""):
                raise
            time.sleep(0.2 * (attempt + 1))
    return None


flush_command.Command.handle = _flush_retrying_deadlocks  # type: ignore[method-assign]


@pytest.fixture(scope="session")
def stack(django_db_setup) -> Iterator[Stack]:
    global _STACK
    redis.Redis.from_url(settings.REDIS_URL).flushdb()  # no stale tasks from an aborted session
    s = _TestStack()
    s.start_web()
    s.start_worker()
    _STACK = s
    yield s
    _STACK = None
    s.stop()


@pytest.fixture
def live(stack, transactional_db, catalog, make_tenant):
    """The running stack plus an HTTP client with a fresh tenant's API token."""
    tenant = make_tenant(cores=2, memory_gb=4, max_runs=2)
    token = api_token_create(user=tenant.user)
    client = LiveClient(base_url=stack.url, headers={"Authorization": f"Token {token}"}, timeout=30)
    client.tenant = tenant
    client.stack = stack
    yield client
    client.close()
    _cancel_leftovers()


def _cancel_leftovers() -> None:
    """Kill the agents a test left behind (failed tests, runs stopped by the portal whose agents
    are still finishing), and let the worker go idle, so the next test starts clean."""
    import time

    for run in Run.objects.exclude(handle="").filter(backend__kind="local"):
        try:
            build_driver("local", {}).cancel(run.handle, grace=2)
        except Exception:  # noqa: BLE001
            pass
    time.sleep(0.5)  # in-flight reports of the killed agents settle before tables are emptied


@pytest.fixture
def builds(monkeypatch):
    """Image builds recorded instead of enqueued (the real builds run in e2e/test_images.py):
    the (image id, force) of each build that would start after commit."""
    calls: list[tuple] = []
    real = jobs.enqueue

    def record(job, *args, **kwargs):
        if job == Job.BUILD_IMAGE:
            calls.append(args)
        else:
            real(job, *args, **kwargs)

    monkeypatch.setattr(jobs, "enqueue", record)
    return calls


@pytest.fixture
def containers(db):
    """A container backend (podman on this machine)."""
    backend, _ = Backend.objects.get_or_create(
        name="containers-test",
        defaults={"kind": "container", "cores": 2, "memory_gb": 4, "settings": {}},
    )
    return backend


@pytest.fixture
def staff(api):
    """The `api` client's user made an operator (is_staff)."""
    api.tenant.user.is_staff = True
    api.tenant.user.save(update_fields=["is_staff"])
    return api


class Live:
    """What went out to the live courier and to the worker (after commit) while a test ran.

    The test's transaction never commits: its on-commit callbacks run when the test reads
    what was published, in the order they were registered (and those they register)."""

    def __init__(self) -> None:
        self._messages: list[tuple[str, dict[str, Any]]] = []
        self._jobs: list[tuple[Job, tuple[Any, ...], dict[str, Any]]] = []
        self._start = len(connection.run_on_commit)

    def flush(self) -> None:
        while self._start < len(connection.run_on_commit):
            callback = connection.run_on_commit[self._start][1]  # (savepoints, func, robust)
            self._start += 1
            callback()

    @property
    def messages(self) -> list[tuple[str, dict[str, Any]]]:
        self.flush()
        return self._messages

    @property
    def jobs(self) -> list[tuple[Job, tuple[Any, ...], dict[str, Any]]]:
        self.flush()
        return self._jobs

    def states(self, run: Any) -> list[tuple[str, int]]:
        """(state, seq) of each `state` event of the run."""
        return [
            (m["run"]["state"], m["seq"])
            for _, m in self.messages
            if m["type"] == "state" and m["id"] == str(run.pk)
        ]

    def job_names(self) -> list[Job]:
        """The jobs handed to the worker, in order."""
        return [job for job, _, _ in self.jobs]


@pytest.fixture
def published(monkeypatch, db) -> Live:
    """Live events and worker jobs, recorded instead of sent."""
    seen = Live()
    # every run as if a websocket client followed it: its state events are recorded too
    monkeypatch.setattr(events, "runs_watched", set)
    monkeypatch.setattr(events, "send_many", lambda messages: seen._messages.extend(messages))
    monkeypatch.setattr(
        events, "send", lambda group, message: seen._messages.append((group, message))
    )
    monkeypatch.setattr(jobs, "send", lambda job, *a, **kw: seen._jobs.append((job, a, kw)))
    return seen
