"""Pushes that go out later than their reminder: held through a player's quiet hours, and "moved" notices.

Each is an engine job of its own (keys `trainings-quiet-release-…`, `trainings-moved-notice-…`), so it is
as durable as a reminder and runs through the same handler path.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from reminders.kick import scan_kick_on_commit
from reminders.models import CallbackType, Job, Occurrence, OccurrenceStatus
from reminders.services import Callback, JobSpec, job_upsert, jobs_insert
from reminders.transports import Delivery
from trainings import kinds
from trainings.models import (
    InvitationStatus,
    Player,
    Push,
    PushStatus,
    ReminderRule,
    Training,
)
from trainings.offsets import is_time_zone
from trainings.publishing import pushes_publish, pushes_record
from trainings.push.quiet import quiet_hours_for
from trainings.rendering import Addressee, moved_render, push_for
from trainings.scheduling import reminder_payload_ids
from trainings.selectors import reminder_recipients
from trainings.transitions import pushes_release, pushes_withdraw


def training_moved_notice_schedule(*, training: Training) -> None:
    """In the move's transaction: an engine job that, right after commit, tells the players already
    reminded that the training moved (a newer move replaces a notice not yet sent)."""
    job_upsert(
        key=moved_notice_key(training_id=training.pk),
        schedules=[timezone.now()],
        callback=Callback(
            type=CallbackType.HANDLER,
            target=MOVED_NOTICE_HANDLER,
            payload={"training": str(training.pk), "start": training.start.isoformat()},
        ),
        priority=settings.TRAININGS_REMINDER_PRIORITY,
    )


MOVED_NOTICE_HANDLER = "trainings.moved_notice"


def training_moved_notify(*, delivery: Delivery) -> int:
    """One "training moved" push, with the new local time, to each player a reminder of this training
    already reached before the move (and who has not declined it). Returns how many were published."""
    payload = delivery.payload if isinstance(delivery.payload, dict) else {}
    try:
        training_id = uuid.UUID(str(payload.get("training")))
    except ValueError:
        return 0
    training = Training.objects.select_related("team").filter(pk=training_id).first()
    if training is None or training.cancelled or training.start.isoformat() != payload.get("start"):
        return 0  # gone, cancelled, or moved again: that move has its own notice
    reminded = (
        Push.objects.filter(training=training, status=PushStatus.SENT, sent_at__lte=delivery.fire_at)
        .exclude(kind=kinds.MOVED.code)
        .values_list("player_id", flat=True)
    )
    players = (
        Player.objects.filter(pk__in=reminded)
        .filter(invitations__training=training, memberships__team=training.team, memberships__active=True)
        .exclude(invitations__training=training, invitations__status=InvitationStatus.DENIED)
        .distinct()
    )
    pushes = []
    for player in players:
        rendered = moved_render(training=training, player=player)
        pushes.append(
            push_for(
                delivery,
                training=training,
                player=player,
                rendered=rendered,
                kind=kinds.MOVED.code,
                expires_at=kinds.MOVED.closes(training),
            )
        )
    pushes_record(sorted(pushes, key=lambda p: p.key))
    errors = pushes_publish(deliveries=[delivery])
    if errors:
        raise next(iter(errors.values()))
    return len(pushes)


def quiet_status(
    player: Addressee, training: Training, fire_at: datetime, expires_at: datetime
) -> tuple[PushStatus, datetime | None, str]:
    """PENDING; or HELD until the player's quiet hours end; or SKIPPED when they end too late to help."""
    zone = ZoneInfo(player.time_zone) if is_time_zone(player.time_zone) else training.zone
    quiet = quiet_hours_for(player=player, team=training.team, zone=zone)
    release_at = quiet.release_at(fire_at) if quiet else None
    if release_at is None:
        return PushStatus.PENDING, None, ""
    if release_at >= expires_at:
        return (
            PushStatus.SKIPPED,
            None,
            (
                f"quiet hours {quiet.start:%H:%M}-{quiet.end:%H:%M} {zone.key} end at "  # type: ignore[union-attr]
                f"{release_at.astimezone(zone):%Y-%m-%d %H:%M}, after the push is of use"
            ),
        )
    return (
        PushStatus.HELD,
        release_at,
        f"quiet hours until {release_at.astimezone(zone):%Y-%m-%d %H:%M} {zone.key}",
    )


QUIET_RELEASE_HANDLER = "trainings.quiet_release"


# Not `training-<uuid>-...`: that prefix names a training's reminder jobs (one per rule).
def quiet_release_key(*, training_id: object, rule: ReminderRule) -> str:
    return f"trainings-quiet-release-{training_id}-{rule.slug}"


def moved_notice_key(*, training_id: object) -> str:
    return f"trainings-moved-notice-{training_id}"


def quiet_releases_schedule(held: Iterable[tuple[Training, ReminderRule, datetime]]) -> None:
    """One engine job per (training, rule) with pushes held until these instants (not yet saved), firing
    at each distinct release instant (the instants already pending stay; job_upsert
    keeps what is still wanted).

    Set-based for a due minute at night: one query for the pending instants, one for the keys that exist;
    the new jobs are inserted together (`jobs_insert`), the existing ones replaced by `job_upsert`. A job
    another worker creates meanwhile makes the insert fail and the whole chunk is retried, which then
    finds it.
    """
    wanted: dict[str, tuple[Training, ReminderRule, set[datetime]]] = {}
    for training, rule, release_at in held:
        key = quiet_release_key(training_id=training.pk, rule=rule)
        wanted.setdefault(key, (training, rule, set()))[2].add(release_at)
    if not wanted:
        return
    pending = Occurrence.objects.filter(job__key__in=list(wanted), status=OccurrenceStatus.SCHEDULED)
    for key, fire_at in pending.values_list("job__key", "fire_at"):
        wanted[key][2].add(fire_at)
    existing = set(Job.objects.filter(key__in=list(wanted)).values_list("key", flat=True))
    specs = []
    for key, (training, rule, instants) in wanted.items():
        spec = JobSpec(
            key=key,
            schedules=sorted(instants),
            callback=Callback(
                type=CallbackType.HANDLER,
                target=QUIET_RELEASE_HANDLER,
                payload={"training": str(training.pk), "rule": rule.pk},
            ),
            priority=settings.TRAININGS_REMINDER_PRIORITY,
            deadline_seconds=settings.TRAININGS_REMINDER_DEADLINE_SECONDS,
        )
        if key in existing:
            job_upsert(
                key=key,
                schedules=spec.schedules,
                callback=spec.callback,
                priority=spec.priority,
                deadline_seconds=spec.deadline_seconds,
            )
        else:
            specs.append(spec)
    jobs_insert(specs=specs)
    scan_kick_on_commit(min((min(spec.schedules) for spec in specs), default=None))


def quiet_release(*, delivery: Delivery) -> int:
    """Quiet hours are over: publish the held pushes now due, after asking again who is still pending
    (a player who answered overnight gets nothing: withdrawn). Returns how many were published."""
    ids = reminder_payload_ids(delivery.payload)
    training = Training.objects.select_related("team").filter(pk=ids[0]).first() if ids else None
    rule = ReminderRule.objects.filter(pk=ids[1]).first() if ids else None
    if training is None or rule is None:
        return 0
    now = timezone.now()
    with transaction.atomic():
        held = Push.objects.select_for_update().filter(
            training=training, rule=rule, status=PushStatus.HELD, release_at__lte=max(now, delivery.fire_at)
        )
        still = set(reminder_recipients(training=training, rule=rule).values_list("pk", flat=True))
        gone = [p.pk for p in held if p.player_id not in still or training.cancelled]
        pushes_withdraw(
            Push.objects.filter(pk__in=gone), source=PushStatus.HELD, reason="answered while held"
        )
        due = Push.objects.filter(
            training=training, rule=rule, status=PushStatus.HELD, release_at__lte=max(now, delivery.fire_at)
        )
        keys = list(due.values_list("occurrence_key", flat=True).distinct())
        pushes_release(due)
    errors = pushes_publish(
        deliveries=[
            Delivery(
                delivery.occurrence_id, key, delivery.job_key, delivery.fire_at, delivery.attempt, "", None
            )
            for key in keys
        ]
    )
    if errors:
        raise next(iter(errors.values()))
    return len(keys)
