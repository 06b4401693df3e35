"""Tests: the private test database and Redis DB, short timeouts, a test-only data dir."""

from config.env import ROOT_DIR, env
from config.keys import TEST_SECRET_KEY

env.ENVIRON.setdefault("SECRET_KEY", TEST_SECRET_KEY)
if env("TEST_DATABASE_URL", default=""):
    env.ENVIRON["DATABASE_URL"] = env("TEST_DATABASE_URL")
if env("TEST_REDIS_URL", default=""):
    env.ENVIRON["REDIS_URL"] = env("TEST_REDIS_URL")
env.ENVIRON.setdefault("WINDTUNNEL_DATA_DIR", str(ROOT_DIR / ".data" / "test-files"))
env.ENVIRON.setdefault("WINDTUNNEL_TICK_SECONDS", "1")
env.ENVIRON.setdefault("WINDTUNNEL_HEARTBEAT_INTERVAL", "1")
env.ENVIRON.setdefault("WINDTUNNEL_HEARTBEAT_TIMEOUT", "6")
env.ENVIRON.setdefault("WINDTUNNEL_DISPATCH_TIMEOUT", "8")
env.ENVIRON.setdefault("WINDTUNNEL_TELEMETRY_INTERVAL", "0.25")
env.ENVIRON.setdefault("WINDTUNNEL_STOP_GRACE", "15")
env.ENVIRON.setdefault("CELERY_QUEUE", "windtunnel-test")
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
