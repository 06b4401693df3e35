from django.db import models

from catalog.choices import BackendKind
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

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"
