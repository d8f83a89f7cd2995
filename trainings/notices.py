"""A "training moved" notice: one per player already reminded, a few seconds after the last move of a burst,
to whom the team reminds for that player (the player, their guardians, or both: `Team.reminds`).

The notice is an engine job of its own (key `trainings-moved-notice-…`), so it is as durable as a reminder
and runs through the same handler path; quiet hours hold it like a reminder (trainings.held).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from reminders.api import Callback, Delivery, job_upsert
from reminders.models import CallbackType
from trainings import kinds
from trainings.held import held_releases, quiet_releases_schedule, quiet_status
from trainings.models import (
    Invitation,
    InvitationStatus,
    Player,
    Push,
    PushStatus,
    Training,
)
from trainings.publishing import pushes_publish, pushes_record
from trainings.recipients import Recipient, recipients_expand
from trainings.rendering import PushRow, notice_render, push_for
from trainings.transitions import pushes_withdraw


def training_moved_notice_schedule(*, training: Training) -> None:
    """In the move's transaction: an engine job that tells the players already reminded that the training
    moved, TRAININGS_MOVED_NOTICE_DELAY_SECONDS after this move. A later move replaces a notice not yet
    sent (and pushes it back), so a burst of moves sends one notice per player, with the last time."""
    now = timezone.now()
    job_upsert(
        key=moved_notice_key(training_id=training.pk),
        schedules=[now + timedelta(seconds=settings.TRAININGS_MOVED_NOTICE_DELAY_SECONDS)],
        callback=Callback(
            type=CallbackType.HANDLER,
            target=MOVED_NOTICE_HANDLER,
            payload={
                "training": str(training.pk),
                "start": training.start.isoformat(),
                "moved_at": now.isoformat(),
            },
        ),
        priority=settings.TRAININGS_REMINDER_PRIORITY,
    )


MOVED_NOTICE_HANDLER = "trainings.moved_notice"


def training_moved_notify(*, delivery: Delivery) -> int:
    """One "training moved" push, with the new local time, for each player a reminder of this training
    already reached before the move (themself or a guardian of theirs; and who has not declined this
    training), to each of that player's recipients as the team's `reminds` says: the player, their
    guardians, or both (trainings/recipients.py). Returns how many pushes.

    Quiet hours hold it like a reminder, except when the training now starts before the player's window
    ends: then it goes at once (the one push allowed through quiet hours, with the reason recorded). A
    notice of an earlier move still held for a player is withdrawn: this one replaces it.
    """
    payload = delivery.payload if isinstance(delivery.payload, dict) else {}
    try:
        training_id = uuid.UUID(str(payload.get("training")))
    except ValueError:
        return 0
    training = Training.objects.select_related("team").filter(pk=training_id).first()
    if training is None or training.cancelled or training.start.isoformat() != payload.get("start"):
        return 0  # gone, cancelled, or moved again: that move has its own notice
    moved_at = _instant(payload.get("moved_at")) or delivery.fire_at
    reminded = (
        Push.objects.filter(training=training, status=PushStatus.SENT, sent_at__lte=moved_at)
        .exclude(kind=kinds.MOVED.code)
        .values("player_id")
    )
    declined = Invitation.objects.filter(training=training, status=InvitationStatus.DENIED)
    players = [
        Recipient(*row)
        for row in Player.objects.filter(pk__in=reminded)
        .filter(invitations__training=training, memberships__team=training.team, memberships__active=True)
        .exclude(pk__in=declined.values("player_id"))
        .distinct()
        .order_by("pk")
        .values_list("pk", "language", "time_zone", "quiet_start", "quiet_end")
    ]
    notice = (training.pk, kinds.MOVED.code)
    recipients = recipients_expand({notice: players}, {training.pk: training.team.reminds})[notice]
    with transaction.atomic():
        earlier = Push.objects.filter(
            training=training, kind=kinds.MOVED.code, player__in=[p.pk for p in players]
        ).exclude(occurrence_key=delivery.idempotency_key)
        pushes_withdraw(earlier, source=PushStatus.HELD, reason="replaced by the notice of a later move")
        pushes = _moved_pushes(delivery, training, recipients)
        pushes_record(sorted(pushes, key=lambda p: p.key))
        quiet_releases_schedule(
            (training, None, p.release_at) for p in pushes if p.status == PushStatus.HELD and p.release_at
        )
    errors = pushes_publish(deliveries=[delivery])
    if errors:
        raise next(iter(errors.values()))
    return len(pushes)


def _moved_pushes(delivery: Delivery, training: Training, recipients: list[Recipient]) -> list[PushRow]:
    held_until = held_releases(trainings=[training.pk]).get(training.pk, {})
    expires_at = kinds.MOVED.closes(training)
    pushes = []
    for person in recipients:  # a player, or a guardian of theirs (their own language, zone, quiet hours)
        status, release_at, reason = quiet_status(
            person,
            training,
            delivery.fire_at,
            expires_at,
            held_until=held_until.get((person.pk, person.guardian)),
        )
        if status == PushStatus.SKIPPED:  # the window ends after the new start: this one goes through
            status, release_at = PushStatus.PENDING, None
            reason = f"sent in quiet hours: the training now starts before they end ({reason})"
        pushes.append(
            push_for(
                delivery,
                training=training,
                player=person,
                rendered=notice_render(kind=kinds.MOVED, training=training, player=person),
                kind=kinds.MOVED.code,
                expires_at=expires_at,
                status=status,
                release_at=release_at,
                status_reason=reason,
                guardian_id=person.guardian,
            )
        )
    return pushes


def _instant(text: object) -> datetime | None:
    try:
        instant = datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return instant if instant.tzinfo is not None else None


def moved_notice_key(*, training_id: object) -> str:
    return f"trainings-moved-notice-{training_id}"
