"""Pushes that go out later than their reminder: held through a player's quiet hours, and "moved" notices.

Each is an engine job of its own (keys `trainings-quiet-release-…`, `trainings-moved-notice-…`), so it is
as durable as a reminder and runs through the same handler path.
"""

from __future__ import annotations

import collections
import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from reminders.kick import scan_kick_on_commit
from reminders.models import CallbackType, Job, Occurrence, OccurrenceStatus
from reminders.services import Callback, JobSpec, job_upsert, jobs_insert
from reminders.transports import Delivery
from trainings.models import (
    MOVED,
    Invitation,
    InvitationStatus,
    Player,
    Push,
    PushStatus,
    ReminderRule,
    ReminderTemplate,
    Training,
)
from trainings.offsets import is_time_zone
from trainings.publishing import pushes_publish, pushes_record
from trainings.push.quiet import quiet_hours_for
from trainings.rendering import Addressee, PushRow, moved_render, offset_at, push_for, push_render
from trainings.selectors import reminder_recipients


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
    """One "training moved" push, with the new local time, to each player a reminder of this training
    already reached before the move (and who has not declined this training). Returns how many.

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
        .exclude(kind=MOVED)
        .values("player_id")
    )
    declined = Invitation.objects.filter(training=training, status=InvitationStatus.DENIED)
    players = list(
        Player.objects.filter(pk__in=reminded)
        .filter(invitations__training=training, memberships__team=training.team, memberships__active=True)
        .exclude(pk__in=declined.values("player_id"))
        .distinct()
        .order_by("pk")
    )
    with transaction.atomic():
        Push.objects.filter(
            training=training, kind=MOVED, status=PushStatus.HELD, player__in=[p.pk for p in players]
        ).exclude(occurrence_key=delivery.idempotency_key).update(
            status=PushStatus.WITHDRAWN, status_reason="replaced by the notice of a later move"
        )
        pushes = _moved_pushes(delivery, training, players)
        pushes_record(sorted(pushes, key=lambda p: p.key))
        quiet_releases_schedule(
            (training, None, p.release_at) for p in pushes if p.status == PushStatus.HELD and p.release_at
        )
    errors = pushes_publish(deliveries=[delivery])
    if errors:
        raise next(iter(errors.values()))
    return len(pushes)


def _moved_pushes(delivery: Delivery, training: Training, players: list[Player]) -> list[PushRow]:
    held_until = held_releases(trainings=[training.pk]).get(training.pk, {})
    pushes = []
    for player in players:
        status, release_at, reason = quiet_status(
            player, training, delivery.fire_at, training.start, held_until=held_until.get(player.pk)
        )
        if status == PushStatus.SKIPPED:  # the window ends after the new start: this one goes through
            status, release_at = PushStatus.PENDING, None
            reason = f"sent in quiet hours: the training now starts before they end ({reason})"
        pushes.append(
            push_for(
                delivery,
                training=training,
                player=player,
                rendered=moved_render(training=training, player=player),
                kind=MOVED,
                expires_at=training.start,
                status=status,
                release_at=release_at,
                status_reason=reason,
            )
        )
    return pushes


def _instant(text: object) -> datetime | None:
    try:
        instant = datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return instant if instant.tzinfo is not None else None


# A push that fires while an earlier push of its training is still held, and whose release is due
# already (its job may be running now), is held until just after: a release instant of its own, so it
# goes with or after the earlier one, never before.
_AFTER_DUE_RELEASE = timedelta(seconds=1)


def quiet_status(
    player: Addressee,
    training: Training,
    fire_at: datetime,
    expires_at: datetime,
    *,
    held_until: datetime | None = None,
) -> tuple[PushStatus, datetime | None, str]:
    """PENDING; or HELD until the player's quiet hours end; or SKIPPED when they end too late to help.

    `held_until`: the latest release of the player's pushes of this training still held. A push never
    overtakes one fired before it: it is held at least until then (fire order for one player and training).
    """
    zone = ZoneInfo(player.time_zone) if is_time_zone(player.time_zone) else training.zone
    quiet = quiet_hours_for(player=player, team=training.team, zone=zone)
    release_at = quiet.release_at(fire_at) if quiet else None
    reason = ""
    if release_at is not None:
        reason = f"quiet hours until {release_at.astimezone(zone):%Y-%m-%d %H:%M} {zone.key}"
    if held_until is not None:
        after = held_until if held_until > fire_at else fire_at + _AFTER_DUE_RELEASE
        if release_at is None or after > release_at:
            release_at = after
            reason = f"behind a push held until {after.astimezone(zone):%Y-%m-%d %H:%M:%S} {zone.key}"
    if release_at is None:
        return PushStatus.PENDING, None, ""
    if release_at >= expires_at:
        if quiet is not None and reason.startswith("quiet"):
            why = (
                f"quiet hours {quiet.start:%H:%M}-{quiet.end:%H:%M} {zone.key} end at "
                f"{release_at.astimezone(zone):%Y-%m-%d %H:%M}, after the push is of use"
            )
        else:
            why = f"{reason}, after the push is of use"
        return PushStatus.SKIPPED, None, why
    return PushStatus.HELD, release_at, reason


def held_releases(*, trainings: Iterable[object]) -> dict[object, dict[int, datetime]]:
    """The latest release of each player's held pushes, by training then player (one query)."""
    rows = (
        Push.objects.filter(training_id__in=list(trainings), status=PushStatus.HELD)
        .values_list("training_id", "player_id")
        .annotate(until=Max("release_at"))
    )
    found: dict[object, dict[int, datetime]] = {}
    for training_id, player_id, until in rows:
        if until is not None:
            found.setdefault(training_id, {})[player_id] = until
    return found


QUIET_RELEASE_HANDLER = "trainings.quiet_release"


# Not `training-<uuid>-...`: that prefix names a training's reminder jobs (one per rule).
def quiet_release_key(*, training_id: object, rule: ReminderRule | None) -> str:
    return f"trainings-quiet-release-{training_id}-{rule.slug if rule is not None else 'moved'}"


def moved_notice_key(*, training_id: object) -> str:
    return f"trainings-moved-notice-{training_id}"


def quiet_releases_schedule(held: Iterable[tuple[Training, ReminderRule | None, datetime]]) -> None:
    """One engine job per (training, rule) with pushes held until these instants (not yet saved), firing
    at each distinct release instant (the instants already pending stay; job_upsert
    keeps what is still wanted). Held "training moved" notices have no rule: their job is `…-moved`.

    Set-based for a due minute at night: one query for the pending instants, one for the keys that exist;
    the new jobs are inserted together (`jobs_insert`), the existing ones replaced by `job_upsert`. A job
    another worker creates meanwhile makes the insert fail and the whole chunk is retried, which then
    finds it.
    """
    wanted: dict[str, tuple[Training, ReminderRule | None, set[datetime]]] = {}
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
                payload={"training": str(training.pk), "rule": rule.pk if rule is not None else None},
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
    """Quiet hours are over: release the training's held pushes now due (`held_pushes_release`).
    Returns how many were published."""
    payload = delivery.payload if isinstance(delivery.payload, dict) else {}
    try:
        training_id = uuid.UUID(str(payload.get("training")))
    except ValueError:
        return 0
    return held_pushes_release(training_id=training_id, at=delivery.fire_at, delivery=delivery)["released"]


def held_pushes_release(
    *, training_id: object, at: datetime, delivery: Delivery | None = None
) -> collections.Counter[str]:
    """Publish the training's pushes held until `at` (or now, if later) or earlier, every rule's, in fire
    order, each decided again against the training as it is then. Returns how many were released,
    withdrawn and skipped.

    1. Under the rows' locks: a push for a cancelled training, a removed or deactivated rule, or a player
       the rule no longer chases (answered, declined overnight) is withdrawn; one whose use is over by now
       (the training may have moved earlier while it was held) is skipped with the reason. The others get
       their text rendered again (the start as it is now, the time left now) and their expiry recomputed.
    2. After commit, the released pushes are published in one AMQP transaction (`pushes_publish`).
    """
    from trainings.firing import push_expiry  # firing imports this module for quiet_status

    now = max(timezone.now(), at)
    counts: collections.Counter[str] = collections.Counter()
    with transaction.atomic():
        training = Training.objects.select_related("team").filter(pk=training_id).first()
        if training is None:
            return counts
        held = list(
            Push.objects.select_for_update(of=("self",))
            .filter(training=training, status=PushStatus.HELD, release_at__lte=now)
            .select_related("player", "rule")
            .order_by("fire_at", "pk")
        )
        chased: dict[int, set[int]] = {}
        templates: dict[int, list[ReminderTemplate]] = {}
        declined = set(
            Invitation.objects.filter(training=training, status=InvitationStatus.DENIED).values_list(
                "player_id", flat=True
            )
        )
        for push in held:
            rule = push.rule
            if training.cancelled:
                _settle(push, PushStatus.WITHDRAWN, "training cancelled while held")
            elif push.kind == MOVED:
                _settle(push, *_decided(push, training.start, now, declined))
            elif rule is None or not rule.active:
                _settle(push, PushStatus.WITHDRAWN, "rule removed or deactivated while held")
            else:
                if rule.pk not in chased:
                    chased[rule.pk] = set(
                        reminder_recipients(training=training, rule=rule).values_list("pk", flat=True)
                    )
                    templates[rule.pk] = list(rule.templates.all())
                gone = set() if push.player_id in chased[rule.pk] else {push.player_id}
                _settle(push, *_decided(push, push_expiry(training=training, kind=rule.kind), now, gone))
            if push.status == PushStatus.PENDING:
                rendered = (
                    moved_render(training=training, player=push.player)
                    if push.kind == MOVED or rule is None
                    else push_render(
                        templates=templates[rule.pk],
                        training=training,
                        player=push.player,
                        offset=offset_at(training=training, kind=rule.kind, now=now),
                    )
                )
                push.language, push.title, push.body = rendered.language, rendered.title, rendered.body
            counts[_COUNTED[push.status]] += 1
        Push.objects.bulk_update(
            held, ["status", "status_reason", "expires_at", "language", "title", "body"], batch_size=500
        )
    keys = list(dict.fromkeys(p.occurrence_key for p in held if p.status == PushStatus.PENDING))
    if keys:
        at = delivery or Delivery(0, "", "trainings-held-check", now, 1, "", None)
        errors = pushes_publish(
            deliveries=[
                Delivery(at.occurrence_id, key, at.job_key, at.fire_at, at.attempt, "", None) for key in keys
            ]
        )
        if errors:
            raise next(iter(errors.values()))
    return counts


_COUNTED = {PushStatus.PENDING: "released", PushStatus.WITHDRAWN: "withdrawn", PushStatus.SKIPPED: "skipped"}


def _decided(push: Push, expires_at: datetime, now: datetime, gone: set[int]) -> tuple[PushStatus, str]:
    """Withdrawn for a player no longer concerned, skipped when of no use any more, else released."""
    push.expires_at = expires_at
    if push.player_id in gone:
        return PushStatus.WITHDRAWN, "answered while held"
    if now >= expires_at:
        release = push.release_at.isoformat(timespec="minutes") if push.release_at else "?"
        until = expires_at.isoformat(timespec="minutes")
        return PushStatus.SKIPPED, f"held until {release}, of no use after {until}"
    return PushStatus.PENDING, push.status_reason  # the reason it was held stays on record


def _settle(push: Push, status: PushStatus, reason: str) -> None:
    push.status, push.status_reason = status, reason[:200]
