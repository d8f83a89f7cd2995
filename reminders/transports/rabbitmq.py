"""Publish a job's payload to a named RabbitMQ queue.

On an AMQP broker each batch is published inside one AMQP transaction: `tx.commit-ok` means RabbitMQ has
taken every message of the batch (persistent messages on durable queues are on disk by then), which is
what lets the dispatcher mark the batch delivered. Messages go out `mandatory`, so one the broker cannot
route comes back as `basic.return` before `commit-ok` and is reported as an error, never dropped.

The queue is declared durable before its first publish on a connection: a caller names a queue and gets
it, instead of having every message of a brand-new queue returned. Declaring a queue that already exists
with other arguments fails (PRECONDITION_FAILED) and the occurrence retries with that error.

On the embedded broker (kombu's filesystem transport) the same call goes through a kombu Producer; that
transport writes each message to disk synchronously and has no transactions to wait for.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import amqp
from django.conf import settings
from kombu import Connection, Producer, Queue

from reminders.transports.base import Delivery, TransportError

logger = logging.getLogger(__name__)


class RabbitMQTransport:
    def __init__(self, url: str | None = None) -> None:
        self._url = url
        self._connection: Connection | None = None
        self._pid = 0
        self._declared: set[str] = set()
        self._returned: dict[str, str] = {}
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return self._url or settings.REMINDERS_CALLBACK_BROKER_URL

    def deliver(self, deliveries: Sequence[Delivery]) -> Mapping[int, TransportError]:
        if not deliveries:
            return {}
        with self._lock:
            try:
                connection = self._connect()
                if connection.transport.driver_type == "amqp":
                    return self._publish_transaction(connection, deliveries)
                return self._publish_kombu(connection, deliveries)
            except Exception as exc:
                # Whatever state the connection is in (closed channel, half-committed transaction), the
                # outcome of every message in this batch is unknown: drop the connection and retry them all.
                logger.warning("publish of %d messages failed: %r", len(deliveries), exc)
                self.close()
                error = TransportError(f"broker error: {type(exc).__name__}: {exc}")
                return {d.occurrence_id: error for d in deliveries}

    def close(self) -> None:
        connection, self._connection = self._connection, None
        self._declared.clear()
        if connection is not None:
            try:
                connection.release()
            except Exception:  # noqa: S110 - the connection is already broken; nothing to save
                pass

    def _connect(self) -> Connection:
        if self._connection is not None and self._pid != os.getpid():
            # A forked worker child must not share its parent's socket.
            self._connection, self._declared = None, set()
        if self._connection is None:
            connection = Connection(
                self.url,
                connect_timeout=settings.REMINDERS_HTTP_CONNECT_TIMEOUT,
                transport_options=_transport_options(self.url),
            )
            connection.ensure_connection(max_retries=1)
            self._connection, self._pid = connection, os.getpid()
            if connection.transport.driver_type == "amqp":
                channel = connection.default_channel
                channel.tx_select()
                channel.events["basic_return"].add(self._on_return)
        return self._connection

    def _on_return(self, exc: Exception, exchange: str, routing_key: str, message: amqp.Message) -> None:
        message_id = message.properties.get("message_id", "")
        self._returned[message_id] = f"returned by broker: {exc} (routing key {routing_key!r})"

    def _publish_transaction(self, connection: Connection, deliveries: Sequence[Delivery]) -> dict[int, TransportError]:
        channel: amqp.Channel = connection.default_channel
        self._returned = {}
        for delivery in deliveries:
            if delivery.target not in self._declared:
                channel.queue_declare(queue=delivery.target, durable=True, auto_delete=False)
                self._declared.add(delivery.target)
            message = amqp.Message(
                body=json.dumps(delivery.payload, separators=(",", ":")).encode(),
                content_type="application/json",
                content_encoding="utf-8",
                delivery_mode=2,
                message_id=delivery.idempotency_key,
                # py-amqp's name for the headers table; an unknown keyword (`headers=`) is silently dropped.
                application_headers=_amqp_headers(delivery),
            )
            channel.basic_publish(message, exchange="", routing_key=delivery.target, mandatory=True)
        channel.tx_commit()
        return {
            d.occurrence_id: TransportError(self._returned[d.idempotency_key])
            for d in deliveries
            if d.idempotency_key in self._returned
        }

    def _publish_kombu(self, connection: Connection, deliveries: Sequence[Delivery]) -> dict[int, TransportError]:
        producer = Producer(connection.default_channel)
        for delivery in deliveries:
            queue = Queue(delivery.target, routing_key=delivery.target, durable=True)
            producer.publish(
                delivery.payload,
                routing_key=delivery.target,
                serializer="json",
                delivery_mode=2,
                message_id=delivery.idempotency_key,
                headers=_amqp_headers(delivery),
                declare=[queue] if delivery.target not in self._declared else [],
            )
            self._declared.add(delivery.target)
        return {}


def _amqp_headers(delivery: Delivery) -> dict[str, Any]:
    return {
        "job_key": delivery.job_key,
        "fire_at": delivery.fire_at.isoformat(),
        "attempt": delivery.attempt,
    }


def _transport_options(url: str) -> dict[str, Any]:
    if url.startswith("filesystem://"):
        return dict(getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {}))
    if url.startswith(("amqp://", "amqps://", "pyamqp://")):
        # A broker that stops answering must not hang the worker past its lease.
        return {"read_timeout": 30, "write_timeout": 30}
    return {}
