from django.db import models


class BackendKind(models.TextChoices):
    LOCAL = "local", "Local machine"
    NOOP = "noop", "No-op (benchmarks)"
    CONTAINER = "container", "Containers"
    SLURM = "slurm", "Slurm"
    OPENSTACK = "openstack", "OpenStack"
