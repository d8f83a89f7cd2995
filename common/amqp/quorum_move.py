"""Move a classic queue's messages into a quorum queue of the same name (docs/operations/cluster.md).

A queue's type is fixed when it is declared, so a classic queue becomes a quorum queue by a new queue and
a move: its messages go to `<name>.to-quorum` (a quorum queue), the classic queue is deleted once empty,
`<name>` is declared again as a quorum queue, and the messages move back. Each move publishes a batch in
one AMQP transaction and acks the originals only after `tx.commit-ok`, so a message is never only in
flight: a crash repeats at most one batch (same `message_id`, which every consumer of these queues
de-duplicates on), and running the move again finishes it from wherever it stopped.

Body and properties (message id, headers, persistence, content type) travel unchanged. Run it with the
queue's consumers and publishers stopped (a few seconds per ten thousand messages).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import amqp

from common.amqp.queues import broker_urls, queue_arguments

BATCH = 500


@dataclass(frozen=True)
class Moved:
    queue: str
    was: str  # "classic", "quorum" (nothing to do) or "missing"
    messages: int  # messages now in the quorum queue that were moved there


def staging_name(queue: str) -> str:
    return f"{queue}.to-quorum"


def queue_to_quorum(connect: Callable[[], amqp.Connection], queue: str) -> Moved:
    """Make `queue` a quorum queue holding every message it held (see the module's docstring)."""
    staging = staging_name(queue)
    with contextlib.closing(connect()) as conn:
        kind = _kind(conn, queue)
        staged = _kind(conn, staging)
        if kind == "quorum" and staged == "missing":
            return Moved(queue, "quorum", 0)
        if kind == "classic":
            _declare_quorum(conn, staging)
            while True:
                _move(conn, queue, staging)
                try:
                    conn.channel().queue_delete(queue, if_empty=True)
                    break
                except amqp.exceptions.PreconditionFailed:  # a message arrived meanwhile: move it too
                    continue
        _declare_quorum(conn, queue)
        moved = _move(conn, staging, queue) if _kind(conn, staging) != "missing" else 0
        # Quorum queues refuse `if_empty`; nothing publishes to the staging queue, and it is empty now.
        channel = conn.channel()
        with contextlib.suppress(amqp.exceptions.NotFound):
            declared: Any = channel.queue_declare(staging, passive=True)
            if declared.message_count == 0:
                channel.queue_delete(staging)
    return Moved(queue, kind, moved)


def _kind(conn: amqp.Connection, queue: str) -> str:
    """classic, quorum or missing: a passive declare says whether it exists, a quorum declare whether it
    is one (RabbitMQ refuses a declare whose `x-queue-type` differs, PRECONDITION_FAILED)."""
    try:
        conn.channel().queue_declare(queue, passive=True)
    except amqp.exceptions.NotFound:
        return "missing"
    try:
        _declare_quorum(conn, queue)
    except amqp.exceptions.PreconditionFailed:
        return "classic"
    return "quorum"


def _declare_quorum(conn: amqp.Connection, queue: str) -> None:
    conn.channel().queue_declare(queue, durable=True, auto_delete=False, arguments=queue_arguments("quorum"))


def _move(conn: amqp.Connection, source: str, target: str) -> int:
    """Every message of `source` into `target`, a transaction per batch, originals acked after commit."""
    reader = conn.channel()
    writer = conn.channel()
    writer.tx_select()
    moved = 0
    while True:
        batch: list[amqp.Message] = []
        while len(batch) < BATCH:
            message = reader.basic_get(source, no_ack=False)
            if message is None:
                break
            batch.append(message)
        if not batch:
            break
        for message in batch:
            writer.basic_publish(_copy(message), exchange="", routing_key=target, mandatory=True)
        writer.tx_commit()
        reader.basic_ack(int(batch[-1].delivery_tag or 0), multiple=True)
        moved += len(batch)
    reader.close()
    writer.close()
    return moved


def _copy(message: amqp.Message) -> amqp.Message:
    """The same body and properties, without the delivery count a quorum queue adds (the broker's, not the
    publisher's: it counts deliveries from the queue it came from)."""
    properties = dict(message.properties)
    headers = dict(properties.get("application_headers") or {})
    if headers.pop("x-delivery-count", None) is not None:
        properties["application_headers"] = headers
    return amqp.Message(message.body, **properties)


def connect_first(url: str) -> amqp.Connection:
    """A py-amqp connection to the first of the URL's brokers (`;`-separated) that answers."""
    error: Exception | None = None
    for one in broker_urls(url):
        parts = urlsplit(one)
        conn = amqp.Connection(
            host=f"{parts.hostname or '127.0.0.1'}:{parts.port or 5672}",
            userid=unquote(parts.username or "guest"),
            password=unquote(parts.password or "guest"),
            virtual_host=unquote(parts.path[1:]) if len(parts.path) > 1 else "/",
            connect_timeout=5,
            ssl=parts.scheme == "amqps",
        )
        try:
            conn.connect()
        except Exception as exc:  # the next one
            error = exc
            continue
        return conn
    assert error is not None
    raise error
