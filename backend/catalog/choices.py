from django.db import models


class BackendKind(models.TextChoices):
    LOCAL = "local", "Local machine"
    NOOP = "noop", "No-op (benchmarks)"
    CONTAINER = "container", "Containers"
    SLURM = "slurm", "Slurm"
    OPENSTACK = "openstack", "OpenStack"


# Backends whose runs hold whole nodes or instances: only these count against `max_nodes`.
NODE_HOLDING_KINDS = frozenset({"openstack", "slurm"})


class ImageKind(models.TextChoices):
    CONTAINER = "container", "OCI container image"
    VM = "vm", "VM image"


class ImageStatus(models.TextChoices):
    PENDING = "pending", "Waiting to build"
    BUILDING = "building", "Building"
    READY = "ready", "Ready"
    FAILED = "failed", "Build failed"
    RETIRED = "retired", "Retired"
