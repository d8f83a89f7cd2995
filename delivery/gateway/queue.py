"""The push queue's publisher: pushes (and dead letters) go to RabbitMQ through a connection of the push
app's own, one AMQP transaction per batch, refusals keyed by the push's idempotency key.

The queue lives on the engine's callback broker (REMINDERS_CALLBACK_BROKER_URL), where the gateway
consumes it; the publishing plumbing is `common.amqp.publisher`, shared with the engine's `rabbitmq`
callbacks but not their connection.
"""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Any, NamedTuple

from django.conf import settings

from common.amqp.publisher import Refusals, TxPublisher
from common.compact_json import json_compact

__all__ = [
    "BATCH_SCHEMA",
    "QueuedPush",
    "Refusals",
    "batch_body",
    "batch_key",
    "batch_pushes",
    "dead_letter_queue_name",
    "push_queue_names",
    "push_queue_publisher",
    "queue_publisher_at",
]

# A message carrying several pushes: `{"schema": BATCH_SCHEMA, "pushes": [<push>, ...]}`, each push the
# document a message of its own would carry. Its `message_id` is `batch_key(first push's key)`.
BATCH_SCHEMA = "trainings.push-batch/1"
_BATCH_HEAD = b'{"schema":"trainings.push-batch/1","pushes":['


def dead_letter_queue_name() -> str:
    return f"{settings.TRAININGS_PUSH_QUEUE}.dead"


def push_queue_names() -> tuple[str, str]:
    """The queues the push gateway declares, by their configured names: pushes and their dead letters."""
    return settings.TRAININGS_PUSH_QUEUE, dead_letter_queue_name()


class QueuedPush(NamedTuple):
    """One message on a push queue: the push's idempotency key is its AMQP `message_id`; the job key,
    instant and attempt of the reminder that made it travel as headers."""

    idempotency_key: str
    job_key: str
    fire_at: datetime
    attempt: int
    target: str  # the queue
    document: Any  # the JSON document, encoded when `body` is None
    body: bytes | None = None  # the document already encoded

    def json_body(self) -> bytes:
        return self.body if self.body is not None else json_compact(self.document)


def _broker_url() -> str:
    return settings.REMINDERS_CALLBACK_BROKER_URL


@cache
def push_queue_publisher() -> TxPublisher:
    """The process's publisher of pushes (a forked child opens a connection of its own)."""
    return TxPublisher(_broker_url, connect_timeout=settings.REMINDERS_HTTP_CONNECT_TIMEOUT)


def queue_publisher_at(url: str) -> TxPublisher:
    """A publisher with a connection of its own, to this broker (the gateway's dead letters, replays);
    the caller closes it."""
    return TxPublisher(url, connect_timeout=settings.REMINDERS_HTTP_CONNECT_TIMEOUT)


def batch_key(first: str) -> str:
    """The `message_id` of a batch whose first push has the idempotency key `first`."""
    return f"batch:{first}"


def batch_body(bodies: list[bytes]) -> bytes:
    """The JSON of a batch message, from its pushes' encoded documents."""
    return b"".join((_BATCH_HEAD, b",".join(bodies), b"]}"))


def batch_pushes(body: Any) -> list[Any] | None:
    """The pushes of a batch message's decoded body, or None when it is a single push (or no push at all:
    the gateway rejects that one). Raises ValueError for a batch whose `pushes` is not a list."""
    if not isinstance(body, dict) or body.get("schema") != BATCH_SCHEMA:
        return None
    pushes = body.get("pushes")
    if not isinstance(pushes, list) or not pushes:
        raise ValueError("push batch without a list of pushes")
    return pushes
