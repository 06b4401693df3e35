from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("catalog", "0003_backend_cloud_error_backend_cloud_limits_and_more"),
    ]

    operations = [
        migrations.AddField(
            model_name="image",
            name="bakes",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text="VM images: bakes in progress, per backend (builder server, phase, deadlines)",
            ),
        ),
    ]
