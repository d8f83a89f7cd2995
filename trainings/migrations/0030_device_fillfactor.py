"""Device pages keep half their room free, so the gateway's `last_success_at` update of an accepted push
fits beside the old row: a HOT update, which writes no entry in any of the table's indexes (a full page
gave a new entry in each of six). New pages get it at once; a table's existing pages as their rows move
(or at once with VACUUM FULL or pg_repack, at a quiet hour). PostgreSQL only."""

from django.db import migrations, models


def fillfactor(percent: int | None):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor != "postgresql":
            return
        table = schema_editor.quote_name(apps.get_model("trainings", "Device")._meta.db_table)
        if percent is None:
            schema_editor.execute(f"ALTER TABLE {table} RESET (fillfactor)")
        else:
            schema_editor.execute(f"ALTER TABLE {table} SET (fillfactor = {percent})")

    return run


class Migration(migrations.Migration):

    dependencies = [
        ("trainings", "0029_critical_offsets"),
    ]

    operations = [
        migrations.RunPython(fillfactor(50), fillfactor(None), elidable=False),
        migrations.AlterField(
            model_name="device",
            name="last_success_at",
            field=models.DateTimeField(
                blank=True,
                help_text="When a provider last accepted a push for it (to within an hour).",
                null=True,
            ),
        ),
    ]
