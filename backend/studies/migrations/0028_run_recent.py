"""The tenant's runs newest first, every state (the runs page): built without locking out
writes, as a table of millions of runs needs."""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("studies", "0027_released_at_handover")]

    operations = [
        AddIndexConcurrently(
            model_name="run",
            index=models.Index(
                models.F("tenant"), models.F("queued_at").desc(), models.F("index"), name="run_recent"
            ),
        ),
    ]
