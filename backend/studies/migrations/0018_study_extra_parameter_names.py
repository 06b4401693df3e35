"""Study.extra_parameter_names: the names runs carry beyond their study's spec, worked out
once here (a scan of each study's runs) so that results, plots and filters never scan for
them. Only studies extended before extend refused new names have any."""

from django.db import migrations, models

EXTRA_NAMES_SQL = """
SELECT k.key FROM studies_run r,
  jsonb_object_keys(r.parameters) WITH ORDINALITY AS k(key, ord)
WHERE r.study_id = %s AND (r.parameters - %s::text[]) <> '{}'::jsonb
  AND NOT k.key = ANY(%s::text[])
GROUP BY k.key ORDER BY min(r.index), min(k.ord)
"""


def fill(apps, schema_editor):
    Study = apps.get_model("studies", "Study")
    with schema_editor.connection.cursor() as cur:
        for pk, spec in Study.objects.exclude(run_count=0).values_list("pk", "spec").iterator():
            known = list(((spec or {}).get("parameters") or {}).keys())
            cur.execute(EXTRA_NAMES_SQL, [str(pk), known, known])
            names = [row[0] for row in cur.fetchall()]
            if names:
                Study.objects.filter(pk=pk).update(extra_parameter_names=names)


class Migration(migrations.Migration):
    dependencies = [("studies", "0017_priority_and_fair_share")]

    operations = [
        migrations.AddField(
            model_name="study",
            name="extra_parameter_names",
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
