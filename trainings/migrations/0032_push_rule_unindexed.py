"""Push.rule loses its index (trainings/models/__init__.py says why); its foreign key stays.

Django's AlterField would drop and re-add the foreign key, and re-adding it validates every push under a
lock that blocks their inserts. Only the index goes here: `DROP INDEX CONCURRENTLY` on PostgreSQL (so the
migration is not atomic), a plain drop elsewhere.
"""

import django.db.models.deletion
from django.db import migrations, models

INDEX = "trainings_push_rule_id_a223a844"  # Django's name for the foreign key's index (table, column)


def drop_index(apps, schema_editor):
    concurrently = " CONCURRENTLY" if schema_editor.connection.vendor == "postgresql" else ""
    schema_editor.execute(f'DROP INDEX{concurrently} IF EXISTS "{INDEX}"')


def create_index(apps, schema_editor):
    concurrently = " CONCURRENTLY" if schema_editor.connection.vendor == "postgresql" else ""
    schema_editor.execute(f'CREATE INDEX{concurrently} IF NOT EXISTS "{INDEX}" ON "trainings_push" ("rule_id")')


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("trainings", "0031_pushsend_device_unchecked"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="push",
                    name="rule",
                    field=models.ForeignKey(
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        to="trainings.reminderrule",
                    ),
                ),
            ],
            database_operations=[migrations.RunPython(drop_index, create_index)],
        ),
    ]
