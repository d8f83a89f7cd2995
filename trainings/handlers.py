"""The engine's in-process callback for training reminders, and the push message schema.

Job payload (what each occurrence carries): `{"training": "<training uuid>", "rule": <rule id>}`. Never
the recipients: they are decided when it fires (`trainings.services.reminder_fire`).

Push message, one per player, published to the durable queue `TRAININGS_PUSH_QUEUE` (default exchange,
routing key = queue name, persistent, AMQP `message_id` = `idempotency_key`), JSON body:

    {
      "schema": "trainings.push/1",
      "idempotency_key": "<occurrence idempotency key>.<player id>",  # stable across redeliveries
      "player": 42,                                 # player id
      "device_tokens": ["fcm:...", "apns:..."],     # as stored on the player when the push was created
      "title": "Pre-training questionnaire",        # rendered in the player's language
      "body": "U15 session starts at 10:00 ...",    # local times in the player's zone
      "language": "en",
      "training": "<training uuid>",
      "kind": "PRE" | "POST" | "INVITATION",
      "rule": "pre-questionnaire",                  # rule slug
      "fire_at": "2026-03-30T08:00:00+00:00"        # the reminder instant (UTC)
    }

Consumers must de-duplicate on `idempotency_key` (the push gateway does).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from reminders.handlers import keys_reserve, register_batch
from reminders.transports.base import Delivery, TransportError
from trainings.selectors import JOB_KEY_NAMESPACE
from trainings.services import reminders_fire

# Only this app's services create these jobs: an API caller can neither take one of their keys first
# nor name the handler (it pushes to any training's players).
keys_reserve(JOB_KEY_NAMESPACE, owner="the trainings app (training-<uuid>-...)")


@register_batch("trainings.reminder", api=False)
def training_reminders(deliveries: Sequence[Delivery]) -> Mapping[int, TransportError]:
    return reminders_fire(deliveries=deliveries)
