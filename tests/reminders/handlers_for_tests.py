"""In-process handlers registered for the engine's tests (the registry only accepts registered names)."""

from __future__ import annotations

from reminders import handlers
from reminders.transports.base import Delivery, TransportError

calls: list[Delivery] = []
fail_next: list[TransportError | Exception] = []


@handlers.register("tests.record")
def record(delivery: Delivery) -> None:
    if fail_next:
        raise fail_next.pop(0)
    calls.append(delivery)
