"""Writes: trainings and their reminders, answers, invitation responses, rule changes, and firing.

Scheduling runs inside the training's own transaction: one engine job per (training, rule), found through
its `TrainingJob` row (never by its key), whose occurrences are replaced by `job_upsert` (kept when the
instant is still wanted, so their idempotency keys survive a move; cancelled when not; added when new). The
job's payload names the training and the rule only: who gets a push is decided when it fires
(`reminder_fire`).
"""

from __future__ import annotations

import logging
import secrets
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from reminders import metrics
from reminders.models import CallbackType, Job, Occurrence, OccurrenceStatus
from reminders.services import Callback, job_upsert, occurrences_cancel
from reminders.transports import Delivery, TransportError, get_transport
from trainings.models import (
    MOVED,
    Invitation,
    InvitationStatus,
    Phase,
    Player,
    Push,
    PushStatus,
    QuestionnaireAnswer,
    ReminderRule,
    ReminderRun,
    RuleKind,
    RunOutcome,
    Team,
    Training,
    TrainingJob,
)
from trainings.offsets import MAX_OFFSET, Offset, is_time_zone
from trainings.push.quiet import quiet_hours_for
from trainings.rendering import Rendered, moved_render, push_render
from trainings.selectors import active_member_ids, job_key, reminder_recipients

logger = logging.getLogger(__name__)

HANDLER_NAME = "trainings.reminder"


# --- Scheduling -----------------------------------------------------------------------------------------


def training_reminders_schedule(
    *, training: Training, rules: Iterable[ReminderRule] | None = None, now: datetime | None = None
) -> int:
    """Make each rule's job hold exactly the future instants it wants for this training.

    A cancelled training or an inactive rule wants none, so its pending occurrences are cancelled.
    Instants at or before `now` are not scheduled. Returns how many instants are now wanted.
    The training's jobs are the ones linked to it (`TrainingJob`); a new one is created under a key no
    other job holds, so a row someone else made under the usual key is never taken over.
    """
    now = now or timezone.now()
    wanted_by_rule: dict[ReminderRule, list[datetime]] = {}
    for rule in ReminderRule.objects.all() if rules is None else rules:
        wanted_by_rule[rule] = []
        if rule.active and not training.cancelled:
            wanted_by_rule[rule] = [instant for instant, _ in rule.instants_for(training) if instant > now]
    linked = dict(TrainingJob.objects.filter(training=training).values_list("rule_id", "job__key"))
    fresh = [rule for rule, wanted in wanted_by_rule.items() if wanted and rule.pk not in linked]
    taken = _keys_taken([job_key(training_id=training.pk, rule=rule) for rule in fresh])
    links = []
    for rule, wanted in wanted_by_rule.items():
        key = linked.get(rule.pk)
        if key is None and not wanted:
            continue  # nothing to schedule and nothing to cancel: no empty job row
        job, created = job_upsert(
            key=key or _key_free(job_key(training_id=training.pk, rule=rule), taken),
            schedules=wanted,
            callback=Callback(
                type=CallbackType.HANDLER,
                target=HANDLER_NAME,
                payload={"training": str(training.pk), "rule": rule.pk},
            ),
            priority=settings.TRAININGS_REMINDER_PRIORITY,
            deadline_seconds=settings.TRAININGS_REMINDER_DEADLINE_SECONDS,
        )
        if key is None:
            if not created:  # inserted by someone else since `_keys_taken`: roll back, never adopt it
                raise JobKeyTaken(job.key)
            links.append(TrainingJob(training=training, rule=rule, job=job))
    TrainingJob.objects.bulk_create(links)
    return sum(len(wanted) for wanted in wanted_by_rule.values())


class JobKeyTaken(Exception):
    """A new training job's key was inserted by someone else meanwhile; the caller's transaction must roll
    back (the API refuses that namespace, so only a concurrent admin or shell insert gets here)."""


def _keys_taken(keys: list[str]) -> set[str]:
    return set(Job.objects.filter(key__in=keys).values_list("key", flat=True)) if keys else set()


def _key_free(key: str, taken: set[str]) -> str:
    """`key`, or when a job this training does not own holds it (made before the namespace was reserved,
    or in the admin), `key` with a random suffix."""
    if key not in taken:
        return key
    logger.warning("job key %s is held by a job the trainings app does not own; using another", key)
    return f"{key}.{secrets.token_hex(4)}"


def _invitations_set(*, training: Training, players: Sequence[Player]) -> None:
    """Make the training's player list exactly `players`; kept players keep their response."""
    wanted = {player.pk for player in players}
    training.invitations.exclude(player_id__in=wanted).delete()
    existing = set(training.invitations.values_list("player_id", flat=True))
    Invitation.objects.bulk_create(
        [Invitation(training=training, player_id=pk) for pk in sorted(wanted - existing)],
        ignore_conflicts=True,
    )


def training_create(
    *,
    team: Team,
    title: str,
    start: datetime,
    end: datetime,
    time_zone: str,
    location: str = "",
    players: Sequence[Player] | None = None,
) -> Training:
    """Create a training, invite its players (default: the team's active members), schedule reminders."""
    with transaction.atomic():
        training = Training(
            team=team, title=title, start=start, end=end, time_zone=time_zone, location=location
        )
        training.full_clean()
        training.save()
        if players is None:
            players = list(Player.objects.filter(pk__in=active_member_ids(team)))
        _invitations_set(training=training, players=players)
        training_reminders_schedule(training=training)
    return training


_UNSET: Any = object()


def training_update(
    *,
    training: Training,
    team: Team = _UNSET,
    title: str = _UNSET,
    start: datetime = _UNSET,
    end: datetime = _UNSET,
    time_zone: str = _UNSET,
    location: str = _UNSET,
    cancelled: bool = _UNSET,
    players: Sequence[Player] = _UNSET,
) -> Training:
    """Change what is given (omitted arguments stay) and replace the pending reminders to match.

    The row is locked first, so a concurrent rule rescan cannot schedule from the old times after us.
    """
    changes = {
        "team": team,
        "title": title,
        "start": start,
        "end": end,
        "time_zone": time_zone,
        "location": location,
    }
    changes["cancelled"] = cancelled
    with transaction.atomic():
        training = Training.objects.select_for_update().get(pk=training.pk)
        moved_from = training.start
        for name, value in changes.items():
            if value is not _UNSET:
                setattr(training, name, value)
        training.full_clean()
        training.save()
        if players is not _UNSET:
            _invitations_set(training=training, players=players)
        training_reminders_schedule(training=training)
        if training.start != moved_from and not training.cancelled:
            training_moved_notice_schedule(training=training)  # players already reminded hear of it
    return training


def training_cancel(*, training: Training) -> Training:
    """Cancel the training: every pending reminder is cancelled, the row stays for the record."""
    return training_update(training=training, cancelled=True)


def training_delete(*, training: Training) -> int:
    """Delete the training and cancel every pending reminder in the same transaction. Returns how many."""
    with transaction.atomic():
        cancelled = occurrences_cancel(
            Occurrence.objects.filter(job__training_job__training=training), reason="training deleted"
        )
        # Its held pushes' releases and a pending "training moved" notice go with it (not counted: they
        # are not reminders of a rule).
        occurrences_cancel(
            Occurrence.objects.filter(
                Q(job__key__startswith=f"trainings-quiet-release-{training.pk}-")
                | Q(job__key=moved_notice_key(training_id=training.pk))
            ),
            reason="training deleted",
        )
        training.delete()
    return cancelled


# --- Players' responses ---------------------------------------------------------------------------------


def answer_record(
    *, training: Training, player: Player, phase: Phase, answers: Any, answered_at: datetime | None = None
) -> QuestionnaireAnswer:
    """Record (or replace) a player's questionnaire answer; later reminders for that phase skip them."""
    answer, _ = QuestionnaireAnswer.objects.update_or_create(
        training=training,
        player=player,
        phase=phase,
        defaults={"answers": answers, "answered_at": answered_at or timezone.now()},
    )
    return answer


def invitation_respond(
    *, invitation: Invitation, status: InvitationStatus, responded_at: datetime | None = None
) -> Invitation:
    """ACCEPTED or DENIED: later invitation reminders skip the player."""
    if status == InvitationStatus.PENDING:
        raise ValueError("a response is ACCEPTED or DENIED")
    invitation.status = status
    invitation.responded_at = responded_at or timezone.now()
    invitation.save(update_fields=["status", "responded_at"])
    return invitation


# --- Rule changes ---------------------------------------------------------------------------------------


def rule_reschedule_batch(
    *,
    rule_id: int,
    after: uuid.UUID | None = None,
    batch_size: int | None = None,
    now: datetime | None = None,
) -> uuid.UUID | None:
    """Reschedule one batch of the trainings a rule may still reach; returns the cursor for the next one.

    Reach: any training that has not ended more than the longest allowed offset ago (the rule's old offsets
    may have left pending occurrences that far out). The batch's rows are locked (ordered by id, so two
    rescans cannot deadlock), which serialises us with `training_update` on each of them.
    """
    now = now or timezone.now()
    size = batch_size or settings.TRAININGS_RESCHEDULE_BATCH
    rule = ReminderRule.objects.filter(pk=rule_id).first()
    if rule is None:
        return None
    with transaction.atomic():
        trainings = Training.objects.filter(end__gt=now - MAX_OFFSET).order_by("pk")
        if after is not None:
            trainings = trainings.filter(pk__gt=after)
        batch = list(trainings.select_for_update()[:size])
        for training in batch:
            training_reminders_schedule(training=training, rules=[rule], now=now)
    return batch[-1].pk if len(batch) == size else None


def rule_reschedule_on_commit(*, rule: ReminderRule) -> None:
    """After the rule's change commits, reschedule its trainings from a worker, batch after batch."""
    from trainings.tasks import rule_reschedule

    rule_id = rule.pk
    transaction.on_commit(lambda: rule_reschedule.delay(rule_id))


def rule_update(
    *, rule: ReminderRule, kind: str = _UNSET, offsets: list[str] = _UNSET, active: bool = _UNSET
) -> ReminderRule:
    """Change a rule; once committed, its future trainings are rescheduled in batches by a worker."""
    with transaction.atomic():
        rule = ReminderRule.objects.select_for_update().get(pk=rule.pk)
        for name, value in {"kind": kind, "offsets": offsets, "active": active}.items():
            if value is not _UNSET:
                setattr(rule, name, value)
        rule.full_clean()
        rule.save()
        rule_reschedule_on_commit(rule=rule)
    return rule


def rule_delete(*, rule: ReminderRule) -> int:
    """Delete a rule and cancel everything it still had pending. Returns how many occurrences."""
    with transaction.atomic():
        pending = Occurrence.objects.filter(job__training_job__rule=rule)
        cancelled = occurrences_cancel(pending, reason=f"rule {rule.slug} deleted")
        rule.delete()
    return cancelled


# --- Firing ---------------------------------------------------------------------------------------------


def reminders_fire(*, deliveries: Sequence[Delivery]) -> dict[int, TransportError]:
    """Run a chunk of occurrences: decide who is still pending, record their pushes, publish them.

    1. Re-read the trainings and rules (one query each); a cancelled training, an inactive rule, or an
       instant the rule no longer wants (the training moved while this occurrence was in flight) reaches
       nobody. Each occurrence's recipients are asked of the database and its texts rendered on their own,
       so one that fails (a bad template) is retried alone and the rest of the chunk goes on.
    2. In one transaction: one Push per remaining player, unique per (occurrence, player), so a redelivered
       occurrence finds them already there and never creates a second one; pending pushes of players who
       answered since an earlier attempt are withdrawn; one ReminderRun per occurrence.
    3. Publish every still-pending push of the chunk in one AMQP transaction, then mark them sent. An
       occurrence with a push the broker did not take gets a TransportError: the engine retries it and the
       retry publishes only what is not sent, with the same idempotency keys.
    Returns the errors keyed by occurrence id (the batch handler contract, reminders/handlers.py).
    """
    errors: dict[int, TransportError] = {}
    targets = _fire_targets(deliveries)
    firings: list[_Firing] = []
    for delivery in deliveries:
        try:
            firings.append(_firing(delivery, *targets(delivery)))
        except Exception as exc:  # this occurrence alone is retried; the others go on
            logger.exception("reminder %s could not be prepared", delivery.idempotency_key)
            errors[delivery.occurrence_id] = TransportError(f"{type(exc).__name__}: {exc}")
    if not firings:
        return errors
    now = timezone.now()
    with transaction.atomic():
        # Sorted, so two workers that meet on the same rows (a redelivery) take their locks in one order.
        pushes = sorted((p for f in firings for p in f.pushes), key=lambda p: p.key)
        Push.objects.bulk_create(pushes, ignore_conflicts=True)
        _pushes_withdraw(firings)
        ReminderRun.objects.bulk_create(
            sorted((f.run(now) for f in firings), key=lambda r: r.occurrence_key),
            update_conflicts=True,
            unique_fields=["occurrence_key"],
            update_fields=_RUN_FIELDS,
        )
        _quiet_releases_schedule(firings)
    errors.update(pushes_publish(deliveries=[f.delivery for f in firings]))
    return errors


def reminder_fire(*, delivery: Delivery) -> ReminderRun:
    """`reminders_fire` for one occurrence; raises its TransportError, returns its ReminderRun."""
    error = reminders_fire(deliveries=[delivery]).get(delivery.occurrence_id)
    if error is not None:
        raise error
    return ReminderRun.objects.get(occurrence_key=delivery.idempotency_key)


_RUN_FIELDS = ["occurrence_id", "training", "rule", "fire_at", "outcome", "recipients", "attempts", "ran_at"]


@dataclass
class _Firing:
    """What one occurrence comes to: its outcome, its recipients and their pushes (not yet saved)."""

    delivery: Delivery
    training: Training | None
    rule: ReminderRule | None
    outcome: RunOutcome
    recipients: list[Player] = field(default_factory=list)
    pushes: list[Push] = field(default_factory=list)

    def run(self, now: datetime) -> ReminderRun:
        return ReminderRun(
            occurrence_key=self.delivery.idempotency_key,
            occurrence_id=self.delivery.occurrence_id,
            training=self.training,
            rule=self.rule,
            fire_at=self.delivery.fire_at,
            outcome=self.outcome,
            recipients=len(self.recipients),
            attempts=self.delivery.attempt,
            ran_at=now,
        )


def _firing(delivery: Delivery, training: Training | None, rule: ReminderRule | None) -> _Firing:
    if training is None or rule is None:
        return _Firing(delivery, training, rule, RunOutcome.GONE)
    if training.cancelled:
        return _Firing(delivery, training, rule, RunOutcome.CANCELLED)
    if not rule.active:
        return _Firing(delivery, training, rule, RunOutcome.INACTIVE)
    offset = dict(rule.instants_for(training)).get(delivery.fire_at)
    if offset is None:
        return _Firing(delivery, training, rule, RunOutcome.STALE)
    expires_at = push_expiry(training=training, kind=rule.kind)
    recipients = list(reminder_recipients(training=training, rule=rule))
    reminded = _reminded_at_offset(delivery, training, rule, str(offset), expires_at)
    recipients = [player for player in recipients if player.pk not in reminded]
    if not recipients:
        return _Firing(delivery, training, rule, RunOutcome.NOBODY_LEFT)
    return _recipients_pushes(delivery, training, rule, recipients, offset)


def _recipients_pushes(
    delivery: Delivery, training: Training, rule: ReminderRule, recipients: list[Player], offset: Offset
) -> _Firing:
    """One unsaved Push per recipient, its text rendered in their language and zone."""
    templates = list(rule.templates.all())
    expires_at = push_expiry(training=training, kind=rule.kind)
    rendered_for: dict[tuple[str, str], Rendered] = {}  # players sharing language and zone share text
    pushes = []
    for player in recipients:
        audience = (player.language, player.time_zone)
        if audience not in rendered_for:
            rendered_for[audience] = push_render(
                templates=templates, training=training, player=player, offset=offset
            )
        rendered = rendered_for[audience]
        status, release_at, reason = _quiet_status(player, training, delivery.fire_at, expires_at)
        pushes.append(
            Push(
                key=f"{delivery.idempotency_key}.{player.pk}",
                occurrence_key=delivery.idempotency_key,
                occurrence_id=delivery.occurrence_id,
                training=training,
                player=player,
                rule=rule,
                kind=rule.kind,
                offset=str(offset),
                language=rendered.language,
                title=rendered.title,
                body=rendered.body,
                fire_at=delivery.fire_at,
                expires_at=expires_at,
                status=status,
                release_at=release_at,
                status_reason=reason,
            )
        )
    return _Firing(delivery, training, rule, RunOutcome.SENT, recipients, pushes)


def _reminded_at_offset(
    delivery: Delivery, training: Training, rule: ReminderRule, offset: str, expires_at: datetime
) -> set[int]:
    """Players this rule already reminded at this offset for this training, before it moved by less than
    TRAININGS_MOVE_REPEAT_MINUTES (their earlier push's expiry says where the training was then)."""
    limit = timedelta(minutes=settings.TRAININGS_MOVE_REPEAT_MINUTES)
    earlier = (
        Push.objects.filter(training=training, rule=rule, offset=offset)
        .exclude(occurrence_key=delivery.idempotency_key)
        .exclude(status__in=[PushStatus.WITHDRAWN, PushStatus.SKIPPED])
        .values_list("player_id", "expires_at")
    )
    return {player for player, then in earlier if then is None or abs(then - expires_at) < limit}


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
        .exclude(kind=MOVED)
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
            Push(
                key=f"{delivery.idempotency_key}.{player.pk}",
                occurrence_key=delivery.idempotency_key,
                occurrence_id=delivery.occurrence_id,
                training=training,
                player=player,
                kind=MOVED,
                language=rendered.language,
                title=rendered.title,
                body=rendered.body,
                fire_at=delivery.fire_at,
                expires_at=training.start,
            )
        )
    Push.objects.bulk_create(sorted(pushes, key=lambda p: p.key), ignore_conflicts=True)
    errors = pushes_publish(deliveries=[delivery])
    if errors:
        raise next(iter(errors.values()))
    return len(pushes)


def _quiet_status(
    player: Player, training: Training, fire_at: datetime, expires_at: datetime
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


def _quiet_releases_schedule(firings: Sequence[_Firing]) -> None:
    """One engine job per (training, rule) with held pushes, firing at each distinct release instant (the
    instants already pending stay; job_upsert keeps what is still wanted)."""
    wanted: dict[tuple[Training, ReminderRule], set[datetime]] = {}
    for firing in firings:
        for push in firing.pushes:
            if push.status == PushStatus.HELD and push.release_at and firing.training and firing.rule:
                wanted.setdefault((firing.training, firing.rule), set()).add(push.release_at)
    for (training, rule), instants in wanted.items():
        key = quiet_release_key(training_id=training.pk, rule=rule)
        pending = Occurrence.objects.filter(job__key=key, status=OccurrenceStatus.SCHEDULED)
        instants |= set(pending.values_list("fire_at", flat=True))
        job_upsert(
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


def quiet_release(*, delivery: Delivery) -> int:
    """Quiet hours are over: publish the held pushes now due, after asking again who is still pending
    (a player who answered overnight gets nothing: withdrawn). Returns how many were published."""
    ids = _payload_ids(delivery.payload)
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
        Push.objects.filter(pk__in=gone).update(
            status=PushStatus.WITHDRAWN, status_reason="answered while held"
        )
        due = Push.objects.filter(
            training=training, rule=rule, status=PushStatus.HELD, release_at__lte=max(now, delivery.fire_at)
        )
        keys = list(due.values_list("occurrence_key", flat=True).distinct())
        due.update(status=PushStatus.PENDING)
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


def push_expiry(*, training: Training, kind: str) -> datetime:
    """When a reminder is no use any more: the training's start for PRE and INVITATION, the close of the
    post-training questionnaire (TRAININGS_POST_QUESTIONNAIRE_HOURS after the end) for POST."""
    if kind == RuleKind.POST:
        return training.end + timedelta(hours=settings.TRAININGS_POST_QUESTIONNAIRE_HOURS)
    return training.start


def _fire_targets(
    deliveries: Sequence[Delivery],
) -> Callable[[Delivery], tuple[Training | None, ReminderRule | None]]:
    """Look up the trainings and rules the payloads name (one query each); None for one deleted, or for an
    occurrence whose job is not the one this app linked to that training and rule: a job someone else
    pointed at this handler (through the API before that was refused, or in the admin) reaches nobody."""
    linked = set(
        TrainingJob.objects.filter(job__key__in={d.job_key for d in deliveries}).values_list(
            "job__key", "training_id", "rule_id"
        )
    )
    named = {
        d.job_key: ids for d in deliveries if (ids := _payload_ids(d.payload)) and (d.job_key, *ids) in linked
    }
    trainings = Training.objects.select_related("team").in_bulk({ids[0] for ids in named.values()})
    rules = ReminderRule.objects.prefetch_related("templates").in_bulk({ids[1] for ids in named.values()})

    def lookup(delivery: Delivery) -> tuple[Training | None, ReminderRule | None]:
        ids = named.get(delivery.job_key)
        if ids is None:
            return None, None
        return trainings.get(ids[0]), rules.get(ids[1])

    return lookup


def _payload_ids(payload: Any) -> tuple[uuid.UUID, int] | None:
    if not isinstance(payload, dict):
        return None
    try:
        return uuid.UUID(str(payload.get("training"))), int(payload.get("rule"))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def _pushes_withdraw(firings: Sequence[_Firing]) -> int:
    """Pending pushes of players no longer pending (they answered since an earlier attempt)."""
    wanted = {f.delivery.idempotency_key: {p.pk for p in f.recipients} for f in firings}
    pending = Push.objects.filter(occurrence_key__in=wanted, status=PushStatus.PENDING)
    stale = [
        pk
        for pk, occurrence_key, player_id in pending.values_list("pk", "occurrence_key", "player_id")
        if player_id not in wanted[occurrence_key]
    ]
    if not stale:
        return 0
    return Push.objects.filter(pk__in=stale, status=PushStatus.PENDING).update(status=PushStatus.WITHDRAWN)


def pushes_publish(*, deliveries: Sequence[Delivery]) -> dict[int, TransportError]:
    """Publish the pending pushes of these occurrences in one AMQP transaction; mark the accepted ones sent.

    Returns a TransportError per occurrence (keyed by its id) that has a push the broker did not take.
    """
    by_key = {d.idempotency_key: d for d in deliveries}
    pending = list(
        Push.objects.filter(occurrence_key__in=by_key, status=PushStatus.PENDING)
        .select_related("rule")
        .order_by("pk")
    )
    if not pending:
        return {}
    messages = [
        Delivery(
            occurrence_id=push.pk,
            idempotency_key=push.key,
            job_key=by_key[push.occurrence_key].job_key,
            fire_at=push.fire_at,
            attempt=by_key[push.occurrence_key].attempt,
            target=settings.TRAININGS_PUSH_QUEUE,
            payload=push.message(),
        )
        for push in pending
    ]
    refused = get_transport(CallbackType.RABBITMQ).deliver(messages)
    accepted = [push.pk for push in pending if push.pk not in refused]
    Push.objects.filter(pk__in=accepted, status=PushStatus.PENDING).update(
        status=PushStatus.SENT, sent_at=timezone.now()
    )
    metrics.pushes_queued(push.kind for push in pending if push.pk not in refused)
    per_occurrence: dict[str, list[Push]] = {}
    for push in pending:
        per_occurrence.setdefault(push.occurrence_key, []).append(push)
    errors: dict[int, TransportError] = {}
    for key, pushes in per_occurrence.items():
        failed = [refused[push.pk] for push in pushes if push.pk in refused]
        if failed:
            errors[by_key[key].occurrence_id] = TransportError(
                f"{len(failed)} of {len(pushes)} pushes not published: {failed[0]}"
            )
    return errors


# --- Coach actions in the admin -------------------------------------------------------------------------


@dataclass(frozen=True)
class RemindResult:
    recipients: int
    published: int
    error: str = ""


def _offset_now(training: Training, rule: ReminderRule, now: datetime) -> Offset:
    """The `{offset}` of a push sent now: how far the rule's anchor (start, or end for POST) is from now."""
    anchor = training.end if rule.kind == RuleKind.POST else training.start
    minutes = max(1, round(abs((anchor - now).total_seconds()) / 60))
    if minutes < 120:
        return Offset(minutes, "m")
    if minutes < 2 * 1440:
        return Offset(round(minutes / 60), "h")
    return Offset(round(minutes / 1440), "d")


def training_remind_now(*, training: Training, rule: ReminderRule, click: str) -> RemindResult:
    """ "Remind the pending players now": one push per player the rule still chases, published at once.

    The click's token is part of every push key (unique per occurrence key and player), so a resubmitted
    click finds its pushes already there and publishes only those not yet sent: once per click.
    """
    now = timezone.now()
    occurrence_key = f"manual-{training.pk}-{rule.slug}-{click}"[:255]
    recipients = list(reminder_recipients(training=training, rule=rule))
    delivery = Delivery(
        occurrence_id=0,
        idempotency_key=occurrence_key,
        job_key=occurrence_key,
        fire_at=now,
        attempt=1,
        target=settings.TRAININGS_PUSH_QUEUE,
        payload={"training": str(training.pk), "rule": rule.pk},
    )
    firing = _recipients_pushes(delivery, training, rule, recipients, _offset_now(training, rule, now))
    for push in firing.pushes:
        push.occurrence_id = None  # no engine occurrence behind a coach's click
    with transaction.atomic():
        Push.objects.bulk_create(sorted(firing.pushes, key=lambda p: p.key), ignore_conflicts=True)
    errors = pushes_publish(deliveries=[delivery])
    published = Push.objects.filter(occurrence_key=occurrence_key, status=PushStatus.SENT).count()
    error = str(errors[0]) if 0 in errors else ""
    return RemindResult(recipients=len(recipients), published=published, error=error)


def training_copy(*, training: Training, days: int = 7) -> Training:
    """The same training `days` later at the same local time (wall clock in its zone, across DST), with
    the same player list, every invitation pending again."""
    zone = training.zone

    def later(instant: datetime) -> datetime:
        local = instant.astimezone(zone).replace(tzinfo=None) + timedelta(days=days)
        return local.replace(tzinfo=zone, fold=0).astimezone(UTC)

    players = list(Player.objects.filter(invitations__training=training).order_by("pk"))
    return training_create(
        team=training.team,
        title=training.title,
        start=later(training.start),
        end=later(training.end),
        time_zone=training.time_zone,
        location=training.location,
        players=players,
    )


# --- Access -------------------------------------------------------------------------------------------

COACH_GROUP = "Coaches"
_COACH_PERMISSIONS = {
    "training": ("view", "add", "change", "delete"),
    "invitation": ("view", "add", "change", "delete"),
    "questionnaireanswer": ("view", "add", "change", "delete"),
    "membership": ("view", "add", "change", "delete"),
    "player": ("view", "add", "change"),
    "team": ("view", "change"),
    "reminderrun": ("view",),
    "push": ("view",),
    "device": ("view",),
}


def coach_group_ensure() -> Any:
    """Create or repair the admin group for coaches: their teams' trainings, players and answers; no rules.

    What a coach can reach inside those models is limited to their teams by the admin's querysets.
    """
    from django.contrib.auth.models import Group, Permission

    group, _ = Group.objects.get_or_create(name=COACH_GROUP)
    codenames = [f"{action}_{model}" for model, actions in _COACH_PERMISSIONS.items() for action in actions]
    group.permissions.set(
        Permission.objects.filter(content_type__app_label="trainings", codename__in=codenames)
    )
    return group
