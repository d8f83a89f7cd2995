"""`DeliveredPush` folds into `PushSend` (issue 45): the send records say which pushes are finished, one row
per (push, device) outcome and one row without a device for a push that finished as a whole (no device,
stale, muted, or given up: dead-lettered, the new status).

Every DeliveredPush row is kept as what PushSend needs to say the same: a key without any PushSend row
becomes the push's row without a device, with its provider and time (status: its push-level outcome, or
`given_up`), and a dead-lettered push gets its `given_up` row beside its devices' `failed` ones. A key whose
devices' rows are there needs nothing more: those rows say it was finished. Then the table goes.

Back: every push-level row becomes a DeliveredPush row again, and the `given_up` rows (which the old
status check refuses) go; the pushes finished by their devices are found finished by the old gateway too
(it sends none of their devices again)."""

from typing import Any

from django.db import migrations, models

PUSH_LEVEL = ("no_device", "stale", "muted")
FINISHED = (*PUSH_LEVEL, "given_up")
BATCH = 2000


def _row(push_send: Any, finished: Any) -> Any:
    """The push-level PushSend row saying what the DeliveredPush row `finished` said."""
    if finished.provider in PUSH_LEVEL:  # stale, no device, muted: the summary was the outcome
        status, provider, error = finished.provider, "", ""
    elif finished.provider == "dead-letter":
        status, provider, error = "given_up", "", "dead-lettered"
    else:  # finished without any send recorded (none today's gateway leaves): kept as finished
        status, provider, error = "given_up", finished.provider[:10], "finished (moved from DeliveredPush)"
    return push_send(
        push_key=finished.key,
        device=None,
        provider=provider,
        status=status,
        error=error,
        attempts=0,
        recorded_at=finished.delivered_at,
    )


def finished_into_sends(apps: Any, schema_editor: Any) -> None:
    db = schema_editor.connection.alias
    DeliveredPush = apps.get_model("delivery", "DeliveredPush")
    PushSend = apps.get_model("delivery", "PushSend")
    last = 0
    while True:
        batch = list(DeliveredPush.objects.using(db).filter(pk__gt=last).order_by("pk")[:BATCH])
        if not batch:
            return
        last = batch[-1].pk
        keys = [d.key for d in batch]
        sends = PushSend.objects.using(db).filter(push_key__in=keys)
        with_rows = set(sends.values_list("push_key", flat=True))
        marked = set(
            sends.filter(device__isnull=True, status__in=FINISHED).values_list("push_key", flat=True)
        )
        rows = [
            _row(PushSend, d)
            for d in batch
            if d.key not in marked and (d.key not in with_rows or d.provider == "dead-letter")
        ]
        PushSend.objects.using(db).bulk_create(rows, ignore_conflicts=True)


def sends_into_finished(apps: Any, schema_editor: Any) -> None:
    db = schema_editor.connection.alias
    DeliveredPush = apps.get_model("delivery", "DeliveredPush")
    PushSend = apps.get_model("delivery", "PushSend")
    marks = PushSend.objects.using(db).filter(device__isnull=True, status__in=FINISHED).order_by("pk")
    last = 0
    while True:
        batch = list(marks.filter(pk__gt=last)[:BATCH])
        if not batch:
            break
        last = batch[-1].pk
        DeliveredPush.objects.using(db).bulk_create(
            [
                DeliveredPush(
                    key=s.push_key,
                    provider=s.provider or ("dead-letter" if s.status == "given_up" else s.status),
                    delivered_at=s.recorded_at,
                )
                for s in batch
            ],
            ignore_conflicts=True,
        )
    PushSend.objects.using(db).filter(status="given_up").delete()


STATUSES = [
    ("accepted", "Accepted by the provider"),
    ("token_dead", "Token dead: device disabled"),
    ("failed", "Failed (refused payload, or retries exhausted)"),
    ("no_device", "Player has no enabled device"),
    ("stale", "Dropped: sat in the queue past its use"),
    ("muted", "Not sent: the player muted this kind of reminder"),
    ("given_up", "Given up: dead-lettered (its devices without an outcome failed)"),
]


class Migration(migrations.Migration):
    dependencies = [("delivery", "0001_tables_from_trainings")]

    operations = [
        migrations.RemoveConstraint(model_name="pushsend", name="pushsend_unique_push_outcome"),
        migrations.RemoveConstraint(model_name="pushsend", name="pushsend_status_valid"),
        migrations.AlterField(
            model_name="pushsend",
            name="status",
            field=models.CharField(choices=STATUSES, max_length=10),
        ),
        migrations.AddConstraint(
            model_name="pushsend",
            constraint=models.UniqueConstraint(
                condition=models.Q(("device__isnull", True), ("status__in", list(FINISHED))),
                fields=("push_key",),
                name="pushsend_unique_push_outcome",
            ),
        ),
        migrations.AddConstraint(
            model_name="pushsend",
            constraint=models.CheckConstraint(
                condition=models.Q(("status__in", [value for value, _ in STATUSES])),
                name="pushsend_status_valid",
            ),
        ),
        migrations.RunPython(finished_into_sends, sends_into_finished),
        migrations.DeleteModel(name="DeliveredPush"),
    ]
