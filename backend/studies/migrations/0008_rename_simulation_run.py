from django.db import migrations


class Migration(migrations.Migration):
    """The model is called what the API, the states and the docs call it: a run."""

    dependencies = [
        ("studies", "0007_run_dispatch_failures"),
        ("telemetry", "0003_lz4_compression"),
    ]

    operations = [
        migrations.RenameModel(old_name="Simulation", new_name="Run"),
    ]
