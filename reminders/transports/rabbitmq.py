"""Publish a job's payload to a named RabbitMQ queue: one AMQP transaction per chunk, `mandatory`.

`tx.commit-ok` is what lets the dispatcher mark a chunk delivered, and a message the broker cannot route
comes back as an error before it, never a silent drop. Queues are declared durable before their first
publish. `start()` returns once `tx.commit` is sent, so the dispatcher works while the broker commits. The
publishes themselves are written as one buffer of frames (reminders/transports/amqp_frames.py), the body
being the stored JSON text where the delivery has it. On kombu's filesystem broker (the embedded default)
the same call goes through a kombu Producer.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import amqp
from amqp import spec
from django.conf import settings
from kombu import Connection, Producer, Queue
from rest_framework import serializers

from reminders.transports.amqp_frames import FrameBuffer, PublishEncoder
from reminders.transports.base import CallbackDataSerializer, Delivery, InFlight, Settled, TransportError

logger = logging.getLogger(__name__)

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
        return value


class RabbitMQTransport:
    def __init__(self, url: str | None = None) -> None:
        self._url = url
        self._connection: Connection | None = None
        self._pid = 0
        self._declared: set[str] = set()
        self._returned: dict[str, str] = {}
        self._lock = threading.Lock()
        self._publish_encoder: tuple[tuple[int, int], PublishEncoder] | None = None

    @property
    def url(self) -> str:
        return self._url or settings.REMINDERS_CALLBACK_BROKER_URL

    def deliver(self, deliveries: Sequence[Delivery]) -> Mapping[int, TransportError]:
        return self.start(deliveries).wait()

    def start(self, deliveries: Sequence[Delivery]) -> InFlight:
        """Publish the batch and send `tx.commit`; `wait()` on the result reads `commit-ok`.

        The channel carries one transaction at a time: `start` takes it and the `wait` gives it back, so
        a second `start` in another thread waits for the first batch's outcome.
        """
        if not deliveries:
            return Settled({})
        self._lock.acquire()
        try:
            connection, fresh = self._connect()
            if connection.transport.driver_type == "amqp":
                try:
                    self._publish_transaction(connection, deliveries)
                except Exception as exc:
                    if fresh or not _closed_under_us(exc):
                        raise
                    connection = self._reconnect(exc)
                    self._publish_transaction(connection, deliveries)
                    fresh = True
                # Releases the lock when waited for.
                return _Commit(self, connection, deliveries, may_reconnect=not fresh)
            errors = self._publish_kombu(connection, deliveries)
        except Exception as exc:
            errors = self._broken(deliveries, exc)
        self._lock.release()
        return Settled(errors)

    def _finish(
        self, connection: Connection, deliveries: Sequence[Delivery], *, may_reconnect: bool
    ) -> dict[int, TransportError]:
        """Read `commit-ok` (and any `basic.return` before it), then give the channel back."""
        try:
            try:
                self._commit_ok(connection)
            except Exception as exc:
                if not may_reconnect or not _closed_under_us(exc):
                    raise
                connection = self._reconnect(exc)
                self._publish_transaction(connection, deliveries)
                self._commit_ok(connection)
            return {
                d.occurrence_id: TransportError(self._returned[d.idempotency_key])
                for d in deliveries
                if d.idempotency_key in self._returned
            }
        except Exception as exc:
            return self._broken(deliveries, exc)
        finally:
            self._lock.release()

    def _commit_ok(self, connection: Connection) -> None:
        channel: Any = connection.default_channel
        channel.wait(spec.Tx.CommitOk)

    def _reconnect(self, exc: Exception) -> Connection:
        """The broker closed the connection we kept between batches (a restart, a failover, an operator).

        That is not the endpoint failing: the batch goes out again at once on a new connection, once. If
        that fails too, it is a delivery error with the usual backoff. Whatever the old connection had
        committed before it closed is sent again (at-least-once, same message ids).
        """
        logger.info("broker connection closed (%r); publishing again on a new one", exc)
        self.close()
        connection, _ = self._connect()
        return connection

    def _broken(self, deliveries: Sequence[Delivery], exc: Exception) -> dict[int, TransportError]:
        # Whatever state the connection is in (closed channel, half-committed transaction), the outcome of
        # every message in this batch is unknown: drop the connection and retry them all.
        logger.warning("publish of %d messages failed: %r", len(deliveries), exc)
        self.close()
        error = TransportError(f"broker error: {type(exc).__name__}: {exc}")
        return {d.occurrence_id: error for d in deliveries}

    def close(self) -> None:
        connection, self._connection = self._connection, None
        self._declared.clear()
        if connection is not None:
            with contextlib.suppress(Exception):  # already broken: nothing to save
                connection.release()

    def _connect(self) -> tuple[Connection, bool]:
        """The connection, and whether it was opened just now (a new one is not retried on)."""
        if self._connection is not None and self._pid != os.getpid():
            # A forked worker child must not share its parent's socket.
            self._connection, self._declared = None, set()
        fresh = self._connection is None
        if self._connection is None:
            connection = Connection(
                self.url,
                connect_timeout=settings.REMINDERS_HTTP_CONNECT_TIMEOUT,
                transport_options=_transport_options(self.url),
            )
            connection.ensure_connection(max_retries=1)
            self._connection, self._pid = connection, os.getpid()
            if connection.transport.driver_type == "amqp":
                channel: Any = connection.default_channel
                channel.tx_select()
                channel.events["basic_return"].add(self._on_return)
        return self._connection, fresh

    def _on_return(self, exc: Exception, exchange: str, routing_key: str, message: amqp.Message) -> None:
        message_id = message.properties.get("message_id", "")
        self._returned[message_id] = f"returned by broker: {exc} (routing key {routing_key!r})"

    def _publish_transaction(self, connection: Connection, deliveries: Sequence[Delivery]) -> None:
        """Publish every message inside the channel's transaction and send `tx.commit` without waiting."""
        channel: Any = connection.default_channel
        self._returned = {}
        # py-amqp's basic_publish polls the socket after every message to notice `connection.blocked`;
        # once per batch is enough (a blocked broker makes tx.commit fail or time out, and the batch
        # retries), and it is a third of the publishing cost.
        with contextlib.suppress(socket.timeout):
            connection.connection.drain_events(timeout=0)
        encoder = self._encoder(connection)
        frames = FrameBuffer(connection.connection.transport.write)
        for delivery in deliveries:
            if delivery.target not in self._declared:
                frames.flush()  # the declare must not overtake the frames before it
                channel.queue_declare(queue=delivery.target, durable=True, auto_delete=False)
                self._declared.add(delivery.target)
            frames.add(
                encoder.message(
                    delivery.target,
                    delivery.json_body(),
                    message_id=delivery.idempotency_key,
                    job_key=delivery.job_key,
                    fire_at=delivery.fire_at.isoformat(),
                    attempt=delivery.attempt,
                )
            )
        frames.flush()
        connection.connection.bytes_sent += 1  # py-amqp's heartbeat bookkeeping: we did write
        channel.send_method(spec.Tx.Commit)

    def _encoder(self, connection: Connection) -> PublishEncoder:
        """The frame encoder of this channel: its frames depend on the channel id and `frame_max` only."""
        channel: Any = connection.default_channel
        key = (channel.channel_id, channel.connection.frame_max)
        if self._publish_encoder is None or self._publish_encoder[0] != key:
            self._publish_encoder = (key, PublishEncoder(channel.channel_id, channel.connection.frame_max))
        return self._publish_encoder[1]

    def _publish_kombu(
        self, connection: Connection, deliveries: Sequence[Delivery]
    ) -> dict[int, TransportError]:
        producer = Producer(connection.default_channel)
        for delivery in deliveries:
            queue = Queue(delivery.target, routing_key=delivery.target, durable=True)
            producer.publish(
                delivery.json_body(),
                routing_key=delivery.target,
                content_type="application/json",
                content_encoding="utf-8",
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


class _Commit:
    """A published batch whose `tx.commit-ok` has not been read yet."""

    def __init__(
        self,
        transport: RabbitMQTransport,
        connection: Connection,
        deliveries: Sequence[Delivery],
        *,
        may_reconnect: bool,
    ) -> None:
        self._transport = transport
        self._connection = connection
        self._deliveries = deliveries
        self._may_reconnect = may_reconnect
        self._errors: Mapping[int, TransportError] | None = None

    def wait(self) -> Mapping[int, TransportError]:
        if self._errors is None:
            self._errors = self._transport._finish(
                self._connection, self._deliveries, may_reconnect=self._may_reconnect
            )
        return self._errors


def _closed_under_us(exc: Exception) -> bool:
    """The connection was closed by the broker or the network: not a timeout, not a refused channel."""
    if isinstance(exc, amqp.exceptions.RecoverableConnectionError):  # e.g. CONNECTION_FORCED
        return True
    return isinstance(exc, OSError) and not isinstance(exc, TimeoutError)
