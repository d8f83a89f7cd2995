"""The trainings app's devices and send records become delivery's (issue 41), every row kept: the models
enter delivery's state as they were, and the database renames their tables trainings_* -> delivery_*
(constraints, indexes and sequences go with them). The content types follow, so the permissions granted on
them stay granted."""

from typing import Any

import django.db.models.deletion
from django.db import migrations, models

import delivery.channels.registry



MODELS = ("device", "pushsend", "deliveredpush", "pushminute", "gatewayheartbeat")


def _move(schema_editor: Any, apps: Any, source: str, target: str) -> None:
    for model in MODELS:
        schema_editor.alter_db_table(None, f"{source}_{model}", f"{target}_{model}")
    ContentType = apps.get_model("contenttypes", "ContentType")
    db = schema_editor.connection.alias
    there = ContentType.objects.using(db).filter(app_label=target).values_list("model", flat=True)
    moving = set(MODELS) - set(there)  # a type already made for the target (by a post_migrate) stays apart
    ContentType.objects.using(db).filter(app_label=source, model__in=moving).update(app_label=target)


def tables_to_delivery(apps: Any, schema_editor: Any) -> None:
    _move(schema_editor, apps, "trainings", "delivery")


def tables_to_trainings(apps: Any, schema_editor: Any) -> None:
    _move(schema_editor, apps, "delivery", "trainings")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("trainings", "0045_delivery_tables_leave_trainings"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='PushMinute',
                    fields=[
                        ('minute', models.DateTimeField(primary_key=True, serialize=False)),
                        ('accepted', models.PositiveIntegerField(default=0)),
                        ('not_reached', models.PositiveIntegerField(default=0, help_text='Dead token or failed.')),
                        ('standin', models.PositiveIntegerField(default=0, help_text='Of the accepted, those a stand-in (logging, webhook) took: no phone got them.')),
                    ],
                ),
                migrations.CreateModel(
                    name='DeliveredPush',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('key', models.CharField(max_length=300)),
                        ('provider', models.CharField(max_length=50)),
                        ('delivered_at', models.DateTimeField(auto_now_add=True)),
                    ],
                    options={
                        'verbose_name_plural': 'delivered pushes',
                        'indexes': [models.Index(fields=['delivered_at'], name='deliveredpush_at_idx')],
                        'constraints': [models.UniqueConstraint(fields=('key',), name='deliveredpush_unique_key')],
                    },
                ),
                migrations.CreateModel(
                    name='Device',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('platform', models.CharField(choices=delivery.channels.registry.device_platform_choices, max_length=10, verbose_name='platform')),
                        ('provider', models.CharField(choices=delivery.channels.registry.device_provider_choices, max_length=10, verbose_name='provider')),
                        ('token', models.CharField(max_length=4096, verbose_name='token')),
                        ('app_id', models.CharField(blank=True, help_text="APNs topic (the app's bundle id) or FCM app id; empty means the configured default.", max_length=255, verbose_name='app id')),
                        ('created_at', models.DateTimeField(auto_now_add=True, verbose_name='created at')),
                        ('last_success_at', models.DateTimeField(blank=True, help_text='When a provider last accepted a push for it (to within an hour).', null=True, verbose_name='last success at')),
                        ('disabled_at', models.DateTimeField(blank=True, null=True, verbose_name='disabled at')),
                        ('disabled_reason', models.CharField(blank=True, max_length=200, verbose_name='disabled reason')),
                        ('coach', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='devices', to='trainings.coach', verbose_name='coach')),
                        ('guardian', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='devices', to='trainings.guardian', verbose_name='guardian')),
                        ('player', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='devices', to='trainings.player', verbose_name='player')),
                    ],
                    options={
                        'verbose_name': 'device',
                        'verbose_name_plural': 'devices',
                    },
                ),
                migrations.CreateModel(
                    name='GatewayHeartbeat',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(help_text='host:pid of the gateway process.', max_length=200, unique=True)),
                        ('seen_at', models.DateTimeField()),
                    ],
                    options={
                        'indexes': [models.Index(fields=['-seen_at'], name='gatewayheartbeat_latest_idx')],
                    },
                ),
                migrations.CreateModel(
                    name='PushSend',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('push_key', models.CharField(help_text="The push's idempotency key (Push.key).", max_length=300)),
                        ('player_id', models.BigIntegerField(blank=True, help_text="The push's player (kept when the device row goes); none: a coach's.", null=True)),
                        ('coach_id', models.BigIntegerField(blank=True, help_text="The coach a coach's digest went to.", null=True)),
                        ('guardian_id', models.BigIntegerField(blank=True, help_text="The push's guardian, when it went to one of the player's.", null=True)),
                        ('provider', models.CharField(help_text='The channel that served it (delivery/channels/registry.py), e.g. apns or logging.', max_length=10)),
                        ('status', models.CharField(choices=[('accepted', 'Accepted by the provider'), ('token_dead', 'Token dead: device disabled'), ('failed', 'Failed (refused payload, or retries exhausted)'), ('no_device', 'Player has no enabled device'), ('stale', 'Dropped: sat in the queue past its use'), ('muted', 'Not sent: the player muted this kind of reminder')], max_length=10)),
                        ('provider_message_id', models.CharField(blank=True, max_length=300)),
                        ('error', models.CharField(blank=True, max_length=500)),
                        ('attempts', models.PositiveSmallIntegerField(default=1)),
                        ('recorded_at', models.DateTimeField()),
                        ('device', models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='sends', to='delivery.device')),
                    ],
                ),
                migrations.AddIndex(
                    model_name='device',
                    index=models.Index(condition=models.Q(('disabled_at__isnull', True)), fields=['player'], name='device_enabled_player_idx'),
                ),
                migrations.AddIndex(
                    model_name='device',
                    index=models.Index(condition=models.Q(('disabled_at__isnull', True), ('guardian__isnull', False)), fields=['guardian'], name='device_enabled_guardian_idx'),
                ),
                migrations.AddIndex(
                    model_name='device',
                    index=models.Index(condition=models.Q(('coach__isnull', False), ('disabled_at__isnull', True)), fields=['coach'], name='device_enabled_coach_idx'),
                ),
                migrations.AddConstraint(
                    model_name='device',
                    constraint=models.UniqueConstraint(fields=('provider', 'token'), name='device_unique_token_per_provider'),
                ),
                migrations.AddConstraint(
                    model_name='device',
                    constraint=models.CheckConstraint(condition=models.Q(('platform__in', ['ios', 'android', 'web', 'email'])), name='device_platform_valid'),
                ),
                migrations.AddConstraint(
                    model_name='device',
                    constraint=models.CheckConstraint(condition=models.Q(('provider__in', ['apns', 'fcm', 'email'])), name='device_provider_valid'),
                ),
                migrations.AddConstraint(
                    model_name='device',
                    constraint=models.CheckConstraint(condition=models.Q(models.Q(('provider', 'apns'), _negated=True), ('platform__in', ['ios', 'web']), _connector='OR'), name='device_apns_platforms'),
                ),
                migrations.AddConstraint(
                    model_name='device',
                    constraint=models.CheckConstraint(condition=models.Q(models.Q(('provider', 'fcm'), _negated=True), ('platform__in', ['ios', 'android', 'web']), _connector='OR'), name='device_fcm_platforms'),
                ),
                migrations.AddConstraint(
                    model_name='device',
                    constraint=models.CheckConstraint(condition=models.Q(models.Q(('provider', 'email'), _negated=True), ('platform__in', ['email']), _connector='OR'), name='device_email_platforms'),
                ),
                migrations.AddConstraint(
                    model_name='device',
                    constraint=models.CheckConstraint(condition=models.Q(models.Q(('disabled_at__isnull', True), ('disabled_reason', '')), models.Q(('disabled_at__isnull', False), models.Q(('disabled_reason', ''), _negated=True)), _connector='OR'), name='device_disabled_has_reason'),
                ),
                migrations.AddConstraint(
                    model_name='device',
                    constraint=models.CheckConstraint(condition=models.Q(models.Q(('coach__isnull', True), ('guardian__isnull', True), ('player__isnull', False)), models.Q(('coach__isnull', True), ('guardian__isnull', False), ('player__isnull', True)), models.Q(('coach__isnull', False), ('guardian__isnull', True), ('player__isnull', True)), _connector='OR'), name='device_one_owner'),
                ),
                migrations.AddConstraint(
                    model_name='pushsend',
                    constraint=models.UniqueConstraint(fields=('push_key', 'device'), name='pushsend_unique_per_device'),
                ),
                migrations.AddConstraint(
                    model_name='pushsend',
                    constraint=models.UniqueConstraint(condition=models.Q(('device__isnull', True), ('status__in', ['no_device', 'stale', 'muted'])), fields=('push_key',), name='pushsend_unique_push_outcome'),
                ),
                migrations.AddConstraint(
                    model_name='pushsend',
                    constraint=models.CheckConstraint(condition=models.Q(('status__in', ['accepted', 'token_dead', 'failed', 'no_device', 'stale', 'muted'])), name='pushsend_status_valid'),
                ),
            ],
            database_operations=[migrations.RunPython(tables_to_delivery, tables_to_trainings)],
        ),
    ]
