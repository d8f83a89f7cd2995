"""Devices and the send records leave the trainings app's state (issue 41): their tables and rows stay, and
delivery's 0001_tables_from_trainings takes them over (state only here: no SQL runs)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("trainings", "0044_field_labels_translated"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(
                    name="DeliveredPush",
                ),
                migrations.RemoveField(
                    model_name="device",
                    name="coach",
                ),
                migrations.RemoveField(
                    model_name="device",
                    name="guardian",
                ),
                migrations.RemoveField(
                    model_name="device",
                    name="player",
                ),
                migrations.RemoveField(
                    model_name="pushsend",
                    name="device",
                ),
                migrations.DeleteModel(
                    name="GatewayHeartbeat",
                ),
                migrations.DeleteModel(
                    name="PushMinute",
                ),
                migrations.DeleteModel(
                    name="Device",
                ),
                migrations.DeleteModel(
                    name="PushSend",
                ),
            ],
            database_operations=[],
        ),
    ]
