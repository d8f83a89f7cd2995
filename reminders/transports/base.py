"""The one interface every callback transport implements."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol


@dataclass(frozen=True)
class Delivery:
    """Everything a transport needs to deliver one claimed occurrence."""

    occurrence_id: int
    idempotency_key: str
    job_key: str
    fire_at: datetime
    attempt: int
    target: str
    payload: Any
    secret: str = ""

    def headers(self) -> dict[str, str]:
        """Metadata that travels beside the payload (AMQP headers, HTTP headers)."""
        return {
            "X-Reminders-Job": self.job_key,
            "X-Reminders-Fire-At": self.fire_at.isoformat(),
            "X-Reminders-Attempt": str(self.attempt),
        }


class TransportError(Exception):
    """A delivery that did not happen. `permanent` ones are not retried (a 404, an unknown handler)."""

    def __init__(self, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


class Transport(Protocol):
    def deliver(self, deliveries: Sequence[Delivery]) -> Mapping[int, TransportError]:
        """Deliver every item; return the errors keyed by occurrence id. Absent means accepted.

        Must not raise: a transport that cannot reach its destination returns an error for each item.
        """
        ...
