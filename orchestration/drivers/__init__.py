"""Built-in drivers register themselves on import."""

from orchestration.drivers import container, local, noop, slurm  # noqa: F401
