"""Tests: the private test database and Redis DB, short timeouts, a test-only data dir."""

from collections.abc import MutableMapping
from urllib.parse import urlsplit, urlunsplit

from django.core.exceptions import ImproperlyConfigured

from config.env import ROOT_DIR, env
from config.keys import TEST_SECRET_KEY

# Redis databases apart between two workers (the private Redis of scripts/bootstrap has 128;
# with the test runner's own below 16, workers gw0..gw6 take it + 16, + 32, ... + 112)
WORKER_REDIS_STRIDE = 16
REDIS_DATABASES = 128


def _worker_environ(environ: MutableMapping[str, str], *, worker: str) -> None:
    """The environment of pytest-xdist worker `worker` (gw0, gw1, ...): its own database
    (`<test database>_gwN`), Redis DB (test DB + 16 (N + 1), so also its own cache, broker and
    live-event prefix), Celery queue and data directory (hence metrics directory).

    Written once per worker (WINDTUNNEL_TEST_WORKER says it was): the processes a test starts
    (the stack's uvicorn and Celery, the scripts) inherit the worker's values as they are, and
    a test that hands a process a database of its own (e2e/test_backup.py) keeps it."""
    if environ.get("WINDTUNNEL_TEST_WORKER") == worker:
        return
    environ["WINDTUNNEL_TEST_WORKER"] = worker
    n = int(worker.removeprefix("gw"))
    for name in ("TEST_DATABASE_URL", "DATABASE_URL"):
        if environ.get(name):
            url = urlsplit(environ[name])
            environ[name] = urlunsplit(url._replace(path=f"{url.path}_{worker}"))
            break
    for name in ("TEST_REDIS_URL", "REDIS_URL"):
        if environ.get(name):
            url = urlsplit(environ[name])
            number = int(url.path.strip("/") or 0) + WORKER_REDIS_STRIDE * (n + 1)
            if number >= REDIS_DATABASES:
                raise ImproperlyConfigured(
                    f"worker {worker} would need Redis DB {number}: the private Redis has "
                    f"{REDIS_DATABASES}; run fewer workers or a test Redis DB below 16"
                )
            environ[name] = urlunsplit(url._replace(path=f"/{number}"))
            break
    environ["CELERY_QUEUE"] = f"{environ['CELERY_QUEUE']}-{worker}"
    for name in ("WINDTUNNEL_DATA_DIR", "WINDTUNNEL_METRICS_DIR"):
        if environ.get(name):
            environ[name] = f"{environ[name]}-{worker}"


env.ENVIRON.setdefault("SECRET_KEY", TEST_SECRET_KEY)
env.ENVIRON.setdefault("WINDTUNNEL_DATA_DIR", str(ROOT_DIR / ".data" / "test-files"))
env.ENVIRON.setdefault("CELERY_QUEUE", "windtunnel-test")
# scripts/test runs the suite on pytest-xdist workers (`pytest -n N`), side by side
if env("PYTEST_XDIST_WORKER", default=""):
    _worker_environ(env.ENVIRON, worker=env("PYTEST_XDIST_WORKER"))
if env("TEST_DATABASE_URL", default=""):
    env.ENVIRON["DATABASE_URL"] = env("TEST_DATABASE_URL")
if env("TEST_REDIS_URL", default=""):
    env.ENVIRON["REDIS_URL"] = env("TEST_REDIS_URL")
env.ENVIRON.setdefault("WINDTUNNEL_TICK_SECONDS", "1")
env.ENVIRON.setdefault("WINDTUNNEL_HEARTBEAT_INTERVAL", "1")
env.ENVIRON.setdefault("WINDTUNNEL_HEARTBEAT_TIMEOUT", "6")
env.ENVIRON.setdefault("WINDTUNNEL_DISPATCH_TIMEOUT", "8")
env.ENVIRON.setdefault("WINDTUNNEL_TELEMETRY_INTERVAL", "0.25")
env.ENVIRON.setdefault("WINDTUNNEL_STOP_GRACE", "15")
# the test runner itself creates and flushes databases: plain connections there; the portal's
# processes that tests and benchmarks start (core.stack) set DB_POOL=1 like production
env.ENVIRON.setdefault("DB_POOL", "0")
env.ENVIRON.setdefault("DB_CONN_MAX_AGE", "0")
# webhooks to receivers on this machine or its network (docs/notifications.md)
env.ENVIRON.setdefault("WINDTUNNEL_WEBHOOK_ALLOW_PRIVATE", "true")
# /metrics on (docs/metrics.md): the portal's processes that tests start serve it
env.ENVIRON.setdefault("WINDTUNNEL_METRICS_TOKEN", "test-metrics-token")

from config.settings.base import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
