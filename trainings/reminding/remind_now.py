"""The coach's "remind the pending players now" in the admin: one push per player the rule still chases,
built as a fired reminder's are (trainings/reminding/firing.py) and published at once, once per click."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from reminders.api import Delivery
from trainings.models import Push, PushStatus, ReminderRule, Training
from trainings.reminding.firing import recipients_pushes
from trainings.reminding.publishing import pushes_publish, pushes_record
from trainings.reminding.recipients import recipients_names, reminder_addressees
from trainings.reminding.rendering import offset_at


@dataclass(frozen=True)
class RemindResult:
    recipients: int  # pushes queued now (one per player, or guardian of theirs)
    published: int
    error: str = ""
    names: tuple[str, ...] = ()
    already: int = 0  # pending players left out: reminded of this rule by a click within REMIND_AGAIN_AFTER


# A second click (another coach, a reload) within this long does not remind the same player again.
REMIND_AGAIN_AFTER = timedelta(minutes=1)


def training_remind_now(*, training: Training, rule: ReminderRule, click: str) -> RemindResult:
    """ "Remind the pending players now": one push per player the rule still chases, published at once.

    The click's token is part of every push key (unique per occurrence key and player), so a resubmitted
    click finds its pushes already there and publishes only those not yet sent: once per click.
    """
    now = timezone.now()
    prefix = f"manual-{training.pk}-{rule.slug}-"
    occurrence_key = f"{prefix}{click}"[:255]
    with transaction.atomic():
        # Two clicks at once: the second waits here and then sees the first one's pushes.
        Training.objects.select_for_update().filter(pk=training.pk).first()
        recent = set(
            Push.objects.filter(
                training=training, occurrence_key__startswith=prefix, created_at__gte=now - REMIND_AGAIN_AFTER
            )
            .exclude(occurrence_key=occurrence_key)  # the same click resubmitted: its own pushes count
            .values_list("player_id", "guardian_id")
        )
        pending = reminder_addressees(training=training, rule=rule)
        recipients = [p for p in pending if (p.pk, p.guardian) not in recent]
        delivery = Delivery(
            occurrence_id=0,
            idempotency_key=occurrence_key,
            job_key=occurrence_key,
            fire_at=now,
            attempt=1,
            target=settings.TRAININGS_PUSH_QUEUE,
            payload={"training": str(training.pk), "rule": rule.pk},
        )
        firing = recipients_pushes(
            delivery, training, rule, recipients, offset_at(training=training, kind=rule.kind, now=now)
        )
        # No engine occurrence behind a coach's click.
        pushes_record(sorted((p._replace(occurrence_id=None) for p in firing.pushes), key=lambda p: p.key))
    errors = pushes_publish(deliveries=[delivery])
    published = Push.objects.filter(occurrence_key=occurrence_key, status=PushStatus.SENT).count()
    error = str(errors[0]) if 0 in errors else ""
    return RemindResult(
        recipients=len(recipients),
        published=published,
        error=error,
        names=recipients_names(recipients),
        already=len(pending) - len(recipients),
    )
