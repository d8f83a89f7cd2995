"""The one interface every callback transport implements: what its `callback.data` accepts and how it
delivers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, NamedTuple, Protocol

from django.conf import settings
from rest_framework import serializers

from common.compact_json import json_compact as json_compact
from common.http.parsers import json_strings
from common.serializers import StrictSerializer


class Delivery(NamedTuple):
    """Everything a transport needs to deliver one claimed occurrence.

    A named tuple, immutable like the frozen dataclass it was and much cheaper to build: there is one per
    claimed row.

    `body`, when set, is the payload's JSON exactly as stored (reminders/engine/deliveries.py), which a
    transport that can (RabbitMQ) sends as is; `payload` is then left undecoded (None).
    """

    occurrence_id: int
    idempotency_key: str
    job_key: str
    fire_at: datetime
    attempt: int
    target: str
    payload: Any
    secret: str = ""
    body: bytes | None = None

    def json_body(self) -> bytes:
        """The message body: the stored JSON text when there is one, else the payload encoded compactly."""
        if self.body is not None:
            return self.body
        return json_compact(self.payload)

    def headers(self) -> dict[str, str]:
        """Metadata that travels beside the payload (AMQP headers, HTTP headers)."""
        return {
            "X-Reminders-Job": self.job_key,
            "X-Reminders-Fire-At": self.fire_at.isoformat(),
            "X-Reminders-Attempt": str(self.attempt),
        }


class TransportError(Exception):
    """A delivery that did not happen. `permanent` ones are not retried (a 404, an unknown handler)."""

    def __init__(self, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


class InFlight(Protocol):
    """A delivery that has been sent and whose outcome is not known yet."""

    def wait(self) -> Mapping[int, TransportError]:
        """Block until the outcome is known; the same errors `Transport.deliver` would return.

        Must not raise. Waiting again returns the same outcome.
        """
        ...


@dataclass(frozen=True)
class Settled:
    """An outcome known at once: what a transport without a separate acknowledgement returns."""

    errors: Mapping[int, TransportError]

    def wait(self) -> Mapping[int, TransportError]:
        return self.errors


class Transport(Protocol):
    def deliver(self, deliveries: Sequence[Delivery]) -> Mapping[int, TransportError]:
        """Deliver every item; return the errors keyed by occurrence id. Absent means accepted.

        Must not raise: a transport that cannot reach its destination returns an error for each item.
        """
        ...

    def start(self, deliveries: Sequence[Delivery]) -> InFlight:
        """Send every item and return before the destination has acknowledged them, where it can.

        `deliver(d)` is `start(d).wait()`. The dispatcher does its database work between the two
        (reminders/engine/dispatch.py, `_Pipeline`). The caller waits for one `InFlight` before it starts
        the next
        on the same transport. Must not raise.
        """
        ...


class CallbackDataSerializer(StrictSerializer):
    """A callback type's `data` in the API: its target field, named by `target_field`, and a `payload`
    (each subclass declares both, so its fields keep their order; the payload is checked here)."""

    target_field: ClassVar[str]

    def validate_payload(self, payload: Any) -> Any:
        return payload_size_ok(payload)


def payload_size_ok(payload: Any) -> Any:
    """A payload every transport can carry and PostgreSQL can store, within REMINDERS_MAX_PAYLOAD_BYTES."""
    if any("\x00" in text for text in json_strings(payload)):
        # Valid JSON, but PostgreSQL's jsonb cannot store U+0000 (and most consumers mishandle it).
        raise serializers.ValidationError("strings and keys must not contain the NUL character (\\u0000).")
    size = len(json_compact(payload))
    if size > settings.REMINDERS_MAX_PAYLOAD_BYTES:
        raise serializers.ValidationError(
            f"payload is {size} bytes encoded; the maximum is {settings.REMINDERS_MAX_PAYLOAD_BYTES}."
        )
    return payload
