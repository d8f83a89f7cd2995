"""How long to wait before the next attempt, as a small value object (read from settings by default)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from django.conf import settings


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int
    base_seconds: float
    max_seconds: float

    @classmethod
    def from_settings(cls) -> RetryPolicy:
        return cls(
            max_attempts=settings.REMINDERS_MAX_ATTEMPTS,
            base_seconds=settings.REMINDERS_RETRY_BASE_SECONDS,
            max_seconds=settings.REMINDERS_RETRY_MAX_SECONDS,
        )

    def exhausted(self, attempts: int) -> bool:
        return attempts >= self.max_attempts

    def delay(self, attempts: int) -> float:
        """Exponential backoff with "equal jitter": between half and all of base * 2^(attempts-1), capped.

        Half of the delay is fixed so delays still grow attempt over attempt; the random half spreads a
        batch that failed together (a broker outage) so it does not come back as one thundering herd.
        """
        ceiling = min(self.max_seconds, self.base_seconds * (2 ** max(attempts - 1, 0)))
        return ceiling / 2 + random.uniform(0, ceiling / 2)
