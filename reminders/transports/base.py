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


class InFlight(Protocol):
    """A delivery that has been sent and whose outcome is not known yet."""

    def wait(self) -> Mapping[int, TransportError]:
        """Block until the outcome is known; the same errors `Transport.deliver` would return.

        Must not raise. Waiting again returns the same outcome.
        """
        ...


@dataclass(frozen=True)
class Settled:
    """An outcome known at once: what a transport without a separate acknowledgement returns."""

    errors: Mapping[int, TransportError]

    def wait(self) -> Mapping[int, TransportError]:
        return self.errors


class Transport(Protocol):
    def deliver(self, deliveries: Sequence[Delivery]) -> Mapping[int, TransportError]:
        """Deliver every item; return the errors keyed by occurrence id. Absent means accepted.

        Must not raise: a transport that cannot reach its destination returns an error for each item.
        """
        ...

    def start(self, deliveries: Sequence[Delivery]) -> InFlight:
        """Send every item and return before the destination has acknowledged them, where it can.

        `deliver(d)` is `start(d).wait()`. The dispatcher does its database work between the two
        (reminders/dispatch.py, `_Pipeline`). The caller waits for one `InFlight` before it starts the next
        on the same transport. Must not raise.
        """
        ...
