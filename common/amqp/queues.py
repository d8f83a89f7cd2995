"""What kind of queue the service declares, and which of several brokers to connect to.

REMINDERS_QUEUE_TYPE (`classic` or `quorum`) decides the `x-queue-type` of every queue the service
declares itself (the push queue, its dead letters, `rabbitmq` callback queues); Celery's own queues follow
the same setting through Celery's `task_default_queue_type` (config/settings.py). A quorum queue is
replicated over the cluster's nodes and survives the loss of a minority of them; a classic queue lives on
one node. Quorum queues have no per-message priority (RabbitMQ 3.10): the engine never relies on one, it
orders due rows itself (reminders/queries.py), so priorities behave the same on both kinds.

A broker URL setting may name several brokers separated by `;` (kombu's failover syntax). `broker_urls`
splits it; `connect_failover` connects to the first that answers, starting with the one that answered
last, so a process whose node died reconnects to another node without a restart.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from django.conf import settings
from kombu import Connection, Queue

QUEUE_TYPES = ("classic", "quorum")


def queue_type() -> str:
    return str(getattr(settings, "REMINDERS_QUEUE_TYPE", "classic"))


def queue_arguments(kind: str | None = None) -> dict[str, Any]:
    """The `queue.declare` arguments of a service queue of this kind (the setting's by default)."""
    return {"x-queue-type": "quorum"} if (kind or queue_type()) == "quorum" else {}


def service_queue(name: str) -> Queue:
    """A kombu Queue for one of the service's own durable queues, of the configured type."""
    return Queue(name, routing_key=name, durable=True, auto_delete=False, queue_arguments=queue_arguments())


def broker_urls(url: str) -> list[str]:
    """The brokers of a URL setting, in order: `amqp://a//;amqp://b//` names two."""
    return [part.strip() for part in url.split(";") if part.strip()] or [url]


class FailoverConnector:
    """Connects to one of a setting's brokers: the one that answered last first, then the others in order.

    `make(url)` builds the kombu Connection (options of the caller). Each broker gets one attempt per
    round; the last error is raised when none answers.
    """

    def __init__(self, make: Callable[[str], Connection]) -> None:
        self._make = make
        self._turn = 0

    def connect(self, url: str) -> Connection:
        urls = broker_urls(url)
        error: Exception | None = None
        for step in range(len(urls)):
            index = (self._turn + step) % len(urls)
            connection = self._make(urls[index])
            try:
                # One broker alone gets kombu's one retry (as before failover); several get one try each.
                connection.ensure_connection(max_retries=1 if len(urls) == 1 else 0)
            except Exception as exc:  # next broker
                error = exc
                _release(connection)
                continue
            self._turn = index
            return connection
        assert error is not None
        raise error

    def next(self) -> None:
        """The broker in use failed: the next connect starts with the following one."""
        self._turn += 1


def _release(connection: Connection) -> None:
    with contextlib.suppress(Exception):  # never connected: nothing to close
        connection.release()
