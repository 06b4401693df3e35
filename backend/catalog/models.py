from django.db import models

from catalog.choices import AdmissionPolicyName, BackendKind, ImageKind, ImageStatus
from core.models import TimeStamped


class Package(TimeStamped):
    """A solver package, synced from `packages/<name>/package.yaml`."""

    name = models.SlugField(max_length=100, unique=True)
    version = models.CharField(max_length=50)
    description = models.TextField(blank=True)
    depends = models.JSONField(default=list, blank=True)
    provides = models.JSONField(default=dict, blank=True)
    install = models.JSONField(default=dict, blank=True)
    env = models.JSONField(default=dict, blank=True)
    run_configurations = models.JSONField(default=dict, blank=True)
    manifest = models.JSONField(default=dict, blank=True)
    retired = models.BooleanField(default=False)

    def __str__(self) -> str:
        return f"{self.name} {self.version}"

    @property
    def solvers(self) -> list[str]:
        return list(self.provides.get("solvers", []))


class CaseTemplate(TimeStamped):
    """A parametric case, synced from `templates/<name>/template.yaml`."""

    name = models.SlugField(max_length=100, unique=True)
    title = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    path = models.CharField(max_length=500)
    solver = models.CharField(max_length=100)
    spec = models.JSONField(default=dict)
    placeholders = models.JSONField(default=dict, blank=True)
    retired = models.BooleanField(default=False)

    def __str__(self) -> str:
        return self.name


class Backend(TimeStamped):
    """A place runs execute: kind + settings + capacity."""

    name = models.SlugField(max_length=64, unique=True)
    kind = models.CharField(max_length=20, choices=BackendKind.choices)
    settings = models.JSONField(default=dict, blank=True)
    cores = models.PositiveIntegerField(help_text="cores the portal may use at once")
    memory_gb = models.FloatField()
    max_nodes = models.PositiveIntegerField(default=1)
    enabled = models.BooleanField(default=True)
    tenants = models.ManyToManyField(
        "tenancy.Tenant", blank=True, related_name="backends", help_text="empty = every tenant"
    )
    secrets = models.TextField(
        blank=True,
        help_text="encrypted JSON (core.crypto): keys, passwords, application credentials",
    )
    cloud_limits = models.JSONField(
        default=dict,
        blank=True,
        help_text="OpenStack: the project's compute limits and usage, as last read",
    )
    cloud_limits_at = models.DateTimeField(null=True, blank=True)
    cloud_error = models.TextField(blank=True, help_text="the last failure reading the cloud")
    admission_policy = models.CharField(
        max_length=20,
        choices=AdmissionPolicyName.choices,
        default=AdmissionPolicyName.DEFAULT,
        blank=True,
        help_text="how queued runs are admitted here (docs/scheduling.md)",
    )
    fair_share_half_life = models.FloatField(
        default=3600.0,
        help_text="fair_share: seconds over which past use counts half (0: only what is held)",
    )
    # the watchdog of its runs (docs/live.md, "Runs that make no progress"; docs/admin.md)
    stall_seconds = models.FloatField(
        null=True,
        blank=True,
        help_text="the least time a run here may go without progress before it is stopped "
        "(a study's own convergence.stall_seconds wins; empty: the portal's default)",
    )
    default_wall_seconds = models.FloatField(
        null=True,
        blank=True,
        help_text="the wall-time limit of a run whose study sets none (empty: none)",
    )
    max_wall_seconds = models.FloatField(
        null=True,
        blank=True,
        help_text="the longest wall-time limit a run here may have, its study's own included "
        "(empty: no cap)",
    )

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"


class Image(TimeStamped):
    """A composition of packages built into a container image or a VM image."""

    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=20, choices=ImageKind.choices, default=ImageKind.CONTAINER)
    digest = models.CharField(
        max_length=80, help_text="content digest of the closure, base and recipe"
    )
    packages = models.JSONField(default=list, help_text="the packages asked for")
    closure = models.JSONField(
        default=list, help_text="the resolved dependency closure: [{name, version}]"
    )
    solvers = models.JSONField(default=list, blank=True)
    status = models.CharField(
        max_length=20, choices=ImageStatus.choices, default=ImageStatus.PENDING
    )
    size_bytes = models.BigIntegerField(null=True, blank=True)
    build_log = models.TextField(blank=True)
    progress = models.FloatField(default=0.0, help_text="build progress estimate, 0 to 1")
    build_started_at = models.DateTimeField(null=True, blank=True)
    recipe = models.TextField(
        blank=True, help_text="the Containerfile or cloud-init user data the digest covers"
    )
    error = models.TextField(blank=True)
    references = models.JSONField(
        default=dict, blank=True, help_text="per backend: image ref / Glance id"
    )
    built_at = models.DateTimeField(null=True, blank=True)
    bakes = models.JSONField(
        default=dict,
        blank=True,
        help_text="VM images: bakes in progress, per backend (builder server, phase, deadlines)",
    )
    created_by = models.ForeignKey("auth.User", on_delete=models.SET_NULL, null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["kind", "digest"], name="uniq_image_digest")]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind}, {self.digest[:12]})"
