"""The engine's in-process callback for training reminders, and the push message schema.

Job payload (what each occurrence carries): `{"training": "<training uuid>", "rule": <rule id>}`. Never
the recipients: they are decided when it fires (`trainings.services.reminder_fire`).

Push message, one per player, published to the durable queue `TRAININGS_PUSH_QUEUE` (default exchange,
routing key = queue name, persistent, AMQP `message_id` = `idempotency_key`), JSON body:

    {
      "schema": "trainings.push/2",
      "idempotency_key": "<occurrence idempotency key>.<player id>",  # stable across redeliveries
      "player": 42,                                 # player id: the gateway sends to their enabled Devices
      "title": "Pre-training questionnaire",        # rendered in the player's language
      "body": "U15 session starts at 10:00 ...",    # local times in the player's zone
      "language": "en",
      "training": "<training uuid>",
      "kind": "PRE" | "POST" | "INVITATION",
      "rule": "pre-questionnaire",                  # rule slug
      "fire_at": "2026-03-30T08:00:00+00:00",       # the reminder instant (UTC)
      "expires_at": "2026-03-30T09:30:00+00:00"     # stale after this (training start; POST: questionnaire
    }                                               # close), so the gateway drops it and records why

Schema 1 (before devices were rows) also carried `device_tokens` and no `expires_at`; the gateway still
reads it and ignores the tokens. The app receives `training`, `kind`, `rule` and `push` (the key) as data,
and the notification collapses per (training, kind) on the device.

Consumers must de-duplicate on `idempotency_key` (the push gateway does).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from reminders.handlers import register, register_batch
from reminders.transports.base import Delivery, TransportError
from trainings.services import (
    MOVED_NOTICE_HANDLER,
    QUIET_RELEASE_HANDLER,
    quiet_release,
    reminders_fire,
    training_moved_notify,
)


@register_batch("trainings.reminder")
def training_reminders(deliveries: Sequence[Delivery]) -> Mapping[int, TransportError]:
    return reminders_fire(deliveries=deliveries)


@register(QUIET_RELEASE_HANDLER)
def training_quiet_release(delivery: Delivery) -> None:
    """A player's quiet hours ended: publish their held pushes (payload: the training and the rule)."""
    quiet_release(delivery=delivery)


@register(MOVED_NOTICE_HANDLER)
def training_moved_notice(delivery: Delivery) -> None:
    """The training moved: tell the players already reminded (payload: the training and its new start)."""
    training_moved_notify(delivery=delivery)
