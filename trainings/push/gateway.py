"""The push gateway: consume the push queue, hand each push to the provider, ack only once accepted.

Per message:
1. Parse; a message that is not a `trainings.push/1` object is rejected without requeue (a poison
   message must not loop; with a dead-letter exchange on the queue it lands there).
2. De-duplicate: a key already in `DeliveredPush` is acked without sending (a redelivered message or a
   republished push).
3. Send through the provider; on failure requeue after TRAININGS_GATEWAY_RETRY_SECONDS (permanent
   failures are rejected). On success record the key, then ack. A crash between send and record sends
   that one push again on redelivery: at-least-once, like the rest of the pipeline.

Works on RabbitMQ and on kombu's filesystem broker alike (plain kombu Consumer).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from django.conf import settings
from django.db import IntegrityError, close_old_connections, connection
from kombu import Connection, Consumer, Queue
from kombu.message import Message

from reminders import metrics
from trainings.models import DeliveredPush
from trainings.push.providers import PushMessage, PushProvider, PushProviderError, get_provider

logger = logging.getLogger(__name__)


class Outcome(StrEnum):
    DELIVERED = "delivered"
    DUPLICATE = "duplicate"
    RETRY = "retry"
    REJECTED = "rejected"


def push_handle(body: Any, *, provider: PushProvider) -> Outcome:
    """Steps 1-3 without the broker: what to do with one message body."""
    try:
        push = PushMessage.from_body(body)
    except ValueError as exc:
        logger.error("rejecting malformed push message: %s", exc)
        return Outcome.REJECTED
    if DeliveredPush.objects.filter(key=push.idempotency_key).exists():
        return Outcome.DUPLICATE
    try:
        provider.send(push)
    except PushProviderError as exc:
        logger.warning("provider %s refused push %s: %s", provider.name, push.idempotency_key, exc)
        return Outcome.REJECTED if exc.permanent else Outcome.RETRY
    # Another gateway may record the same key at the same moment: both sent, the record is there.
    with contextlib.suppress(IntegrityError):
        DeliveredPush.objects.get_or_create(key=push.idempotency_key, defaults={"provider": provider.name})
    return Outcome.DELIVERED


@dataclass
class GatewayStats:
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, outcome: Outcome) -> None:
        self.counts[outcome.value] = self.counts.get(outcome.value, 0) + 1

    @property
    def handled(self) -> int:
        return sum(self.counts.values())


def push_queue() -> Queue:
    name = settings.TRAININGS_PUSH_QUEUE
    return Queue(name, routing_key=name, durable=True, auto_delete=False)


def gateway_run(
    *,
    url: str | None = None,
    provider: PushProvider | None = None,
    max_messages: int | None = None,
    idle_seconds: float | None = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> GatewayStats:
    """Consume until stopped, `max_messages` handled, or `idle_seconds` without a message."""
    provider = provider or get_provider()
    url = url or settings.REMINDERS_CALLBACK_BROKER_URL
    stats = GatewayStats()
    options = (
        dict(getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {})) if url.startswith("filesystem") else {}
    )

    def on_message(body: Any, message: Message) -> None:
        if not connection.in_atomic_block:  # (a test runs us inside its transaction)
            close_old_connections()  # a long-lived consumer must not keep a dead database connection
        outcome = push_handle(body, provider=provider)
        metrics.push_handled(body, outcome, provider.name)
        if outcome in (Outcome.DELIVERED, Outcome.DUPLICATE):
            message.ack()
        elif outcome == Outcome.REJECTED:
            message.reject(requeue=False)
        else:
            time.sleep(settings.TRAININGS_GATEWAY_RETRY_SECONDS)
            message.requeue()
        stats.add(outcome)

    with Connection(url, transport_options=options) as broker:
        broker.ensure_connection(max_retries=3)
        consumer = Consumer(
            broker.default_channel,
            queues=[push_queue()],
            callbacks=[on_message],
            accept=["json"],
            prefetch_count=settings.TRAININGS_GATEWAY_PREFETCH,
        )
        with consumer:
            idle_since = time.monotonic()
            while not should_stop():
                metrics.gateway_alive()
                if max_messages is not None and stats.handled >= max_messages:
                    break
                before = stats.handled
                with contextlib.suppress(TimeoutError):
                    broker.drain_events(timeout=0.5)
                if stats.handled != before:
                    idle_since = time.monotonic()
                elif idle_seconds is not None and time.monotonic() - idle_since >= idle_seconds:
                    break
    return stats
