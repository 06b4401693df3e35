"""Built-in drivers register themselves on import."""

from orchestration.drivers import local, noop  # noqa: F401
