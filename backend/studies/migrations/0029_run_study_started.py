"""A study's runs that started, with their core-hours' columns (the study page): built
without locking out writes."""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("studies", "0028_run_recent")]

    operations = [
        AddIndexConcurrently(
            model_name="run",
            index=models.Index(
                condition=models.Q(("started_at__isnull", False)),
                fields=["study"],
                include=["processes", "started_at", "released_at", "finished_at"],
                name="run_study_started",
            ),
        ),
    ]
