"""The coaches' kinds fire: decide what each coach is told, record one `CoachPush` per coach and subject,
publish them to the push queue the players' pushes go through (the gateway sends them to the coach's
devices and email by the coach's channels).

- A digest (`DIGEST`) tells who still owes what for its training; a morning summary (`SUMMARY`) for every
  training of the team's day, once: each of the day's trainings has its own occurrence at that instant;
  the first to fire makes the summary (its key names the team and the day) and the others record
  `summarized`. Nobody owing anything is recorded (`nobody_left`), not sent.
- A late-decline alert (`DECLINED`) is an occurrence made when a player declines (trainings/digest/
  alerts.py, which tells the coaches through `coaches_tell` and `told_record_and_publish` here); its key
  names the training and the player, so a player declining twice alerts once.
- The coach's quiet hours (else the team's) hold a message until they end; the release decides it again
  (who owes what then) or skips it with the reason. A rule whose reminders are all critical goes
  through, as a player's critical reminder does.

Every occurrence gets its `ReminderRun` (the outcome and how many coaches were told), as players'
reminders do.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from typing import Any, Protocol
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from delivery.api import QueuedPush, push_queue_publisher
from reminders.api import Callback, Delivery, JobSpec, TransportError, jobs_insert, scan_kick_on_commit
from reminders.models import CallbackType, Job
from trainings.digest.owed import trainings_owed
from trainings.digest.profiles import team_coaches
from trainings.digest.texts import decline_render, digest_render
from trainings.models import (
    Coach,
    CoachPush,
    Invitation,
    InvitationStatus,
    Player,
    ReminderRule,
    ReminderRun,
    RunOutcome,
    Team,
    Training,
)
from trainings.models.coaches import CoachPushStatus
from trainings.planning import kinds
from trainings.planning.offsets import Offset, is_time_zone
from trainings.reminding.held import quiet_status
from trainings.reminding.rendering import Rendered
from trainings.transitions import coach_push_release, coach_pushes_mark_sent

logger = logging.getLogger(__name__)

COACH_RELEASE_HANDLER = "trainings.coach_release"
COACH_ALERT_HANDLER = "trainings.coach_alert"
# The engine jobs this module makes (reserved in trainings/handlers.py).
KEY_PREFIX = "trainings-coach-"


class Due(Protocol):
    """An occurrence of a coaches' rule that passed the fire path's checks
    (trainings.reminding.firing._Due)."""

    @property
    def delivery(self) -> Delivery: ...

    @property
    def training(self) -> Training: ...

    @property
    def rule(self) -> ReminderRule: ...

    @property
    def offset(self) -> Offset: ...


@dataclass
class Told:
    """What one occurrence comes to: its outcome, and the messages to record (not yet saved)."""

    delivery: Delivery
    training: Training | None
    rule: ReminderRule | None
    outcome: RunOutcome
    pushes: list[CoachPush]

    def run(self, now: datetime) -> ReminderRun:
        return ReminderRun(
            occurrence_key=self.delivery.idempotency_key,
            occurrence_id=self.delivery.occurrence_id or None,
            training=self.training,
            rule=self.rule,
            fire_at=self.delivery.fire_at,
            outcome=self.outcome,
            recipients=len(self.pushes),
            attempts=self.delivery.attempt,
            ran_at=now,
        )


def digests_take(
    checked: list[Any], errors: dict[int, TransportError], *, due: type[Any]
) -> tuple[list[Any], list[Any]]:
    """Fire the coaches' occurrences among a chunk's checked ones (those of the `due` type, trainings.
    firing's: still wanted; their errors go to `errors`) and return the others for the players' path, with
    those of them that are due."""
    dues = [item for item in checked if isinstance(item, due)]
    coaches = [item for item in dues if kinds.of(item.rule.kind).to == "coaches"]
    if coaches:
        errors.update(digests_fire(coaches))
    taken = {id(item) for item in coaches}
    return [item for item in checked if id(item) not in taken], [
        item for item in dues if id(item) not in taken
    ]


def digests_fire(dues: Sequence[Due]) -> dict[int, TransportError]:
    """Fire a chunk's digests and morning summaries (the coaches' kinds that fire at instants); returns a
    TransportError per occurrence that has a message the broker did not take (the engine retries it)."""
    coaches = team_coaches({due.training.team_id for due in dues})
    summarized: set[tuple[Any, datetime]] = set()  # (team, instant) of the day's summaries made
    told = []
    for due in dues:
        training, rule, delivery = due.training, due.rule, due.delivery
        if due.rule.kind == kinds.SUMMARY.code:
            at = (training.team_id, delivery.fire_at)
            if at in summarized or _summary_made(*at):  # another of the day's trainings' occurrences made it
                told.append(Told(delivery, training, rule, RunOutcome.SUMMARIZED, []))
                continue
            summarized.add(at)
            day = _day_trainings(training.team, delivery.fire_at) or [training]
            subject, key = list(trainings_owed(day).values()), f"coach-summary-{at[0]}-{_local_day(due)}"
            expires_at = max(item.training.start for item in subject)
        else:
            subject = [trainings_owed([training])[training.pk]]
            key, expires_at = f"coach-digest-{delivery.idempotency_key}", kinds.of(rule.kind).closes(training)
        templates = list(rule.templates.all())

        def render(coach: Coach, subject: list[Any] = subject, templates: list[Any] = templates) -> Any:
            return digest_render(templates=templates, coach=coach, trainings=subject)

        owing = len({player for item in subject for player in item.players})
        told.append(
            coaches_tell(delivery, training, rule, coaches[training.team_id], render, key, owing, expires_at)
        )
    return told_record_and_publish(told)


def _local_day(due: Due) -> str:
    team = due.training.team
    zone = ZoneInfo(team.time_zone) if is_time_zone(team.time_zone) else due.training.zone
    return due.delivery.fire_at.astimezone(zone).date().isoformat()


def _summary_made(team_id: Any, at: datetime) -> bool:
    """Whether the team's summary of this instant's day was made (its rows; on the fire-time index)."""
    return CoachPush.objects.filter(fire_at=at, team_id=team_id, kind=kinds.SUMMARY.code).exists()


def _day_trainings(team: Team, morning: datetime) -> list[Training]:
    """The team's trainings not cancelled from `morning` to the end of that day in the team's zone."""
    zone = ZoneInfo(team.time_zone) if is_time_zone(team.time_zone) else ZoneInfo("UTC")
    day = morning.astimezone(zone).date()
    midnight = datetime.combine(day + timedelta(days=1), time()).replace(tzinfo=zone)
    return list(
        Training.objects.select_related("team").filter(
            team=team, cancelled=False, start__gte=morning, start__lt=midnight
        )
    )


def coaches_tell(
    delivery: Delivery,
    training: Training,
    rule: ReminderRule,
    coaches: list[Coach],
    render: Callable[[Coach], Rendered | None],
    key: str,
    owing: int,
    expires_at: datetime,
    player: Player | None = None,
) -> Told:
    """One unsaved message per coach (rendered in their language and zone, held through their quiet hours),
    or the outcome that tells nobody."""
    if not coaches:
        return Told(delivery, training, rule, RunOutcome.NO_COACH, [])
    pushes = []
    for coach in coaches:
        rendered = render(coach)
        if rendered is None:
            return Told(delivery, training, rule, RunOutcome.NOBODY_LEFT, [])
        status, release_at, reason = (
            (CoachPushStatus.PENDING, None, "")
            if rule.critical_at(None)  # a coaches' kind is timed by the team: critical is "all" or none
            else quiet_status(coach, training, delivery.fire_at, expires_at)
        )
        pushes.append(
            CoachPush(
                key=f"{key}.c{coach.pk}",
                occurrence_key=delivery.idempotency_key,
                coach=coach,
                team_id=training.team_id,
                training=training,
                rule=rule,
                player=player,
                kind=rule.kind,
                language=rendered.language,
                title=rendered.title,
                body=rendered.body,
                owing=owing,
                fire_at=delivery.fire_at,
                expires_at=expires_at,
                status=CoachPushStatus(str(status)),
                release_at=release_at,
                status_reason=reason,
            )
        )
    return Told(delivery, training, rule, RunOutcome.SENT, pushes)


_RUN_FIELDS = ["occurrence_id", "training", "rule", "fire_at", "outcome", "recipients", "attempts", "ran_at"]


def told_record_and_publish(told: Sequence[Told]) -> dict[int, TransportError]:
    """Record the messages (a key already there is left as it is: a redelivery, or the day's summary
    already made) and every occurrence's run in one transaction, schedule the held ones' releases, then
    publish what is pending."""
    keys = [p.key for t in told for p in t.pushes]
    now = timezone.now()
    with transaction.atomic():
        CoachPush.objects.bulk_create(
            sorted((p for t in told for p in t.pushes), key=lambda p: p.key), ignore_conflicts=True
        )
        if told:
            ReminderRun.objects.bulk_create(
                sorted((t.run(now) for t in told), key=lambda r: r.occurrence_key),
                update_conflicts=True,
                unique_fields=["occurrence_key"],
                update_fields=_RUN_FIELDS,
            )
        stored = list(CoachPush.objects.filter(key__in=keys).select_related("rule").order_by("pk"))
        _releases_schedule([p for p in stored if p.status == CoachPushStatus.HELD and p.release_at])
    by_occurrence = {t.delivery.idempotency_key: t.delivery for t in told}
    return coach_pushes_publish(
        [p for p in stored if p.status == CoachPushStatus.PENDING], deliveries=by_occurrence
    )


def coach_pushes_publish(
    pushes: Sequence[CoachPush], *, deliveries: dict[str, Delivery]
) -> dict[int, TransportError]:
    """Publish these pending messages in one AMQP transaction and mark the ones the broker took sent;
    a TransportError per occurrence with one it refused."""
    if not pushes:
        return {}
    messages = [
        QueuedPush(
            idempotency_key=push.key,
            job_key=deliveries[push.occurrence_key].job_key,
            fire_at=push.fire_at,
            attempt=deliveries[push.occurrence_key].attempt,
            target=settings.TRAININGS_PUSH_QUEUE,
            document=push.message(),
        )
        for push in pushes
    ]
    refused = push_queue_publisher().start(messages).wait()
    coach_pushes_mark_sent(CoachPush.objects.filter(pk__in=[p.pk for p in pushes if p.key not in refused]))
    errors: dict[int, TransportError] = {}
    for push in pushes:
        if push.key in refused:
            delivery = deliveries[push.occurrence_key]
            errors[delivery.occurrence_id] = TransportError(
                f"coach's digest not published: {refused[push.key]}"
            )
    return errors


def _releases_schedule(held: Sequence[CoachPush]) -> None:
    """One engine job per held message, at its release (a job already made by an earlier attempt stays)."""
    if not held:
        return
    keys = {f"{KEY_PREFIX}release-{push.pk}": push for push in held}
    taken = set(Job.objects.filter(key__in=list(keys)).values_list("key", flat=True))
    specs = [
        JobSpec(
            key=key,
            schedules=[push.release_at],
            callback=Callback(
                type=CallbackType.HANDLER, target=COACH_RELEASE_HANDLER, payload={"push": push.pk}
            ),
            priority=settings.TRAININGS_REMINDER_PRIORITY,
            deadline_seconds=settings.TRAININGS_REMINDER_DEADLINE_SECONDS,
        )
        for key, push in keys.items()
        if key not in taken and push.release_at is not None
    ]
    jobs_insert(specs=specs)
    scan_kick_on_commit(min((spec.schedules[0] for spec in specs), default=None))


def coach_release(*, delivery: Delivery) -> str:
    """The coach's quiet hours are over: decide the held message again (who owes what now) and publish it,
    or skip it with the reason. Returns its status."""
    payload = delivery.payload if isinstance(delivery.payload, dict) else {}
    push_id = payload.get("push")
    if not isinstance(push_id, int):
        return ""
    now = max(timezone.now(), delivery.fire_at)
    with transaction.atomic():
        push = (
            CoachPush.objects.select_for_update(of=("self",))
            .select_related("coach", "training__team", "rule", "player")
            .filter(pk=push_id, status=CoachPushStatus.HELD)
            .first()
        )
        if push is None:
            return ""
        training, rule = push.training, push.rule
        rendered: Rendered | None = None
        if training.cancelled:
            reason = "training cancelled while held"
        elif rule is None or not rule.active:
            reason = "rule removed or deactivated while held"
        elif push.expires_at is not None and now >= push.expires_at:
            reason = f"held until {push.release_at:%Y-%m-%d %H:%M} UTC, of no use after the start"
        else:
            rendered, owing = _again(push, rule, now)
            reason = "nobody owes anything any more" if rendered is None else push.status_reason
        if rendered is None:
            coach_push_release(push, status=CoachPushStatus.SKIPPED, reason=reason)
            return CoachPushStatus.SKIPPED
        coach_push_release(push, status=CoachPushStatus.PENDING, reason=reason, title=rendered.title,
                           body=rendered.body, language=rendered.language, owing=owing)  # fmt: skip
        push.refresh_from_db()
    errors = coach_pushes_publish([push], deliveries={push.occurrence_key: delivery})
    if errors:
        raise next(iter(errors.values()))
    return CoachPushStatus.PENDING


def _again(push: CoachPush, rule: ReminderRule, now: datetime) -> tuple[Rendered | None, int]:
    """The held message's text as it would be now, and how many owe; None when it has nothing to say."""
    templates = list(rule.templates.all())
    training = push.training
    if push.kind == kinds.DECLINED.code:
        if push.player is None:
            return None, 0
        declined = Invitation.objects.filter(
            training=training, player=push.player, status=InvitationStatus.DENIED
        ).exists()
        if not declined:
            return None, 0
        return decline_render(templates=templates, coach=push.coach, training=training,
                              player=push.player.name, before=training.start - now), 1  # fmt: skip
    if push.kind == kinds.SUMMARY.code:
        subject = list(trainings_owed(_day_trainings(training.team, push.fire_at)).values())
    else:
        subject = [trainings_owed([training])[training.pk]]
    rendered = digest_render(templates=templates, coach=push.coach, trainings=subject)
    return rendered, len({player for item in subject for player in item.players})
