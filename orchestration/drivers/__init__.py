"""Built-in drivers register themselves on import."""

from orchestration.drivers import container, local, noop, openstack, slurm  # noqa: F401
