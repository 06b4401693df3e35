from django.db import models


class BackendKind(models.TextChoices):
    """The registered drivers (compute/tests checks that they agree); what each kind is and
    can do is asked of its driver (compute.drivers.traits_of), never kept in lists here."""

    LOCAL = "local", "Local machine"
    NOOP = "noop", "No-op (benchmarks)"
    CONTAINER = "container", "Containers"
    SLURM = "slurm", "Slurm"
    OPENSTACK = "openstack", "OpenStack"


class AdmissionPolicyName(models.TextChoices):
    """The admission policies an admin picks per backend (scheduler.policies)."""

    DEFAULT = "", "The portal's default (WINDTUNNEL_ADMISSION_POLICY)"
    FIFO = "fifo", "First in, first out"
    PRIORITY = "priority", "Study priority within a tenant, with backfill"
    FAIR_SHARE = "fair_share", "Fair share across tenants, study priority, backfill"


class ImageKind(models.TextChoices):
    CONTAINER = "container", "OCI container image"
    VM = "vm", "VM image"


class ImageStatus(models.TextChoices):
    PENDING = "pending", "Waiting to build"
    BUILDING = "building", "Building"
    READY = "ready", "Ready"
    FAILED = "failed", "Build failed"
    RETIRED = "retired", "Retired"
