"""Publish a job's payload to a named RabbitMQ queue: one AMQP transaction per chunk, `mandatory`.

The publishing itself (transactions, returns, reconnects, frames) is `common.amqp.publisher.TxPublisher`,
which the push queue uses too; this module says what a `rabbitmq` callback's `data` is and reports the
broker's refusals per occurrence, as every transport does. `tx.commit-ok` is what lets the dispatcher mark
a chunk delivered; `start()` returns once `tx.commit` is sent, so the dispatcher works while the broker
commits.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from django.conf import settings
from rest_framework import serializers

from common.amqp.publisher import Publishing, TxPublisher
from reminders.transports.base import CallbackDataSerializer, Delivery, InFlight, TransportError
from reminders.transports.queue_access import QueueAccess, service_queue_owner, service_queues

_QUEUE_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,254}$")


class RabbitMQDataSerializer(CallbackDataSerializer):
    target_field = "queue"
    # Refused, never trimmed: " q" and "q" are two queues to RabbitMQ.
    queue = serializers.CharField(max_length=255, trim_whitespace=False)
    payload = serializers.JSONField()

    def validate_queue(self, value: str) -> str:
        if not _QUEUE_PATTERN.fullmatch(value):  # `$` alone would let a final "\n" through
            raise serializers.ValidationError("use letters, digits, '.', '_', ':' or '-' (at most 255).")
        if value.startswith("amq."):
            raise serializers.ValidationError("queue names starting with 'amq.' are reserved by RabbitMQ.")
        # The caller's grants, and never the service's own queues (fail closed: no access, no queue).
        access = self.context.get("queue_access") or QueueAccess(None)
        refusal = access.refusal(value)
        if refusal is not None:
            raise serializers.ValidationError(refusal)
        return value


class RabbitMQTransport:
    """The process's publisher of `rabbitmq` callbacks, to REMINDERS_CALLBACK_BROKER_URL (or `url`)."""

    def __init__(self, url: str | None = None) -> None:
        self.publisher = TxPublisher(
            url or _callback_broker_url, connect_timeout=settings.REMINDERS_HTTP_CONNECT_TIMEOUT
        )

    def deliver(self, deliveries: Sequence[Delivery]) -> Mapping[int, TransportError]:
        return self.start(deliveries).wait()

    def start(self, deliveries: Sequence[Delivery]) -> InFlight:
        """Publish the batch and send `tx.commit`; `wait()` on the result reads `commit-ok`.

        A job naming one of the service's own queues fails for good without a publish: the API refuses
        such callbacks, and this catches one stored before it did (or before a queue was renamed)."""
        own = service_queues()
        refused = {
            d.occurrence_id: TransportError(f"{d.target!r} is this service's own queue", permanent=True)
            for d in deliveries
            if service_queue_owner(d.target, own) is not None
        }
        if refused:
            deliveries = [d for d in deliveries if d.occurrence_id not in refused]
        return _Flight(self.publisher.start(deliveries), deliveries, refused)

    def close(self) -> None:
        self.publisher.close()


def _callback_broker_url() -> str:
    return settings.REMINDERS_CALLBACK_BROKER_URL


class _Flight:
    """The broker's refusals of a batch, as the transport errors of their occurrences."""

    def __init__(
        self, publishing: Publishing, deliveries: Sequence[Delivery], refused: Mapping[int, TransportError]
    ) -> None:
        self._publishing = publishing
        self._deliveries = deliveries
        self._refused = refused  # not published at all
        self._errors: Mapping[int, TransportError] | None = None

    def wait(self) -> Mapping[int, TransportError]:
        if self._errors is None:
            refused = self._publishing.wait()
            self._errors = (
                {
                    d.occurrence_id: TransportError(refused[d.idempotency_key])
                    for d in self._deliveries
                    if d.idempotency_key in refused
                }
                if refused
                else {}
            )
            if self._refused:
                self._errors = {**self._errors, **self._refused}
        return self._errors
