"""The values of a lease: what a claim holds (`Claim`, its `ClaimedOccurrence`s) and what ending it takes
and gives back (`Failure`, `Ended`). The moves that make and end claims are reminders/engine/occurrences.py's.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class ClaimedOccurrence:
    id: int
    job_id: int
    fire_at: datetime
    attempts: int
    idempotency_key: str
    priority: int
    # When it is due (next_attempt_at): its fire time, or later for a retry or a throttled batch's offset.
    # A look-ahead claim holds the row until this instant (reminders/engine/timer.py).
    due_at: datetime


@dataclass(frozen=True)
class Claim:
    token: uuid.UUID
    claimed_until: datetime
    occurrences: list[ClaimedOccurrence]


@dataclass(frozen=True)
class Failure:
    occurrence_id: int
    attempts: int
    error: str
    permanent: bool


@dataclass(frozen=True)
class Ended:
    """What a write changed: `count` rows, of which those in `ids` reached a final state.

    The caller passes `ids` to `schedules_advance`, which looks only at rows that are their schedule's
    current fire point, so `ids` may name rows the write was asked to end (a batch mark does not read back
    which of them it still held).
    """

    count: int = 0
    ids: tuple[int, ...] = ()
