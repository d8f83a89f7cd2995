"""The "you're in" notice: a player the waiting list gave a place (trainings/squads/places.py) is told at
once, by an engine job of its own (key `trainings-squad-in-<training>-<player>`, as durable as a reminder),
sent as the moved and cancelled notices are (trainings/reminding/notices.py): to whom the team reminds for
that player, held through their quiet hours unless these end after the start. Nothing when the player is no
longer accepted when it fires (declined meanwhile), or the training is cancelled, gone or started.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime

from django.conf import settings
from django.db import transaction

from reminders.api import Callback, Delivery, job_upsert, scan_kick_on_commit
from reminders.models import CallbackType
from trainings.models import Invitation, InvitationStatus, Player, PushStatus, Training
from trainings.reminding.held import quiet_releases_schedule
from trainings.reminding.notices import _notice_pushes
from trainings.reminding.publishing import pushes_publish, pushes_record
from trainings.reminding.recipients import Recipient, recipients_expand
from trainings.squads.kinds import PROMOTED

SQUAD_IN_HANDLER = "trainings.squad_in"
KEY_PREFIX = "trainings-squad-in-"


def squad_in_key(*, training_id: object, player_id: int) -> str:
    return f"{KEY_PREFIX}{training_id}-{player_id}"


def squad_in_notices_schedule(*, training_id: object, player_ids: Iterable[int], now: datetime) -> None:
    """In the promotion's transaction: one job per promoted player, due now (a player promoted again
    later gets a new instant of the same job, so a new notice)."""
    for player_id in player_ids:
        job_upsert(
            key=squad_in_key(training_id=training_id, player_id=player_id),
            schedules=[now],
            callback=Callback(
                type=CallbackType.HANDLER,
                target=SQUAD_IN_HANDLER,
                payload={"training": str(training_id), "player": player_id},
            ),
            priority=settings.TRAININGS_REMINDER_PRIORITY,
        )
        scan_kick_on_commit(now)


def squad_in_notify(*, delivery: Delivery) -> int:
    """Send the notice to the player's recipients, if they still have the place. Returns how many pushes."""
    payload = delivery.payload if isinstance(delivery.payload, dict) else {}
    try:
        training_id, player_id = uuid.UUID(str(payload.get("training"))), int(payload["player"])
    except (KeyError, TypeError, ValueError):
        return 0
    training = Training.objects.select_related("team").filter(pk=training_id).first()
    if training is None or training.cancelled or training.start <= delivery.fire_at:
        return 0
    accepted = Invitation.objects.filter(
        training=training, player_id=player_id, status=InvitationStatus.ACCEPTED
    )
    players = [
        Recipient(*row)
        for row in Player.objects.filter(pk=player_id, pk__in=accepted.values("player_id"))
        .filter(memberships__team=training.team, memberships__active=True)
        .distinct()
        .values_list("pk", "language", "time_zone", "quiet_start", "quiet_end")
    ]
    notice = (training.pk, PROMOTED.code)
    recipients = recipients_expand({notice: players}, {training.pk: training.team.reminds})[notice]
    with transaction.atomic():
        through = "sent in quiet hours: the training starts before they end"
        pushes = _notice_pushes(delivery, training, recipients, PROMOTED, through)
        pushes_record(sorted(pushes, key=lambda p: p.key))
        quiet_releases_schedule(
            (training, None, p.release_at) for p in pushes if p.status == PushStatus.HELD and p.release_at
        )
    errors = pushes_publish(deliveries=[delivery])
    if errors:
        raise next(iter(errors.values()))
    return len(pushes)
