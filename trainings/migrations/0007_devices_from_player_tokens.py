"""Move each player's `fcm:<token>` / `apns:<token>` entries into Device rows.

FCM tokens become Android devices (the list never said which platform; a web client re-registering its
token corrects it), APNs tokens iOS devices. Entries without a known prefix were never deliverable and
are left in the legacy field. A token already registered (another player listed it too) keeps its first
owner. Reversing deletes nothing it cannot tell apart from a later registration, so it is a no-op.
"""

from django.db import migrations

_PLATFORM = {"fcm": "android", "apns": "ios"}


def devices_from_player_tokens(apps, schema_editor):
    Player = apps.get_model("trainings", "Player")
    Device = apps.get_model("trainings", "Device")
    batch = []
    for player_id, tokens in Player.objects.exclude(device_tokens=[]).values_list("id", "device_tokens"):
        for entry in tokens or []:
            provider, sep, token = str(entry).partition(":")
            if sep and provider in _PLATFORM and token.strip():
                batch.append(
                    Device(player_id=player_id, provider=provider, platform=_PLATFORM[provider], token=token.strip())
                )
        if len(batch) >= 1000:
            Device.objects.bulk_create(batch, ignore_conflicts=True)
            batch = []
    Device.objects.bulk_create(batch, ignore_conflicts=True)


class Migration(migrations.Migration):
    dependencies = [
        ("trainings", "0006_devices_and_push_sends"),
    ]

    operations = [
        migrations.RunPython(devices_from_player_tokens, migrations.RunPython.noop),
    ]
