"""A reminder fires: decide who is still pending, record one Push per player, publish them. The coach's
"remind now" (trainings/reminding/remind_now.py) builds the same pushes (`recipients_pushes`) for a click.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from reminders.api import Delivery, TransportError
from trainings.digest.firing import digests_take
from trainings.experiments.adaptive import Arms, chunk_arms
from trainings.models import (
    Push,
    PushStatus,
    ReminderRule,
    ReminderRun,
    RunOutcome,
    Training,
    TrainingJob,
)
from trainings.planning import kinds
from trainings.planning.offsets import Offset
from trainings.planning.scheduling import reminder_payload_ids
from trainings.reminding.family_gather import reach_apply
from trainings.reminding.held import held_releases, push_expiry, quiet_releases_schedule, quiet_status
from trainings.reminding.publishing import pushes_publish, pushes_record
from trainings.reminding.recipients import (
    Recipient,
    Reminded,
    recipients_reached_by_rule,
    recipients_reminded,
    reminder_recipients_many,
)
from trainings.reminding.rendering import Addressee, PushRow, Rendered, StartTexts, push_for, push_render
from trainings.squads.texts import squad_templates
from trainings.transitions import pushes_withdraw

logger = logging.getLogger(__name__)


def reminders_fire(*, deliveries: Sequence[Delivery]) -> dict[int, TransportError]:
    """Run a chunk of occurrences: decide who is still pending, record their pushes, publish them.

    1. Re-read the trainings and rules (one query each); a cancelled training, an inactive rule, or an
       instant the rule no longer wants (the training moved while this occurrence was in flight) reaches
       nobody. Who is still pending, and who was already reminded at that offset, is asked of the database
       once for the whole chunk (a fixed number of queries however many occurrences and players); each
       occurrence's texts are rendered on their own, so one that fails (a bad template) is retried alone
       and the rest of the chunk goes on.
    2. In one transaction: one Push per remaining player, unique per (occurrence, player), so a redelivered
       occurrence finds them already there and never creates a second one; pending pushes of players who
       answered since an earlier attempt are withdrawn; one ReminderRun per occurrence.
    3. In that same transaction, publish every still-pending push of the chunk in one AMQP transaction:
       those just inserted as they were built (inserted sent, one write a push), any left pending by an
       earlier attempt as stored (then marked sent); the database commits once the broker has. An
       occurrence with a push the broker did not take gets a TransportError (that push is recorded
       pending): the engine retries it and the retry publishes only what is not sent, with the same
       idempotency keys.
    The coaches' kinds' go to trainings/digest/ first; an experiment's arms are read (adaptive ones drawn)
    once per chunk. Returns errors by occurrence id (reminders/engine/handler_registry.py's contract).
    """
    errors: dict[int, TransportError] = {}
    targets = _fire_targets(deliveries)
    checked: list[Firing | _Due] = []
    instants: _Instants = {}
    for delivery in deliveries:
        try:
            checked.append(_due(delivery, *targets(delivery), instants))
        except Exception as exc:  # this occurrence alone is retried; the others go on
            logger.exception("reminder %s could not be prepared", delivery.idempotency_key)
            errors[delivery.occurrence_id] = TransportError(f"{type(exc).__name__}: {exc}")
    checked, dues = digests_take(checked, errors, due=_Due)  # the coaches' go to trainings/digest/
    recipients = reminder_recipients_many((due.training, due.rule.kind) for due in dues)
    reminded = recipients_reminded({(due.training.pk, due.rule.pk, str(due.offset)) for due in dues})
    held = held_releases(trainings={due.training.pk for due in dues}) if dues else {}
    arms = chunk_arms(dues, recipients)
    firings: list[Firing] = []
    start_texts: StartTexts = {}
    for item in checked:
        if isinstance(item, Firing):
            firings.append(item)
            continue
        try:
            pending = recipients[item.training.pk, item.rule.kind]
            held_until = held.get(item.training.pk, {})
            firings.append(_firing(item, pending, reminded, start_texts, held_until, arms))
        except Exception as exc:  # this occurrence alone is retried; the others go on
            logger.exception("reminder %s could not be prepared", item.delivery.idempotency_key)
            errors[item.delivery.occurrence_id] = TransportError(f"{type(exc).__name__}: {exc}")
    if not firings:
        return errors
    reach_apply(firings)  # the daily cap, the family's gather window (trainings/reminding/family_gather.py)
    now = timezone.now()
    with transaction.atomic():
        # Sorted, so two workers that meet on the same rows (a redelivery) take their locks in one order.
        # The pending pushes go in sent: they are published below, before this transaction commits.
        pushes = sorted((p for f in firings for p in f.pushes), key=lambda p: p.key)
        inserted = pushes_record(pushes, published_at=now)
        earlier = _pushes_withdraw(firings, set(inserted.values()))
        _held_superseded_withdraw(firings, held)
        ReminderRun.objects.bulk_create(
            sorted((f.run(now) for f in firings), key=lambda r: r.occurrence_key),
            update_conflicts=True,
            unique_fields=["occurrence_key"],
            update_fields=_RUN_FIELDS,
        )
        arms.record(((f.rule, f.assigned) for f in firings if f.rule is not None), now=now)
        quiet_releases_schedule(
            (f.training, f.rule, p.release_at)
            for f in firings
            for p in f.pushes
            if p.status == PushStatus.HELD and p.release_at and f.training and f.rule
        )
        # An occurrence with no push pending from before has exactly the pending ones inserted now to
        # publish. The transaction commits once the broker has taken them (or has recorded again as
        # pending those it refused): a crash before leaves no push written and nothing marked run.
        recorded = {
            f.delivery.idempotency_key: [
                (inserted[p.key], p) for p in f.pushes if p.status == PushStatus.PENDING and p.key in inserted
            ]
            for f in firings
            if f.delivery.idempotency_key not in earlier
        }
        errors.update(pushes_publish(deliveries=[f.delivery for f in firings], recorded=recorded))
    return errors


def reminder_fire(*, delivery: Delivery) -> ReminderRun:
    """`reminders_fire` for one occurrence; raises its TransportError, returns its ReminderRun."""
    if (error := reminders_fire(deliveries=[delivery]).get(delivery.occurrence_id)) is not None:
        raise error
    return ReminderRun.objects.get(occurrence_key=delivery.idempotency_key)


_RUN_FIELDS = ["occurrence_id", "training", "rule", "fire_at", "outcome", "recipients", "attempts", "ran_at"]


@dataclass
class Firing:
    """What one occurrence comes to: its outcome, its recipients and their pushes (not yet saved)."""

    delivery: Delivery
    training: Training | None
    rule: ReminderRule | None
    outcome: RunOutcome
    recipients: Sequence[Addressee] = field(default_factory=list)
    pushes: list[PushRow] = field(default_factory=list)
    assigned: list[int] = field(default_factory=list)  # players a running experiment met
    critical: bool = False  # its rule's reminder at this offset goes through quiet hours and mute

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


@dataclass
class _Due:
    """An occurrence that passed the checks: its rule still wants this instant for a live training."""

    delivery: Delivery
    training: Training
    rule: ReminderRule
    offset: Offset
    expires_at: datetime
    at_creation: bool = False  # the invitation sent at creation, in place of the ones it came too late for


# A rule's instants for a training's times, by (rule, start, end, zone): a chunk's trainings share them.
_Instants = dict[tuple[Any, datetime, datetime, str], dict[datetime, Offset]]


def _due(
    delivery: Delivery, training: Training | None, rule: ReminderRule | None, instants: _Instants
) -> Firing | _Due:
    """The outcome that reaches nobody (gone, cancelled, inactive, stale), or what is needed to decide who."""
    if training is None or rule is None:
        return Firing(delivery, training, rule, RunOutcome.GONE)
    if training.cancelled:
        return Firing(delivery, training, rule, RunOutcome.CANCELLED)
    if not rule.active:
        return Firing(delivery, training, rule, RunOutcome.INACTIVE)
    times = (rule.pk, training.start, training.end, training.time_zone)
    wanted = instants.get(times)
    if wanted is None:
        wanted = instants[times] = dict(rule.instants_for(training))
    offset = wanted.get(delivery.fire_at)
    at_creation = False
    if offset is None:
        creation = kinds.of(rule.kind).at_creation(training, wanted)
        if creation is None or creation[0] != delivery.fire_at:
            return Firing(delivery, training, rule, RunOutcome.STALE)
        offset, at_creation = creation[1], True
    expires_at = push_expiry(training=training, kind=rule.kind)
    return _Due(delivery, training, rule, offset, expires_at, at_creation)


def _firing(
    due: _Due,
    pending: list[Recipient],
    reminded: Reminded,
    start_texts: StartTexts,
    held_until: dict[tuple[int, int | None], datetime],
    arms: Arms,
) -> Firing:
    """The pending players' recipients minus those already reminded at this offset, and, while the rule
    runs an experiment, minus those whose arm does not remind at it (the invitation at creation goes to
    every arm: each had missed all of its own); one push each."""
    delivery, training, rule = due.delivery, due.training, due.rule
    assigned: list[int] = []
    if rule.experiment_id is not None and not due.at_creation:
        at, count = rule.arms_at(due.offset), len(rule.arm_offsets())
        assigned = sorted({person.pk for person in pending})
        owing = bool(pending)
        pending = [p for p in pending if arms.of(rule.experiment_id, training.pk, p.pk, count) in at]
        if owing and not pending:  # players still owe, all in other arms: not "everybody had answered"
            return Firing(delivery, training, rule, RunOutcome.NO_ARM_PLAYER, assigned=assigned)
    limit = timedelta(minutes=settings.TRAININGS_MOVE_REPEAT_MINUTES)
    already = {
        recipient
        for occurrence_key, recipient, then in reminded.get((training.pk, rule.pk, str(due.offset)), [])
        if occurrence_key != delivery.idempotency_key and (then is None or abs(then - due.expires_at) < limit)
    }
    if due.at_creation:  # in place of the missed ones: not to one an earlier reminder of the rule reached
        already |= recipients_reached_by_rule(
            training_id=training.pk, rule_id=rule.pk, besides=delivery.idempotency_key
        )
    recipients = [person for person in pending if (person.pk, person.guardian) not in already]
    if not recipients:
        return Firing(delivery, training, rule, RunOutcome.NOBODY_LEFT, assigned=assigned)
    firing = recipients_pushes(
        delivery, training, rule, recipients, due.offset, start_texts, held_until, at_creation=due.at_creation
    )
    firing.assigned = assigned
    return firing


def recipients_pushes(
    delivery: Delivery,
    training: Training,
    rule: ReminderRule,
    recipients: Sequence[Addressee],
    offset: Offset,
    start_texts: StartTexts | None = None,
    held_until: dict[tuple[int, int | None], datetime] | None = None,
    *,
    at_creation: bool = False,
) -> Firing:
    """One unsaved Push per recipient (a player, or a guardian of theirs), its text rendered in their
    language and zone; held behind a push of this training still held for that recipient (`held_until`:
    (player, guardian) -> latest release).

    `at_creation`: the invitation sent when the training was created too late for its rule's instants. It
    is the only one its recipients get, so quiet hours that end after the start do not skip it: it goes at
    once, with the reason recorded (the moved notice's rule, trainings/reminding/notices.py); shorter ones
    hold it.
    """
    templates = squad_templates(rule, training)
    expires_at = push_expiry(training=training, kind=rule.kind)
    # Players sharing language and zone share a text; sharing zone and quiet hours, a status.
    rendered_for: dict[tuple[str, str], Rendered] = {}
    status_for: dict[tuple[str, Any, Any, Any], tuple[PushStatus, datetime | None, str]] = {}
    held_until = held_until or {}
    offset_text = str(offset)
    critical, escalate, pushes = rule.critical_at(offset), rule.escalates_at(offset), []
    for player in recipients:
        audience = (player.language, player.time_zone)
        rendered = rendered_for.get(audience)
        if rendered is None:
            rendered = rendered_for[audience] = push_render(
                templates=templates, training=training, player=player, offset=offset, start_texts=start_texts
            )
        guardian = getattr(player, "guardian", None)  # a Recipient names one; a Player is themself
        behind = held_until.get((player.pk, guardian))
        quiet = (player.time_zone, player.quiet_start, player.quiet_end, behind)
        status = status_for.get(quiet)
        if status is None:  # a critical reminder goes through quiet hours (an operator's choice)
            status = status_for[quiet] = (
                (PushStatus.PENDING, None, "")
                if critical
                else quiet_status(player, training, delivery.fire_at, expires_at, held_until=behind)
            )
            if at_creation and status[0] == PushStatus.SKIPPED:
                status = status_for[quiet] = (
                    PushStatus.PENDING,
                    None,
                    f"sent in quiet hours: the training starts before they end ({status[2]})",
                )
        pushes.append(
            push_for(
                delivery,
                training=training,
                player=player,
                rendered=rendered,
                rule=rule,
                kind=rule.kind,
                offset=offset_text,
                expires_at=expires_at,
                status=status[0],
                release_at=status[1],
                status_reason=status[2],
                guardian_id=guardian,
                escalate=escalate,
            )
        )
    return Firing(delivery, training, rule, RunOutcome.SENT, recipients, pushes, critical=critical)


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
        d.job_key: ids
        for d in deliveries
        if (ids := reminder_payload_ids(d.payload)) and (d.job_key, *ids) in linked
    }
    trainings = Training.objects.select_related("team").in_bulk({ids[0] for ids in named.values()})
    rules = ReminderRule.objects.prefetch_related("templates").in_bulk({ids[1] for ids in named.values()})

    def lookup(delivery: Delivery) -> tuple[Training | None, ReminderRule | None]:
        ids = named.get(delivery.job_key)
        if ids is None:
            return None, None
        return trainings.get(ids[0]), rules.get(ids[1])

    return lookup


def _pushes_withdraw(firings: Sequence[Firing], inserted: set[int]) -> set[str]:
    """Withdraw the pending pushes of players no longer pending (they answered since an earlier attempt).

    Returns the occurrences (keys) that still have a pending push not `inserted` now: an earlier attempt's
    (or a concurrent one's), which is published as stored.
    """
    wanted = {f.delivery.idempotency_key: {p.pk for p in f.recipients} for f in firings}
    pending = Push.objects.filter(occurrence_key__in=wanted, status=PushStatus.PENDING)
    stale, earlier = [], set()
    for pk, occurrence_key, player_id in pending.values_list("pk", "occurrence_key", "player_id"):
        if pk in inserted:
            continue
        if player_id in wanted[occurrence_key]:
            earlier.add(occurrence_key)
        else:
            stale.append(pk)
    if stale:
        pushes_withdraw(Push.objects.filter(pk__in=stale), source=PushStatus.PENDING)
    return earlier


def _held_superseded_withdraw(
    firings: Sequence[Firing], held: dict[object, dict[tuple[int, int | None], datetime]]
) -> int:
    """Withdraw the rule's held pushes of a recipient its critical reminder reaches now.

    A critical reminder goes through quiet hours ahead of that rule's earlier reminders still held for the
    recipient; released after it, they would say again, later, what the critical one has said.
    """
    superseded = Q()
    for f in firings:
        if not f.critical or f.training is None or f.rule is None:
            continue
        waiting = held.get(f.training.pk, {})
        for push in f.pushes:
            if push.status == PushStatus.PENDING and (push.player_id, push.guardian_id) in waiting:
                superseded |= Q(
                    training_id=f.training.pk, rule_id=f.rule.pk, player_id=push.player_id,
                    guardian_id=push.guardian_id, fire_at__lt=push.fire_at,
                )  # fmt: skip
    if not superseded:
        return 0
    return pushes_withdraw(
        Push.objects.filter(superseded),
        source=PushStatus.HELD,
        reason="a later reminder of this rule came through quiet hours (critical)",
    )
