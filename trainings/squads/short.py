"""The short-squad alert: fewer than a training's `min_players` have accepted, and its team's coaches get
one push or email naming how many are missing and who has not answered.

- At the short-squad rule's offsets before the start (a coaches' kind, `SHORT`, trainings/squads/kinds.py;
  default "24h"): the rule's occurrence fires through the digests' path (trainings/digest/firing.py, its
  `TELLERS`), and a squad that is not short by then tells nobody (`nobody_left`).
- At once, when a decline leaves fewer than the minimum accepted inside that window (from the rule's
  longest offset to the start): an engine occurrence of its own, whose key names the training and the
  number accepted, so each new low is told once however often players change their minds.

Coaches' quiet hours hold it as they hold a digest; the release says it again as it is then.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext_noop as _
from django.utils.translation import ngettext, override

from common.i18n import spoken, translated
from reminders.api import Callback, Delivery, JobSpec, jobs_insert, scan_kick_on_commit
from reminders.models import CallbackType, Job
from trainings.digest.firing import (
    AGAIN,
    KEY_PREFIX,
    TELLERS,
    Due,
    Told,
    coaches_tell,
    told_record_and_publish,
)
from trainings.digest.profiles import team_coaches
from trainings.digest.texts import NAMES_SHOWN
from trainings.models import (
    Coach,
    CoachPush,
    Invitation,
    InvitationStatus,
    ReminderRule,
    ReminderRun,
    RunOutcome,
    Training,
)
from trainings.planning.offsets import Offset, OffsetError
from trainings.reminding.rendering import Rendered, push_render
from trainings.squads.kinds import SHORT

logger = logging.getLogger(__name__)

SHORT_ALERT_HANDLER = "trainings.coach_short"
_NOBODY = _("everyone has answered")


@dataclass(frozen=True)
class Squad:
    """How a training's squad stands: accepted against the minimum, and who has not answered."""

    accepted: int
    minimum: int
    unanswered: list[str]

    @property
    def missing(self) -> int:
        return max(0, self.minimum - self.accepted)


def squad_state(training: Training) -> Squad | None:
    """The squad now; None when the training has no minimum."""
    if training.min_players is None:
        return None
    invitations = Invitation.objects.filter(training=training)
    accepted = invitations.filter(status=InvitationStatus.ACCEPTED).count()
    unanswered = sorted(
        invitations.filter(
            status=InvitationStatus.PENDING,
            player__memberships__team_id=training.team_id,
            player__memberships__active=True,
        )
        .values_list("player__name", flat=True)
        .distinct(),
        key=str.lower,
    )
    return Squad(accepted, training.min_players, unanswered)


def short_render(*, rule: ReminderRule, coach: Coach, training: Training, squad: Squad) -> Rendered:
    """ "U15 Training 18:00: 3 players missing (5 accepted, 8 needed); not answered yet: Anna, Ben"."""
    templates = list(rule.templates.all())
    head = push_render(templates=templates, training=training, player=coach, offset=Offset(1, "m"))
    language = spoken(head.language)
    with override(language):
        short = ngettext(
            "{head}: {missing} player missing ({accepted} accepted, {minimum} needed)",
            "{head}: {missing} players missing ({accepted} accepted, {minimum} needed)",
            squad.missing,
        )
        rest = max(1, len(squad.unanswered) - NAMES_SHOWN)
        more = ngettext("and {count} more", "and {count} more", rest).format(count=rest)
    text = short.format(head=head.body, missing=squad.missing, accepted=squad.accepted, minimum=squad.minimum)
    names = squad.unanswered[:NAMES_SHOWN]
    if len(squad.unanswered) > NAMES_SHOWN:
        names.append(more)
    tail = (
        translated(language, _("not answered yet: {names}")).format(names=", ".join(names))
        if names
        else translated(language, _NOBODY)
    )
    return Rendered(language=head.language, title=head.title, body=f"{text}; {tail}")


def short_tell(due: Due, coaches: list[Coach]) -> Told:
    """What one occurrence of the short-squad rule tells the coaches (nothing when the squad is not short)."""
    training, rule, delivery = due.training, due.rule, due.delivery
    squad = squad_state(training)
    if squad is None or not squad.missing:
        return Told(delivery, training, rule, RunOutcome.NOBODY_LEFT, [])

    def render(coach: Coach) -> Rendered:
        return short_render(rule=rule, coach=coach, training=training, squad=squad)

    key = f"coach-short-{delivery.idempotency_key}"
    return coaches_tell(delivery, training, rule, coaches, render, key, squad.missing, training.start)


def _short_again(push: CoachPush, now: datetime) -> tuple[Rendered | None, int]:
    """A held alert on release: the squad as it is then (nothing when it is no longer short)."""
    squad = squad_state(push.training)
    if squad is None or not squad.missing or push.rule is None:
        return None, 0
    return short_render(rule=push.rule, coach=push.coach, training=push.training, squad=squad), squad.missing


TELLERS[SHORT.code] = short_tell
AGAIN[SHORT.code] = _short_again


def short_rule() -> ReminderRule | None:
    """The active short-squad rule (the first, when an operator made several)."""
    return ReminderRule.objects.filter(kind=SHORT.code, active=True).order_by("pk").first()


def short_alert_key(*, training_id: object, accepted: int) -> str:
    return f"{KEY_PREFIX}short-{training_id}-{accepted}"


def short_alert_schedule(*, training_id: uuid.UUID | str, now: datetime | None = None) -> bool:
    """A decline left the squad short: when it is inside the rule's window, make the alert's occurrence
    now, once per training and number accepted. Returns whether one was made."""
    now = now or timezone.now()
    training = Training.objects.filter(pk=training_id, cancelled=False).first()
    rule = short_rule()
    if training is None or rule is None or training.start <= now:
        return False
    try:
        opens = min(instant for instant, _ in rule.instants_for(training))
    except (ValueError, OffsetError):  # no minimum any more, or no offset
        return False
    squad = squad_state(training)
    if now < opens or squad is None or not squad.missing:
        return False
    key = short_alert_key(training_id=training.pk, accepted=squad.accepted)
    if Job.objects.filter(key=key).exists():
        return False
    spec = JobSpec(
        key=key,
        schedules=[now],
        callback=Callback(
            type=CallbackType.HANDLER,
            target=SHORT_ALERT_HANDLER,
            payload={"training": str(training.pk), "rule": rule.pk},
        ),
        priority=settings.TRAININGS_REMINDER_PRIORITY,
        deadline_seconds=settings.TRAININGS_REMINDER_DEADLINE_SECONDS,
    )
    try:
        with transaction.atomic():
            jobs_insert(specs=[spec])
            scan_kick_on_commit(now)
    except IntegrityError:  # made by a concurrent decline: that one alerts
        return False
    return True


def short_alert_on_commit(*, training_id: uuid.UUID | str) -> None:
    """`short_alert_schedule` once the decline commits (never for a rolled-back one; a failure to schedule
    it never undoes the decline)."""

    def schedule() -> None:
        try:
            short_alert_schedule(training_id=training_id)
        except Exception:
            logger.exception("short-squad alert for %s not scheduled", training_id)

    transaction.on_commit(schedule)


@dataclass(frozen=True)
class _AtOnce:
    delivery: Delivery
    training: Training
    rule: ReminderRule
    offset: Offset


def short_alert_fire(*, delivery: Delivery) -> ReminderRun:
    """The at-once alert's occurrence: tell the coaches, if the squad is still short."""
    payload = delivery.payload if isinstance(delivery.payload, dict) else {}
    try:
        training_id, rule_id = uuid.UUID(str(payload["training"])), int(payload["rule"])
    except (KeyError, TypeError, ValueError):
        training_id, rule_id = None, None
    training = Training.objects.select_related("team").filter(pk=training_id).first() if training_id else None
    rule = ReminderRule.objects.prefetch_related("templates").filter(pk=rule_id).first() if rule_id else None
    if training is None or rule is None:
        told = Told(delivery, training, rule, RunOutcome.GONE, [])
    elif training.cancelled:
        told = Told(delivery, training, rule, RunOutcome.CANCELLED, [])
    elif not rule.active:
        told = Told(delivery, training, rule, RunOutcome.INACTIVE, [])
    else:
        due = _AtOnce(delivery, training, rule, Offset(1, "m"))
        told = short_tell(due, team_coaches({training.team_id})[training.team_id])
    errors = told_record_and_publish([told])
    if errors:
        raise next(iter(errors.values()))
    return ReminderRun.objects.get(occurrence_key=delivery.idempotency_key)
