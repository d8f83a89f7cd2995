"""A handler for the ops tests: fails as its payload says, so retried and failed outcomes can be counted."""

from __future__ import annotations

from reminders.engine import handler_registry
from reminders.transports.base import Delivery, TransportError


@handler_registry.register("tests.ops.fail")
def fail(delivery: Delivery) -> None:
    raise TransportError("refused by the test handler", permanent=bool(delivery.payload.get("permanent")))
