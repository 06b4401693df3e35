from django.db import models


class BackendKind(models.TextChoices):
    LOCAL = "local", "Local machine"
    NOOP = "noop", "No-op (benchmarks)"
    CONTAINER = "container", "Containers"
    SLURM = "slurm", "Slurm"
    OPENSTACK = "openstack", "OpenStack"


# Backends whose runs hold whole nodes or instances: only these count against `max_nodes`.
NODE_HOLDING_KINDS = frozenset({"openstack", "slurm"})
# backends with a queue of their own, where a started run may wait (why: the driver's poll)
QUEUEING_KINDS = frozenset({"slurm"})
# Backends on the portal's own cores: a run there gives its cores back as soon as its solver
# has exited (it only archives results then). Slurm jobs and cloud servers hold what they
# were given until the run ends, so their runs keep counting until then.
EARLY_RELEASE_KINDS = ("local", "container")
# Backends whose agents get their case's templates rendered by the portal in run.json (the
# agent then copies the case without importing the template engine). Cloud servers receive
# run.json through size-limited user data and render themselves.
PRERENDER_KINDS = ("local", "container", "slurm")
PRERENDER_MAX_BYTES = 1024 * 1024  # larger rendered texts: the agent renders


class ImageKind(models.TextChoices):
    CONTAINER = "container", "OCI container image"
    VM = "vm", "VM image"


class ImageStatus(models.TextChoices):
    PENDING = "pending", "Waiting to build"
    BUILDING = "building", "Building"
    READY = "ready", "Ready"
    FAILED = "failed", "Build failed"
    RETIRED = "retired", "Retired"
