"""Publish batches of JSON messages to named RabbitMQ queues: one AMQP transaction per batch, `mandatory`.

`tx.commit-ok` is what lets a caller mark a batch published, and a message the broker cannot route comes
back as a refusal before it, never a silent drop. Queues are declared durable before their first publish.
`start()` returns once `tx.commit` is sent, so the caller works (marks its rows) while the broker commits.
The publishes themselves are written as one buffer of frames (`common/wire/amqp_frames.py`), the body
being the stored JSON text where the message has it. On kombu's filesystem broker (the embedded default)
the same call goes through a kombu Producer.

The engine's `rabbitmq` callbacks (reminders/transports/rabbitmq.py) and the push queue
(delivery/gateway/queue.py) each keep a publisher of their own; refusals come back keyed by message id.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import amqp
from amqp import spec
from django.conf import settings
from kombu import Connection, Producer

from common.amqp.queues import FailoverConnector, broker_urls, queue_arguments, service_queue
from common.wire.amqp_frames import FrameBuffer, PublishEncoder

logger = logging.getLogger(__name__)


class Outgoing(Protocol):
    """One message: its queue, its id (the AMQP `message_id`, what consumers de-duplicate on), the three
    headers every message of this project carries, and its JSON body."""

    @property
    def target(self) -> str: ...
    @property
    def idempotency_key(self) -> str: ...
    @property
    def job_key(self) -> str: ...
    @property
    def fire_at(self) -> datetime: ...
    @property
    def attempt(self) -> int: ...
    def json_body(self) -> bytes: ...


# Why the broker did not take a message, by the message's idempotency key. Empty: it took them all.
Refusals = Mapping[str, str]


class Publishing(Protocol):
    """A batch sent whose outcome is not known yet."""

    def wait(self) -> Refusals:
        """Block until the broker answered; never raises. Waiting again returns the same outcome."""
        ...


@dataclass(frozen=True)
class Published:
    """An outcome known at once (an empty batch, kombu's filesystem broker, a broken connection)."""

    refusals: Refusals

    def wait(self) -> Refusals:
        return self.refusals


class TxPublisher:
    """A connection of its own and one transaction at a time on its channel (a second `start()` in another
    thread waits for the first batch's outcome). Forked children open their own connection."""

    def __init__(self, url: str | Callable[[], str], *, connect_timeout: float) -> None:
        self._url = url
        self._connect_timeout = connect_timeout
        self._connection: Connection | None = None
        self._pid = 0
        self._declared: set[str] = set()
        self._returned: dict[str, str] = {}
        self._lock = threading.Lock()
        self._publish_encoder: tuple[tuple[int, int], PublishEncoder] | None = None
        self._connector = FailoverConnector(self._connection_to)
        self._settle_until = 0.0  # after a cluster node's loss, no publish before this (monotonic)

    @property
    def url(self) -> str:
        return self._url if isinstance(self._url, str) else self._url()

    def deliver(self, messages: Sequence[Outgoing]) -> Refusals:
        return self.start(messages).wait()

    def start(self, messages: Sequence[Outgoing]) -> Publishing:
        """Publish the batch and send `tx.commit`; `wait()` on the result reads `commit-ok`.

        The channel carries one transaction at a time: `start` takes it and the `wait` gives it back.
        """
        if not messages:
            return Published({})
        self._lock.acquire()
        if time.monotonic() < self._settle_until:
            self._lock.release()
            reason = "a broker node was lost: waiting for the cluster to move its queue leaders"
            return Published(dict.fromkeys((m.idempotency_key for m in messages), reason))
        try:
            connection, fresh = self._connect()
            if connection.transport.driver_type == "amqp":
                try:
                    self._publish_transaction(connection, messages)
                except Exception as exc:
                    if fresh or not _closed_under_us(exc):
                        raise
                    connection = self._reconnect(exc)
                    self._publish_transaction(connection, messages)
                    fresh = True
                # Releases the lock when waited for.
                return _Commit(self, connection, messages, may_reconnect=not fresh)
            refusals = self._publish_kombu(connection, messages)
        except Exception as exc:
            refusals = self._broken(messages, exc)
        self._lock.release()
        return Published(refusals)

    def _finish(
        self, connection: Connection, messages: Sequence[Outgoing], *, may_reconnect: bool
    ) -> Refusals:
        """Read `commit-ok` (and any `basic.return` before it), then give the channel back."""
        try:
            try:
                self._commit_ok(connection)
            except Exception as exc:
                if not may_reconnect or not _closed_under_us(exc):
                    raise
                connection = self._reconnect(exc)
                self._publish_transaction(connection, messages)
                self._commit_ok(connection)
            return dict(self._returned)
        except Exception as exc:
            return self._broken(messages, exc)
        finally:
            self._lock.release()

    def _commit_ok(self, connection: Connection) -> None:
        channel: Any = connection.default_channel
        channel.wait(spec.Tx.CommitOk)

    def _reconnect(self, exc: Exception) -> Connection:
        """The broker closed the connection we kept between batches (a restart, a failover, an operator).

        That is not the endpoint failing: the batch goes out again at once on a new connection, once. If
        that fails too, it is a refusal the caller retries. Whatever the old connection had committed
        before it closed is sent again (at-least-once, same message ids).
        """
        if len(broker_urls(self.url)) > 1:
            raise _FailingOver(exc)  # a cluster: see `_broken`
        logger.info("broker connection closed (%r); publishing again on a new one", exc)
        self.close()
        connection, _ = self._connect()
        return connection

    def _broken(self, messages: Sequence[Outgoing], exc: Exception) -> Refusals:
        # Whatever state the connection is in (closed channel, half-committed transaction), the outcome of
        # every message in this batch is unknown: drop the connection and refuse them all.
        logger.warning("publish of %d messages failed: %r", len(messages), exc)
        self.close()
        self._connector.next()  # its node may be gone: another of the URL's brokers first
        if len(broker_urls(self.url)) > 1 and (isinstance(exc, _FailingOver) or _closed_under_us(exc)):
            # A cluster node died. RabbitMQ 3.10 acknowledges, and drops, what a channel opened before its
            # quorum queues have a new leader publishes to them (rabbitmq-server#9208): publish nothing
            # for REMINDERS_BROKER_FAILOVER_SETTLE_SECONDS, then on a connection opened after the election.
            self._settle_until = time.monotonic() + float(
                getattr(settings, "REMINDERS_BROKER_FAILOVER_SETTLE_SECONDS", 5.0)
            )
        reason = f"broker error: {type(exc).__name__}: {exc}"
        return dict.fromkeys((m.idempotency_key for m in messages), reason)

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
            connection = self._connector.connect(self.url)
            self._connection, self._pid = connection, os.getpid()
            if connection.transport.driver_type == "amqp":
                channel: Any = connection.default_channel
                channel.tx_select()
                channel.events["basic_return"].add(self._on_return)
        return self._connection, fresh

    def _connection_to(self, url: str) -> Connection:
        """One of the setting's brokers (`;` separates several: FailoverConnector picks)."""
        return Connection(
            url, connect_timeout=self._connect_timeout, transport_options=_transport_options(url)
        )

    def _on_return(self, exc: Exception, exchange: str, routing_key: str, message: amqp.Message) -> None:
        message_id = message.properties.get("message_id", "")
        self._returned[message_id] = f"returned by broker: {exc} (routing key {routing_key!r})"

    def _publish_transaction(self, connection: Connection, messages: Sequence[Outgoing]) -> None:
        """Publish every message inside the channel's transaction and send `tx.commit` without waiting."""
        channel: Any = connection.default_channel
        self._returned = {}
        # py-amqp's basic_publish polls the socket after every message to notice `connection.blocked`;
        # once per batch is enough (a blocked broker makes tx.commit fail or time out, and the batch
        # retries), and the poll is a large share of the publishing cost.
        with contextlib.suppress(socket.timeout):
            connection.connection.drain_events(timeout=0)
        encoder = self._encoder(connection)
        frames = FrameBuffer(connection.connection.transport.write)
        for message in messages:
            if message.target not in self._declared:
                frames.flush()  # the declare must not overtake the frames before it
                channel.queue_declare(
                    queue=message.target, durable=True, auto_delete=False, arguments=queue_arguments()
                )
                self._declared.add(message.target)
            frames.add(
                encoder.message(
                    message.target,
                    message.json_body(),
                    message_id=message.idempotency_key,
                    job_key=message.job_key,
                    fire_at=message.fire_at.isoformat(),
                    attempt=message.attempt,
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

    def _publish_kombu(self, connection: Connection, messages: Sequence[Outgoing]) -> Refusals:
        producer = Producer(connection.default_channel)
        for message in messages:
            queue = service_queue(message.target)
            producer.publish(
                message.json_body(),
                routing_key=message.target,
                content_type="application/json",
                content_encoding="utf-8",
                delivery_mode=2,
                message_id=message.idempotency_key,
                headers={
                    "job_key": message.job_key,
                    "fire_at": message.fire_at.isoformat(),
                    "attempt": message.attempt,
                },
                declare=[queue] if message.target not in self._declared else [],
            )
            self._declared.add(message.target)
        return {}


def _transport_options(url: str) -> dict[str, Any]:
    if url.startswith("filesystem://"):
        return dict(getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {}))
    if url.startswith(("amqp://", "amqps://", "pyamqp://")):
        # A broker that stops answering must not hang the worker past its lease.
        return {"read_timeout": 30, "write_timeout": 30}
    return {}


class _FailingOver(Exception):
    """The connection to one node of a cluster died: the batch is refused, and retried by the caller."""


class _Commit:
    """A published batch whose `tx.commit-ok` has not been read yet."""

    def __init__(
        self,
        publisher: TxPublisher,
        connection: Connection,
        messages: Sequence[Outgoing],
        *,
        may_reconnect: bool,
    ) -> None:
        self._publisher = publisher
        self._connection = connection
        self._messages = messages
        self._may_reconnect = may_reconnect
        self._refusals: Refusals | None = None

    def wait(self) -> Refusals:
        if self._refusals is None:
            self._refusals = self._publisher._finish(
                self._connection, self._messages, may_reconnect=self._may_reconnect
            )
        return self._refusals


def _closed_under_us(exc: Exception) -> bool:
    """The connection was closed by the broker or the network: not a timeout, not a refused channel."""
    if isinstance(exc, amqp.exceptions.RecoverableConnectionError):  # e.g. CONNECTION_FORCED
        return True
    return isinstance(exc, OSError) and not isinstance(exc, TimeoutError)
