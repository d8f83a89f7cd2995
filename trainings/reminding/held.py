"""Pushes held through a player's quiet hours: the decision at fire time, the release jobs, the release,
and the hourly check that nothing stays held past its release.

A held push always has a release in its future: `QuietHours.release_at` (trainings/quiet.py) is the
end of the continuous window holding its fire time, and a push that fires while an earlier push of its
training is still held for the player waits behind that one (fire order for one player and training).
The release (`held_pushes_release`) decides each push again against the training as it is then. Should a
push still be held past its release plus TRAININGS_HELD_GRACE_SECONDS (a bug, or a release job lost), the
hourly check releases or skips it with the reason and counts it (`trainings_held_pushes_overdue_total`,
alert `HeldPushesOverdue`). docs/quiet-hours.md has the rules.
"""

from __future__ import annotations

import collections
import logging
import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from delivery import api as delivery_api
from reminders.api import Callback, Delivery, JobSpec, job_upsert, jobs_insert, scan_kick_on_commit
from reminders.models import CallbackType, Job, Occurrence, OccurrenceStatus
from trainings.models import (
    Invitation,
    Push,
    PushStatus,
    ReminderRule,
    ReminderTemplate,
    Training,
)
from trainings.planning import kinds
from trainings.planning.offsets import is_time_zone
from trainings.reminding.publishing import pushes_publish
from trainings.reminding.quiet import quiet_hours_for
from trainings.reminding.recipients import reminder_addressees
from trainings.reminding.rendering import Addressee, notice_render, offset_at, push_render
from trainings.transitions import held_push_decide, held_pushes_save

logger = logging.getLogger(__name__)


def push_expiry(*, training: Training, kind: str) -> datetime:
    """When a reminder of this kind is no use any more: its window closes (trainings/planning/kinds.py)."""
    return kinds.of(kind).closes(training)


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


def held_releases(*, trainings: Iterable[object]) -> dict[object, dict[tuple[int, int | None], datetime]]:
    """The latest release of each recipient's held pushes, by training then (player, guardian) (one
    query)."""
    rows = (
        Push.objects.filter(training_id__in=list(trainings), status=PushStatus.HELD)
        .values_list("training_id", "player_id", "guardian_id")
        .annotate(until=Max("release_at"))
    )
    found: dict[object, dict[tuple[int, int | None], datetime]] = {}
    for training_id, player_id, guardian_id, until in rows:
        if until is not None:
            found.setdefault(training_id, {})[player_id, guardian_id] = until
    return found


QUIET_RELEASE_HANDLER = "trainings.quiet_release"


# Not `training-<uuid>-...`: that prefix names a training's reminder jobs (one per rule).
def quiet_release_key(*, training_id: object, rule: ReminderRule | None) -> str:
    return f"trainings-quiet-release-{training_id}-{rule.slug if rule is not None else 'moved'}"


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
    *, training_id: uuid.UUID, at: datetime, delivery: Delivery | None = None
) -> collections.Counter[str]:
    """Publish the training's pushes held until `at` (or now, if later) or earlier, every rule's, in fire
    order, each decided again against the training as it is then. Returns how many were released,
    withdrawn and skipped.

    1. Under the rows' locks: a push for a cancelled training (but its "cancelled" notice: withdrawn when the
       training is restored), a removed or deactivated rule, a player
       the rule no longer chases (answered, declined overnight), a person it no longer reminds for the
       player (the team's `reminds` or the guardianship changed), or a training moved by at least
       TRAININGS_MOVE_REPEAT_MINUTES (its reminders start again at the new times) is withdrawn; one whose
       use is over by now (the training may have moved earlier while it was held) is skipped with the
       reason. The others get their text rendered again (the start as it is now, the time left now) and
       their expiry recomputed.
    2. After commit, the released pushes are published in one AMQP transaction (`pushes_publish`).
    """
    now = max(timezone.now(), at)
    counts: collections.Counter[str] = collections.Counter()
    with transaction.atomic():
        training = Training.objects.select_related("team").filter(pk=training_id).first()
        if training is None:
            return counts
        held = list(
            Push.objects.select_for_update(of=("self",))
            .filter(training=training, status=PushStatus.HELD, release_at__lte=now)
            .select_related("player", "guardian", "rule")
            .order_by("fire_at", "pk")
        )
        repeat = timedelta(minutes=settings.TRAININGS_MOVE_REPEAT_MINUTES)
        chased: dict[int, set[int]] = {}
        addressed: dict[int, set[tuple[int, int | None]]] = {}  # (player, guardian) the rule reminds now
        templates: dict[int, list[ReminderTemplate]] = {}
        left_out: dict[str, set[int]] = {}  # per notice kind: invited players its audience leaves out
        for push in held:
            rule = push.rule
            kind = kinds.of(push.kind)
            if kind is kinds.CANCELLED and not training.cancelled:
                _settle(push, PushStatus.WITHDRAWN, "training restored while held")
            elif training.cancelled and kind is not kinds.CANCELLED:
                _settle(push, PushStatus.WITHDRAWN, "training cancelled while held")
            elif not kind.rule:  # a notice (the training moved): no rule to ask again, its audience only
                if kind.code not in left_out:
                    invited = Invitation.objects.filter(training=training)
                    left_out[kind.code] = set(invited.values_list("player_id", flat=True)) - set(
                        invited.filter(kind.audience).values_list("player_id", flat=True)
                    )
                _settle(push, *_decided(push, training, kind.closes(training), now, left_out[kind.code]))
            elif rule is None or not rule.active:
                _settle(push, PushStatus.WITHDRAWN, "rule removed or deactivated while held")
            else:
                if rule.pk not in chased:
                    addressed[rule.pk] = {
                        (person.pk, person.guardian)
                        for person in reminder_addressees(training=training, rule=rule)
                    }
                    chased[rule.pk] = {player for player, _ in addressed[rule.pk]}
                    templates[rule.pk] = list(rule.templates.all())
                gone = set() if push.player_id in chased[rule.pk] else {push.player_id}
                expires_at = push_expiry(training=training, kind=rule.kind)
                if push.expires_at and abs(expires_at - push.expires_at) >= repeat:
                    # A large move: the rule reminds again at the new times (trainings.reminding.firing,
                    # _firing).
                    _settle(push, PushStatus.WITHDRAWN, "the training moved a long way while held")
                elif not gone and (push.player_id, push.guardian_id) not in addressed[rule.pk]:
                    # The team's setting (player, guardians, both) or the guardianship changed meanwhile.
                    _settle(push, PushStatus.WITHDRAWN, _NOT_ADDRESSED[push.guardian_id is None])
                else:
                    _settle(push, *_decided(push, training, expires_at, now, gone))
            if push.status == PushStatus.PENDING:
                rendered = (
                    notice_render(kind=kind, training=training, player=push.guardian or push.player)
                    if not kind.rule or rule is None
                    else push_render(
                        templates=templates[rule.pk],
                        training=training,
                        player=push.guardian or push.player,  # the recipient's language and zone
                        offset=offset_at(training=training, kind=rule.kind, now=now),
                    )
                )
                push.language, push.title, push.body = rendered.language, rendered.title, rendered.body
            counts[_COUNTED[PushStatus(push.status)]] += 1
        held_pushes_save(held, fields=["expires_at", "language", "title", "body"])
    keys = list(dict.fromkeys(p.occurrence_key for p in held if p.status == PushStatus.PENDING))
    if keys:
        by = delivery or Delivery(0, "", "trainings-held-check", now, 1, "", None)
        errors = pushes_publish(
            deliveries=[
                Delivery(by.occurrence_id, key, by.job_key, by.fire_at, by.attempt, "", None) for key in keys
            ]
        )
        if errors:
            raise next(iter(errors.values()))
    return counts


_COUNTED = {PushStatus.PENDING: "released", PushStatus.WITHDRAWN: "withdrawn", PushStatus.SKIPPED: "skipped"}


_NOT_ADDRESSED = {
    True: "the team reminds the player's guardians instead now",
    False: "no longer reminded as this player's guardian (team setting or guardianship changed)",
}


def _decided(
    push: Push, training: Training, expires_at: datetime, now: datetime, gone: set[int]
) -> tuple[PushStatus, str]:
    """Withdrawn for a player no longer concerned, skipped when of no use any more, else released."""
    push.expires_at = expires_at
    if push.player_id in gone:
        return PushStatus.WITHDRAWN, "answered while held"
    if now >= expires_at:
        person = push.guardian or push.player
        zone = ZoneInfo(person.time_zone) if is_time_zone(person.time_zone) else training.zone
        release = f"{push.release_at.astimezone(zone):%Y-%m-%d %H:%M}" if push.release_at else "?"
        return PushStatus.SKIPPED, (
            f"held until {release} {zone.key}, of no use after {expires_at.astimezone(zone):%Y-%m-%d %H:%M}"
        )
    return PushStatus.PENDING, push.status_reason  # the reason it was held stays on record


def _settle(push: Push, status: PushStatus, reason: str) -> None:
    held_push_decide(push, status=status, reason=reason)


def held_pushes_overdue_check(*, now: datetime | None = None) -> collections.Counter[str]:
    """Release (or skip, or withdraw, with the reason) every push still held past its release plus the
    grace, training by training, and count what was done: the invariant a held push's release keeps."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.TRAININGS_HELD_GRACE_SECONDS)
    overdue = Push.objects.filter(status=PushStatus.HELD, release_at__lt=cutoff)
    counts: collections.Counter[str] = collections.Counter()
    for training_id in overdue.values_list("training_id", flat=True).distinct():
        try:
            counts.update(held_pushes_release(training_id=training_id, at=now))
        except Exception:  # one training's rows must not stop the hourly check for the others
            logger.exception("held pushes of training %s not checked", training_id)
    if counts:
        logger.warning("pushes held past their release plus the grace: %s", dict(counts))
        delivery_api.held_pushes_overdue(counts)
    return counts
