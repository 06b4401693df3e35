from django.db import models


class QueueReasons(models.Model):
    """What the last scheduling pass told a tenant's queued runs about why they wait, as a
    fingerprint: a pass that reaches the same conclusions, with no run queued since, leaves
    100,000 queued runs alone instead of reading every one of them (scheduler.admission)."""

    tenant = models.OneToOneField(
        "tenancy.Tenant", on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    fingerprint = models.CharField(max_length=64)
    recorded_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"wait reasons of tenant {self.tenant_id} at {self.recorded_at:%H:%M:%S}"
