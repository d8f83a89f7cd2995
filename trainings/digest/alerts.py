"""The late-decline alert: a player declines less than their team's `decline_alert_within` before the
start, and the team's coaches are told at once, by an engine occurrence of its own (retried like any other)
whose job key names the training and the player: one alert per player and training, however often they
change their mind. The alert's messages are recorded and sent as the digests are (trainings/digest/
firing.py)."""

from __future__ import annotations

import logging
import uuid
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from reminders.api import Callback, Delivery, JobSpec, jobs_insert, scan_kick_on_commit
from reminders.models import CallbackType, Job
from trainings.digest.firing import (
    COACH_ALERT_HANDLER,
    KEY_PREFIX,
    Told,
    coaches_tell,
    team_coaches,
    told_record_and_publish,
)
from trainings.digest.texts import decline_render
from trainings.models import (
    Coach,
    Invitation,
    InvitationStatus,
    Player,
    ReminderRule,
    ReminderRun,
    RunOutcome,
    Training,
)
from trainings.planning import kinds
from trainings.planning.offsets import Offset
from trainings.reminding.rendering import Rendered

logger = logging.getLogger(__name__)


def decline_alert_key(*, training_id: Any, player_id: int) -> str:
    return f"{KEY_PREFIX}decline-{training_id}-{player_id}"


def decline_alert_schedule(*, training_id: Any, player_id: int, now: datetime | None = None) -> bool:
    """A player declined: when the training's team wants an alert for a decline this close to the start
    (`Team.decline_alert_within`) and the alert's rule is active, make its occurrence now, once per
    training and player (its job's key names both). Returns whether one was made."""
    now = now or timezone.now()
    training = Training.objects.select_related("team").filter(pk=training_id).first()
    if training is None or training.cancelled or not training.team.decline_alert_within:
        return False
    within = Offset.parse(training.team.decline_alert_within).approximate()
    if not (now < training.start <= now + within):
        return False
    rule = ReminderRule.objects.filter(kind=kinds.DECLINED.code, active=True).order_by("pk").first()
    if rule is None:
        return False
    key = decline_alert_key(training_id=training.pk, player_id=player_id)
    if Job.objects.filter(key=key).exists():
        return False
    spec = JobSpec(
        key=key,
        schedules=[now],
        callback=Callback(
            type=CallbackType.HANDLER,
            target=COACH_ALERT_HANDLER,
            payload={"training": str(training.pk), "rule": rule.pk, "player": player_id},
        ),
        priority=settings.TRAININGS_REMINDER_PRIORITY,
        deadline_seconds=settings.TRAININGS_REMINDER_DEADLINE_SECONDS,
    )
    try:
        with transaction.atomic():
            jobs_insert(specs=[spec])
            scan_kick_on_commit(now)
    except IntegrityError:  # made by a concurrent answer of the same player: that one alerts
        return False
    return True


def decline_alert_on_commit(*, training_id: Any, player_id: int) -> None:
    """`decline_alert_schedule` once the answer's transaction commits (an alert never for a rolled-back
    answer; a failure to schedule it never undoes the answer)."""

    def schedule() -> None:
        try:
            decline_alert_schedule(training_id=training_id, player_id=player_id)
        except Exception:
            logger.exception("late-decline alert for %s/%s not scheduled", training_id, player_id)

    transaction.on_commit(schedule)


def decline_alert_fire(*, delivery: Delivery) -> ReminderRun:
    """The alert's occurrence: tell the team's coaches that the player declined, if they still have."""
    payload = delivery.payload if isinstance(delivery.payload, dict) else {}
    try:
        training_id, rule_id, player_id = (
            uuid.UUID(str(payload["training"])),
            payload["rule"],
            payload["player"],
        )
    except (KeyError, ValueError):
        training_id, rule_id, player_id = None, None, None
    training = Training.objects.select_related("team").filter(pk=training_id).first() if training_id else None
    rule = ReminderRule.objects.prefetch_related("templates").filter(pk=rule_id).first() if rule_id else None
    player = Player.objects.filter(pk=player_id).first() if player_id else None
    if training is None or rule is None or player is None:
        told = Told(delivery, training, rule, RunOutcome.GONE, [])
    elif training.cancelled:
        told = Told(delivery, training, rule, RunOutcome.CANCELLED, [])
    elif not rule.active:
        told = Told(delivery, training, rule, RunOutcome.INACTIVE, [])
    elif not Invitation.objects.filter(
        training=training, player=player, status=InvitationStatus.DENIED
    ).exists():
        told = Told(delivery, training, rule, RunOutcome.NOBODY_LEFT, [])  # accepted again meanwhile
    else:
        templates = list(rule.templates.all())
        before = training.start - delivery.fire_at

        def render(coach: Coach) -> Rendered:
            return decline_render(templates=templates, coach=coach, training=training, player=player.name,
                                  before=before)  # fmt: skip

        coaches = team_coaches({training.team_id})[training.team_id]
        key = f"coach-decline-{training.pk}-{player.pk}"
        told = coaches_tell(delivery, training, rule, coaches, render, key, 1, training.start, player=player)
    errors = told_record_and_publish([told])
    if errors:
        raise next(iter(errors.values()))
    return ReminderRun.objects.get(occurrence_key=delivery.idempotency_key)
