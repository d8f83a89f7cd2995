"""The lease as the scan uses it: claim due rows, then end each one and advance its schedule together.

The status changes themselves are reminders/engine/occurrences.py's (the claim included, re-exported here);
each end returns what ended, and this is the caller that hands it to `schedules_advance` in the same
transaction, so a schedule's point ending and the point after it are committed together. The counts
returned are what the scan reports.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime

from django.db import transaction

from reminders.engine.claim_types import Claim, ClaimedOccurrence, Ended, Failure
from reminders.engine.occurrences import (
    occurrences_claim_due,
    occurrences_expire_leases,
    occurrences_set_delivered,
    occurrences_set_failed,
    occurrences_set_skipped,
)
from reminders.engine.retry import RetryPolicy
from reminders.ops import metrics
from reminders.schedules.lifecycle import schedules_advance

__all__ = [
    "Claim",
    "ClaimedOccurrence",
    "Failure",
    "occurrences_claim_due",
    "occurrences_mark_delivered",
    "occurrences_mark_failed",
    "occurrences_mark_skipped",
    "occurrences_reap_expired",
]


def occurrences_mark_delivered(
    *,
    token: uuid.UUID,
    ids: Iterable[int],
    now: datetime,
    advance: bool = True,
    accepted_at: Sequence[tuple[Sequence[int], datetime]] = (),
) -> int:
    """Mark delivered the rows this lease still holds; returns how many it still held.

    Without `advance` (no row is a schedule's) it is one UPDATE: no transaction, no schedule lookup.
    `accepted_at` gives rows their own acceptance instants (see `occurrences_set_delivered`).
    """
    if not advance:
        return occurrences_set_delivered(token=token, ids=ids, now=now, accepted_at=accepted_at).count
    with transaction.atomic():
        ended = occurrences_set_delivered(token=token, ids=ids, now=now, accepted_at=accepted_at)
        return _advance(ended, now)


def occurrences_mark_skipped(*, token: uuid.UUID, ids: Iterable[int], now: datetime, reason: str) -> int:
    with transaction.atomic():
        return _advance(occurrences_set_skipped(token=token, ids=ids, now=now, reason=reason), now)


def occurrences_mark_failed(
    *, token: uuid.UUID, failures: Iterable[Failure], now: datetime, policy: RetryPolicy
) -> int:
    """Send each failed row back to `scheduled` after a backoff, or to `failed` when it cannot succeed."""
    with transaction.atomic():
        return _advance(occurrences_set_failed(token=token, failures=failures, now=now, policy=policy), now)


def occurrences_reap_expired(*, now: datetime, policy: RetryPolicy) -> int:
    """Return expired leases to `scheduled`, or fail them on their last attempt and move their schedule on."""
    with transaction.atomic():
        ended = occurrences_expire_leases(now=now, policy=policy)
        metrics.occurrences_reaped_failed(ended.ids)
        return _advance(ended, now)


def _advance(ended: Ended, now: datetime) -> int:
    if ended.ids:
        schedules_advance(occurrence_ids=ended.ids, now=now)
    return ended.count
