"""Notices of a change to a training, to whom the team reminds for each player concerned (the player, their
guardians, or both: `Team.reminds`), a few seconds after the change:

- "training moved": one per player already reminded, after the last move of a burst;
- "training cancelled": one per invited player who accepted or whom a reminder (or notice) reached, never
  to one who declined; never twice for a training, even if it is cancelled again after being restored.

Each notice is an engine job of its own (keys `trainings-moved-notice-…`, `trainings-cancelled-notice-…`),
so it is as durable as a reminder and runs through the same handler path. Quiet hours hold it like a
reminder (trainings.reminding.held), except when the training starts (or would have started) before they end.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy

from reminders.api import Callback, Delivery, job_upsert
from reminders.models import CallbackType
from trainings.models import (
    Invitation,
    InvitationStatus,
    Player,
    Push,
    PushStatus,
    Training,
)
from trainings.planning import kinds
from trainings.reminding.held import held_releases, quiet_releases_schedule, quiet_status
from trainings.reminding.publishing import pushes_publish, pushes_record
from trainings.reminding.recipients import Recipient, recipients_expand
from trainings.reminding.rendering import PushRow, notice_render, push_for
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
    guardians, or both (trainings/reminding/recipients.py). Returns how many pushes.

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
        pushes = _notice_pushes(
            delivery,
            training,
            recipients,
            kinds.MOVED,
            "sent in quiet hours: the training now starts before they end",
        )
        pushes_record(sorted(pushes, key=lambda p: p.key))
        quiet_releases_schedule(
            (training, None, p.release_at) for p in pushes if p.status == PushStatus.HELD and p.release_at
        )
    errors = pushes_publish(deliveries=[delivery])
    if errors:
        raise next(iter(errors.values()))
    return len(pushes)


def _notice_pushes(
    delivery: Delivery, training: Training, recipients: list[Recipient], kind: kinds.Kind, through: str
) -> list[PushRow]:
    """A notice of `kind` for each recipient, held through their quiet hours unless these end after the
    training's start: then it goes at once, `through` saying why (the one push allowed through them)."""
    held_until = held_releases(trainings=[training.pk]).get(training.pk, {})
    expires_at = kind.closes(training)
    pushes = []
    for person in recipients:  # a player, or a guardian of theirs (their own language, zone, quiet hours)
        status, release_at, reason = quiet_status(
            person,
            training,
            delivery.fire_at,
            expires_at,
            held_until=held_until.get((person.pk, person.guardian)),
        )
        if status == PushStatus.SKIPPED:  # the window ends after the start: this one goes through
            status, release_at = PushStatus.PENDING, None
            reason = f"{through} ({reason})"
        pushes.append(
            push_for(
                delivery,
                training=training,
                player=person,
                rendered=notice_render(kind=kind, training=training, player=person),
                kind=kind.code,
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


def cancelled_notice_key(*, training_id: object) -> str:
    return f"trainings-cancelled-notice-{training_id}"


CANCELLED_NOTICE_HANDLER = "trainings.cancelled_notice"
# What a coach who cancels reads (the admin's message).
CANCELLED_TOLD = gettext_lazy(
    "Training cancelled; its pending reminders are cancelled, and the players who said they would come or "
    "were reminded are told."
)


def training_cancelled_notice_schedule(*, training: Training) -> None:
    """In the cancelling transaction: an engine job that tells the players concerned, the moved notice's
    delay after now (so a Cancel undone at once tells nobody: the handler finds the training restored)."""
    job_upsert(
        key=cancelled_notice_key(training_id=training.pk),
        schedules=[timezone.now() + timedelta(seconds=settings.TRAININGS_MOVED_NOTICE_DELAY_SECONDS)],
        callback=Callback(
            type=CallbackType.HANDLER,
            target=CANCELLED_NOTICE_HANDLER,
            payload={"training": str(training.pk)},
        ),
        priority=settings.TRAININGS_REMINDER_PRIORITY,
    )


def training_cancelled_notify(*, delivery: Delivery) -> int:
    """One "training cancelled" push for each invited player (still on the team) who accepted, or whom a
    push of this training reached (a reminder, a moved notice: themself or a guardian), and who has not
    declined it; to each of that player's recipients as the team's `reminds` says. Returns how many.

    Nothing when the training is no longer cancelled (restored before the notice fired), has started
    already, or is gone. A player told once is never told again: not by a redelivered job (the push keys
    are the occurrence's), nor when the training is restored and cancelled again (those who have a
    cancelled push of it are left out). Quiet hours hold it, unless they end after the start.
    """
    payload = delivery.payload if isinstance(delivery.payload, dict) else {}
    try:
        training_id = uuid.UUID(str(payload.get("training")))
    except ValueError:
        return 0
    with transaction.atomic():
        training = (
            Training.objects.select_for_update(of=("self",))
            .select_related("team")
            .filter(pk=training_id)
            .first()
        )
        if training is None or not training.cancelled or training.start <= delivery.fire_at:
            return 0
        told = (
            Push.objects.filter(training=training, kind=kinds.CANCELLED.code)
            .exclude(status=PushStatus.WITHDRAWN)  # withdrawn while held (restored meanwhile): not told
            .exclude(occurrence_key=delivery.idempotency_key)  # this job's own, if it ran before: as is
        )
        reached = Push.objects.filter(training=training, status=PushStatus.SENT).exclude(
            kind=kinds.CANCELLED.code
        )
        declined = Invitation.objects.filter(training=training, status=InvitationStatus.DENIED)
        concerned = Invitation.objects.filter(training=training).filter(
            Q(status=InvitationStatus.ACCEPTED) | Q(player_id__in=reached.values("player_id"))
        )
        players = [
            Recipient(*row)
            for row in Player.objects.filter(pk__in=concerned.values("player_id"))
            .filter(memberships__team=training.team, memberships__active=True)
            .exclude(pk__in=declined.values("player_id"))
            .exclude(pk__in=told.values("player_id"))
            .distinct()
            .order_by("pk")
            .values_list("pk", "language", "time_zone", "quiet_start", "quiet_end")
        ]
        notice = (training.pk, kinds.CANCELLED.code)
        recipients = recipients_expand({notice: players}, {training.pk: training.team.reminds})[notice]
        pushes = _notice_pushes(
            delivery,
            training,
            recipients,
            kinds.CANCELLED,
            "sent in quiet hours: the training would have started before they end",
        )
        pushes_record(sorted(pushes, key=lambda p: p.key))
        quiet_releases_schedule(
            (training, None, p.release_at) for p in pushes if p.status == PushStatus.HELD and p.release_at
        )
    errors = pushes_publish(deliveries=[delivery])
    if errors:
        raise next(iter(errors.values()))
    return len(pushes)
