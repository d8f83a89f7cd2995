"""Deliver to a registered in-process handler (the trainings app re-checks recipients this way)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from reminders import handlers
from reminders.transports.base import Delivery, InFlight, Settled, TransportError

logger = logging.getLogger(__name__)


class HandlerTransport:
    def start(self, deliveries: Sequence[Delivery]) -> InFlight:
        return Settled(self.deliver(deliveries))

    def deliver(self, deliveries: Sequence[Delivery]) -> Mapping[int, TransportError]:
        errors: dict[int, TransportError] = {}
        for delivery in deliveries:
            fn = handlers.get(delivery.target)
            if fn is None:
                errors[delivery.occurrence_id] = TransportError(
                    f"no handler registered as {delivery.target!r}", permanent=True
                )
                continue
            try:
                fn(delivery)
            except TransportError as exc:
                errors[delivery.occurrence_id] = exc
            except Exception as exc:
                logger.exception(
                    "handler %s failed for occurrence %s", delivery.target, delivery.occurrence_id
                )
                errors[delivery.occurrence_id] = TransportError(f"{type(exc).__name__}: {exc}")
        return errors
