"""One module per callback transport, behind `Transport.deliver()`; `get_transport` picks by callback type."""

from __future__ import annotations

from functools import cache

from reminders.models import CallbackType
from reminders.transports.base import Delivery, InFlight, Settled, Transport, TransportError

__all__ = ["Delivery", "InFlight", "Settled", "Transport", "TransportError", "get_transport"]


@cache
def get_transport(callback_type: str) -> Transport:
    """One instance per process and type, so the RabbitMQ transport keeps its connection between scans."""
    if callback_type == CallbackType.RABBITMQ:
        from reminders.transports.rabbitmq import RabbitMQTransport

        return RabbitMQTransport()
    if callback_type == CallbackType.HTTP:
        from reminders.transports.http import HTTPTransport

        return HTTPTransport()
    if callback_type == CallbackType.HANDLER:
        from reminders.transports.handler import HandlerTransport

        return HandlerTransport()
    raise ValueError(f"unknown callback type {callback_type!r}")
