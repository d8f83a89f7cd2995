"""Every change of a push's status (a player's `Push`, a coach's `CoachPush`), an experiment's status and a
webhook subscription's disabling: the one module that writes them, each model with its table of moves.

Each function makes one move of PUSH_TRANSITIONS or DEVICE_TRANSITIONS and refuses any other. A move is
one conditional UPDATE (`WHERE status = <from>`, or the device's `disabled_at` test) that sets only the
columns the move owns, so a row another worker moved meanwhile is left as that worker left it, and a
caller learns how many rows it moved. New pushes come in one of PUSH_INITIAL through
`trainings.reminding.publishing.pushes_record`; a new device is enabled
(`trainings.devices.registration.device_register`). tests/test_status_owners.py fails when a status is written
anywhere else.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.utils import timezone

from trainings.models import (
    CoachPush,
    Experiment,
    ExperimentStatus,
    Push,
    PushStatus,
    Variant,
    WebhookSubscription,
)
from trainings.models.coaches import CoachPushStatus

PUSH_TRANSITIONS: dict[str, frozenset[str]] = {
    # Published (and marked sent with the broker's commit), or the player answered before it was.
    PushStatus.PENDING: frozenset({PushStatus.SENT, PushStatus.WITHDRAWN}),
    # Quiet hours are over: released to be published, withdrawn (the player answered, the training moved
    # far or was cancelled meanwhile), or skipped (of no use any more by its release).
    PushStatus.HELD: frozenset({PushStatus.PENDING, PushStatus.WITHDRAWN, PushStatus.SKIPPED}),
    PushStatus.SENT: frozenset(),
    PushStatus.WITHDRAWN: frozenset(),
    PushStatus.SKIPPED: frozenset(),
}

# The statuses a push is recorded in (quiet hours decide which; a fired reminder's pending pushes go in sent,
# in the transaction that publishes them and commits once the broker took them:
# trainings/reminding/firing.py).
PUSH_INITIAL = (PushStatus.PENDING, PushStatus.HELD, PushStatus.SKIPPED, PushStatus.SENT)


def _push_move(rows: QuerySet[Push], *, source: str, to: str, **fields: Any) -> int:
    if to not in PUSH_TRANSITIONS[source]:
        raise ValueError(f"a push cannot move from {source} to {to}")
    return rows.filter(status=source).update(status=to, **fields)


def pushes_mark_sent(rows: QuerySet[Push], *, now: datetime | None = None) -> int:
    """pending -> sent: the broker took them."""
    return _push_move(rows, source=PushStatus.PENDING, to=PushStatus.SENT, sent_at=now or timezone.now())


def pushes_withdraw(rows: QuerySet[Push], *, source: str, reason: str = "") -> int:
    """pending or held -> withdrawn: the player answered (or the training went) before it was published."""
    fields = {"status_reason": reason[:200]} if reason else {}
    return _push_move(rows, source=source, to=PushStatus.WITHDRAWN, **fields)


def held_push_decide(push: Push, *, status: str, reason: str) -> None:
    """Decide one held push's move on the instance (the release decides push by push, under the rows'
    locks); `held_pushes_save` writes the decisions."""
    if status not in PUSH_TRANSITIONS[PushStatus.HELD]:
        raise ValueError(f"a push cannot move from held to {status}")
    push.status, push.status_reason = status, reason[:200]


def held_pushes_save(pushes: Sequence[Push], *, fields: Sequence[str]) -> int:
    """Write the moves `held_push_decide` made, with `fields` the release rewrote, to rows still held."""
    held = Push.objects.filter(status=PushStatus.HELD)
    return held.bulk_update(pushes, ["status", "status_reason", *fields], batch_size=500)


COACH_PUSH_TRANSITIONS: dict[str, frozenset[str]] = {
    # Published (and marked sent with the broker's commit).
    CoachPushStatus.PENDING: frozenset({CoachPushStatus.SENT}),
    # The coach's quiet hours are over: released, or skipped (of no use any more, nobody owes anything).
    CoachPushStatus.HELD: frozenset({CoachPushStatus.PENDING, CoachPushStatus.SKIPPED}),
    CoachPushStatus.SENT: frozenset(),
    CoachPushStatus.SKIPPED: frozenset(),
}


def coach_pushes_mark_sent(rows: QuerySet[CoachPush], *, now: datetime | None = None) -> int:
    """pending -> sent: the broker took these coaches' digests."""
    return rows.filter(status=CoachPushStatus.PENDING).update(
        status=CoachPushStatus.SENT, sent_at=now or timezone.now()
    )


def coach_push_release(push: CoachPush, *, status: str, reason: str, **texts: Any) -> bool:
    """held -> pending (with its texts written again, `texts`: title, body, language, owing) or skipped, if
    it is still held. Returns whether it moved."""
    if status not in COACH_PUSH_TRANSITIONS[CoachPushStatus.HELD]:
        raise ValueError(f"a coach's digest cannot move from held to {status}")
    moved = CoachPush.objects.filter(pk=push.pk, status=CoachPushStatus.HELD).update(
        status=status, status_reason=reason[:200], **texts
    )
    return bool(moved)


EXPERIMENT_TRANSITIONS: dict[str, frozenset[str]] = {
    # Stopped (everyone back on the rule) or promoted (a variant's offsets became the rule's).
    ExperimentStatus.RUNNING: frozenset({ExperimentStatus.STOPPED, ExperimentStatus.PROMOTED}),
    ExperimentStatus.STOPPED: frozenset(),
    ExperimentStatus.PROMOTED: frozenset(),
}


def experiment_end(experiment: Experiment, *, status: str, variant: Variant | None, now: datetime) -> None:
    """running -> stopped or promoted, on an experiment the caller holds locked."""
    if status not in EXPERIMENT_TRANSITIONS[experiment.status]:
        raise ValidationError({"experiment": f"{experiment.name} is not running ({experiment.status})"})
    experiment.status, experiment.stopped_at, experiment.promoted = status, now, variant
    experiment.save(update_fields=["status", "stopped_at", "promoted"])


# A subscription is disabled (after a day of failed deliveries; again, with the newer reason) and enabled
# by an operator (idempotent): every move is allowed, the table says so for the test and the reader.
SUBSCRIPTION_TRANSITIONS: dict[str, frozenset[str]] = {
    "enabled": frozenset({"disabled", "enabled"}),
    "disabled": frozenset({"disabled", "enabled"}),
}


def subscription_state(subscription: WebhookSubscription) -> str:
    return "disabled" if subscription.disabled_at is not None else "enabled"


def subscription_move(subscription: WebhookSubscription, *, to: str, reason: str = "") -> None:
    """Disable (`to="disabled"`, with why) or enable a webhook subscription, its `active` flag with it."""
    if to not in SUBSCRIPTION_TRANSITIONS[subscription_state(subscription)]:
        raise ValueError(f"a webhook subscription cannot move to {to}")
    disabled = to == "disabled"
    subscription.active = not disabled
    subscription.disabled_at = timezone.now() if disabled else None
    subscription.disabled_reason = reason[:300] if disabled else ""
    subscription.save(update_fields=["active", "disabled_at", "disabled_reason"])
