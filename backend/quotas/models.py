from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models

from core.models import TimeStamped


class Quota(TimeStamped):
    """A tenant's limits. Usage is never stored: it is derived from runs holding resources."""

    tenant = models.OneToOneField("tenancy.Tenant", on_delete=models.CASCADE, related_name="quota")
    cores = models.PositiveIntegerField(default=4, validators=[MinValueValidator(1)])
    memory_gb = models.FloatField(default=8.0, validators=[MinValueValidator(0.1)])
    max_nodes = models.PositiveIntegerField(
        default=4, validators=[MinValueValidator(1)], help_text="instances / nodes held at once"
    )
    max_runs = models.PositiveIntegerField(
        default=4, validators=[MinValueValidator(1)], help_text="concurrent runs"
    )
    max_queued_runs = models.PositiveIntegerField(
        default=1000,
        validators=[MinValueValidator(1)],
        help_text="runs submitted and not yet ended (queued or running) at once; a submission "
        "or extension past it is refused",
    )
    storage_gb = models.FloatField(default=50.0, validators=[MinValueValidator(0.0)])
    core_hours_budget = models.FloatField(
        null=True, blank=True, validators=[MinValueValidator(0.0)]
    )
    share_weight = models.FloatField(
        default=1.0,
        validators=[MinValueValidator(0.01)],
        help_text="fair_share: the tenant's weight (its share is weight ÷ the weights of the "
        "tenants with work on a backend)",
    )

    def clean(self) -> None:
        if self.memory_gb <= 0:
            raise ValidationError({"memory_gb": "must be positive"})

    def __str__(self) -> str:
        return (
            f"quota of {self.tenant}: {self.cores} cores, {self.memory_gb} GB, {self.max_runs} runs"
        )
