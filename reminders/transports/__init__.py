"""One module per callback transport, and one row per callback type in `TRANSPORTS`.

Adding a callback type is a `CallbackType` value, a module here with its transport and its `data`
serializer, and a row below (healthchecks keeps its channel kinds in a `TRANSPORTS` table the same way).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache

from reminders.models import CallbackType
from reminders.transports.base import (
    CallbackDataSerializer,
    Delivery,
    InFlight,
    Settled,
    Transport,
    TransportError,
)
from reminders.transports.handler import HandlerDataSerializer, HandlerTransport, deliveries_order
from reminders.transports.http import HTTPDataSerializer, HTTPTransport
from reminders.transports.rabbitmq import RabbitMQDataSerializer, RabbitMQTransport

__all__ = [
    "TRANSPORTS",
    "Delivery",
    "InFlight",
    "Settled",
    "Transport",
    "TransportError",
    "TransportRow",
    "get_transport",
    "transport_row",
]


@dataclass(frozen=True)
class TransportRow:
    """What the rest of the code needs to know about one callback type."""

    transport: type[Transport]
    # How many deliveries go out between two lease checks and marks (reminders/engine/dispatch.py).
    chunk_size: int
    # What the API accepts as the callback's `data`, and which of its fields is the job's target.
    data_serializer: type[CallbackDataSerializer]
    # Puts the deliveries due together in the order they should run, before they are cut into chunks.
    order: Callable[[Sequence[Delivery]], Sequence[Delivery]] | None = None
    # Delivered on the lane's threads beside the scan (reminders/engine/lane.py): a slow destination holds
    # its own rows only.
    laned: bool = False


# RabbitMQ publishes a whole chunk in one AMQP transaction; HTTP calls and handlers are slower per item,
# so their chunks are small and marked as they go.
TRANSPORTS: dict[str, TransportRow] = {
    CallbackType.RABBITMQ: TransportRow(RabbitMQTransport, 20000, RabbitMQDataSerializer),
    CallbackType.HTTP: TransportRow(HTTPTransport, 64, HTTPDataSerializer, laned=True),
    CallbackType.HANDLER: TransportRow(HandlerTransport, 50, HandlerDataSerializer, deliveries_order),
}


def transport_row(callback_type: str) -> TransportRow:
    try:
        return TRANSPORTS[callback_type]
    except KeyError:
        raise ValueError(f"unknown callback type {callback_type!r}") from None


@cache
def get_transport(callback_type: str) -> Transport:
    """One instance per process and type, so the RabbitMQ transport keeps its connection between scans."""
    return transport_row(callback_type).transport()
