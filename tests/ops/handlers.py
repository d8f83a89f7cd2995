"""A handler for the ops tests: fails as its payload says, so retried and failed outcomes can be counted."""

from __future__ import annotations

from reminders import handlers
from reminders.transports.base import Delivery, TransportError


@handlers.register("tests.ops.fail")
def fail(delivery: Delivery) -> None:
    raise TransportError("refused by the test handler", permanent=bool(delivery.payload.get("permanent")))
