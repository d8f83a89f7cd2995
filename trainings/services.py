"""Writes: trainings and their reminders, answers, invitation responses, rule changes, and firing.

Scheduling runs inside the training's own transaction: one engine job per (training, rule), keyed
`training-<uuid>-<rule slug>`, whose occurrences are replaced by `job_upsert` (kept when the instant is
still wanted, so their idempotency keys survive a move; cancelled when not; added when new). The job's
payload names the training and the rule only: who gets a push is decided when it fires
(`reminder_fire`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from reminders.models import CallbackType, Job, Occurrence
from reminders.services import Callback, job_upsert, occurrences_cancel
from reminders.transports import Delivery, TransportError, get_transport
from trainings.models import (
    Invitation,
    InvitationStatus,
    Phase,
    Player,
    Push,
    PushStatus,
    QuestionnaireAnswer,
    ReminderRule,
    ReminderRun,
    RunOutcome,
    Team,
    Training,
)
from trainings.offsets import MAX_OFFSET, Offset
from trainings.rendering import Rendered, push_render
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
    """
    now = now or timezone.now()
    wanted_total = 0
    for rule in ReminderRule.objects.all() if rules is None else rules:
        key = job_key(training_id=training.pk, rule=rule)
        wanted: list[datetime] = []
        if rule.active and not training.cancelled:
            wanted = [instant for instant, _ in rule.instants_for(training) if instant > now]
        if not wanted and not Job.objects.filter(key=key).exists():
            continue  # nothing to schedule and nothing to cancel: no empty job row
        job_upsert(
            key=key,
            schedules=wanted,
            callback=Callback(
                type=CallbackType.HANDLER,
                target=HANDLER_NAME,
                payload={"training": str(training.pk), "rule": rule.pk},
            ),
            priority=settings.TRAININGS_REMINDER_PRIORITY,
            deadline_seconds=settings.TRAININGS_REMINDER_DEADLINE_SECONDS,
        )
        wanted_total += len(wanted)
    return wanted_total


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
        for name, value in changes.items():
            if value is not _UNSET:
                setattr(training, name, value)
        training.full_clean()
        training.save()
        if players is not _UNSET:
            _invitations_set(training=training, players=players)
        training_reminders_schedule(training=training)
    return training


def training_cancel(*, training: Training) -> Training:
    """Cancel the training: every pending reminder is cancelled, the row stays for the record."""
    return training_update(training=training, cancelled=True)


def training_delete(*, training: Training) -> int:
    """Delete the training and cancel every pending reminder in the same transaction. Returns how many."""
    with transaction.atomic():
        keys = [job_key(training_id=training.pk, rule=rule) for rule in ReminderRule.objects.all()]
        cancelled = occurrences_cancel(
            Occurrence.objects.filter(job__key__in=keys), reason="training deleted"
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
        pending = Occurrence.objects.filter(
            job__key__startswith="training-", job__key__endswith=f"-{rule.slug}", job__target=HANDLER_NAME
        )
        cancelled = occurrences_cancel(pending, reason=f"rule {rule.slug} deleted")
        rule.delete()
    return cancelled


# --- Firing ---------------------------------------------------------------------------------------------


def reminder_fire(*, delivery: Delivery) -> ReminderRun:
    """Run one occurrence: decide who is still pending, record their pushes, publish them.

    1. Re-read the training and rule; a cancelled training, an inactive rule, or an instant the rule no
       longer wants (the training moved while this occurrence was in flight) reaches nobody.
    2. Create one Push per remaining player, unique per (occurrence, player): a redelivered occurrence
       finds them already there and never creates a second one. Pending pushes of players who answered
       since an earlier attempt are withdrawn.
    3. Publish every still-pending push in one AMQP transaction, then mark them sent. A broker error raises
       TransportError: the engine retries the occurrence and the retry publishes only what is not sent,
       with the same idempotency keys.
    """
    occurrence_key = delivery.idempotency_key
    training, rule = _fire_targets(delivery.payload)
    outcome: RunOutcome
    offset: Offset | None = None
    recipients: list[Player] = []
    if training is None or rule is None:
        outcome = RunOutcome.GONE
    elif training.cancelled:
        outcome = RunOutcome.CANCELLED
    elif not rule.active:
        outcome = RunOutcome.INACTIVE
    else:
        offset = dict(rule.instants_for(training)).get(delivery.fire_at)
        if offset is None:
            outcome = RunOutcome.STALE
        else:
            recipients = list(reminder_recipients(training=training, rule=rule))
            outcome = RunOutcome.SENT if recipients else RunOutcome.NOBODY_LEFT

    now = timezone.now()
    with transaction.atomic():
        if recipients:
            assert training is not None and rule is not None and offset is not None
            templates = list(rule.templates.all())
            pushes = []
            rendered_for: dict[tuple[str, str], Rendered] = {}  # players sharing language and zone share text
            for player in recipients:
                audience = (player.language, player.time_zone)
                if audience not in rendered_for:
                    rendered_for[audience] = push_render(
                        templates=templates, training=training, player=player, offset=offset
                    )
                rendered = rendered_for[audience]
                pushes.append(
                    Push(
                        key=f"{occurrence_key}.{player.pk}",
                        occurrence_key=occurrence_key,
                        occurrence_id=delivery.occurrence_id,
                        training=training,
                        player=player,
                        rule=rule,
                        kind=rule.kind,
                        language=rendered.language,
                        title=rendered.title,
                        body=rendered.body,
                        device_tokens=list(player.device_tokens or []),
                        fire_at=delivery.fire_at,
                    )
                )
            Push.objects.bulk_create(pushes, ignore_conflicts=True)
        Push.objects.filter(occurrence_key=occurrence_key, status=PushStatus.PENDING).exclude(
            player_id__in=[p.pk for p in recipients]
        ).update(status=PushStatus.WITHDRAWN)
        run, _ = ReminderRun.objects.update_or_create(
            occurrence_key=occurrence_key,
            defaults={
                "occurrence_id": delivery.occurrence_id,
                "training": training,
                "rule": rule,
                "fire_at": delivery.fire_at,
                "outcome": outcome,
                "recipients": len(recipients),
                "attempts": delivery.attempt,
                "ran_at": now,
            },
        )
    pushes_publish(occurrence_key=occurrence_key, job_key=delivery.job_key, attempt=delivery.attempt)
    return run


def _fire_targets(payload: Any) -> tuple[Training | None, ReminderRule | None]:
    """The training and rule an occurrence names; None for one deleted (or a payload not ours)."""
    if not isinstance(payload, dict):
        return None, None
    try:
        training_id = uuid.UUID(str(payload.get("training")))
        rule_id = int(payload.get("rule"))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None, None
    training = Training.objects.select_related("team").filter(pk=training_id).first()
    rule = ReminderRule.objects.prefetch_related("templates").filter(pk=rule_id).first()
    return training, rule


def pushes_publish(*, occurrence_key: str, job_key: str, attempt: int) -> int:
    """Publish the occurrence's pending pushes to the push queue; mark the accepted ones sent."""
    pending = list(
        Push.objects.filter(occurrence_key=occurrence_key, status=PushStatus.PENDING).select_related("rule")
    )
    if not pending:
        return 0
    deliveries = [
        Delivery(
            occurrence_id=push.pk,
            idempotency_key=push.key,
            job_key=job_key,
            fire_at=push.fire_at,
            attempt=attempt,
            target=settings.TRAININGS_PUSH_QUEUE,
            payload=push.message(),
        )
        for push in pending
    ]
    errors = get_transport(CallbackType.RABBITMQ).deliver(deliveries)
    accepted = [push.pk for push in pending if push.pk not in errors]
    Push.objects.filter(pk__in=accepted, status=PushStatus.PENDING).update(
        status=PushStatus.SENT, sent_at=timezone.now()
    )
    if errors:
        first = next(iter(errors.values()))
        raise TransportError(f"{len(errors)} of {len(pending)} pushes not published: {first}")
    return len(accepted)


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
