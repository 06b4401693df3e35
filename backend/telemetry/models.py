from django.contrib.postgres.fields import ArrayField
from django.db import models


class SeriesChunk(models.Model):
    """A batch of points of one series of one run attempt: arrays, never a row per point."""

    run = models.ForeignKey("studies.Run", on_delete=models.CASCADE, related_name="chunks")
    attempt = models.PositiveIntegerField()
    name = models.CharField(max_length=200)
    seq = models.PositiveIntegerField()
    event_seq = models.BigIntegerField(default=0, help_text="the run stream's seq of the batch")
    xs = ArrayField(models.FloatField())
    ys = ArrayField(models.FloatField(null=True))
    x_min = models.FloatField()
    x_max = models.FloatField()
    # the chunk's lowest and highest point: downsampled reads of long series use only these
    low_x = models.FloatField(null=True)
    low_y = models.FloatField(null=True)
    high_x = models.FloatField(null=True)
    high_y = models.FloatField(null=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["run", "attempt", "name", "seq"], name="chunk_series")]

    def __str__(self) -> str:
        return f"{self.name} #{self.seq} of {self.run_id}"


class LogChunk(models.Model):
    run = models.ForeignKey("studies.Run", on_delete=models.CASCADE, related_name="log_chunks")
    attempt = models.PositiveIntegerField()
    seq = models.PositiveIntegerField()
    event_seq = models.BigIntegerField(default=0)
    lines = ArrayField(models.TextField())
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["run", "attempt", "seq"], name="log_seq")]

    def __str__(self) -> str:
        return f"log #{self.seq} of {self.run_id}"
