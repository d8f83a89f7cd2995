"""Claiming due occurrences under a lease, and the conditional status changes that end a claim.

Who else might be there: other workers and other beats run the same scan at the same moment. PostgreSQL
settles it with FOR UPDATE SKIP LOCKED (each claimer skips rows another one is locking); SQLite has one
writer at a time (transactions BEGIN IMMEDIATE), so the same steps are serialised. Every status change
that ends a claim is conditional on the lease token, so a worker whose lease expired and was re-claimed
by someone else can no longer write over the newer claim.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.db.models import F

from reminders.models import PRIORITY_MAX, PRIORITY_MIN, Occurrence, OccurrenceStatus
from reminders.retry import RetryPolicy

_TABLE = Occurrence._meta.db_table

# One index range scan per priority level, highest first; each level stops at `now`, so the claim never
# touches future rows (see occurrence_due_idx). SKIP LOCKED sits inside each level so a concurrent claimer's
# locked rows are passed over rather than waited on. The outer LIMIT stops pulling (and locking) early.
_CLAIM_SQL_POSTGRES = f"""
UPDATE {_TABLE} AS o
   SET status = 'claimed', lease_token = %(token)s, claimed_until = %(until)s, attempts = o.attempts + 1
 WHERE o.id IN (
    SELECT d.id
      FROM generate_series({PRIORITY_MAX}, {PRIORITY_MIN}, -1) AS p(level)
     CROSS JOIN LATERAL (
        SELECT id FROM {_TABLE}
         WHERE status = 'scheduled' AND priority = p.level AND next_attempt_at <= %(due)s
         ORDER BY next_attempt_at
         LIMIT %(limit)s
           FOR UPDATE SKIP LOCKED
     ) AS d
     LIMIT %(limit)s)
RETURNING o.id, o.job_id, o.fire_at, o.attempts, o.idempotency_key, o.priority
"""  # noqa: S608 - table and bounds are constants, values are bound parameters


@dataclass(frozen=True)
class ClaimedOccurrence:
    id: int
    job_id: int
    fire_at: datetime
    attempts: int
    idempotency_key: str
    priority: int


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


def occurrences_claim_due(*, now: datetime, limit: int, lease_seconds: int, early_seconds: int = 0) -> Claim:
    """Lease up to `limit` due occurrences, highest priority first, then oldest first."""
    token = uuid.uuid4()
    until = now + timedelta(seconds=lease_seconds)
    due = now + timedelta(seconds=early_seconds)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(_CLAIM_SQL_POSTGRES, {"token": token, "until": until, "due": due, "limit": limit})
            rows = [ClaimedOccurrence(*row) for row in cursor.fetchall()]
    else:
        with transaction.atomic():
            ids = list(
                Occurrence.objects.filter(status=OccurrenceStatus.SCHEDULED, next_attempt_at__lte=due)
                .order_by("-priority", "next_attempt_at")
                .values_list("id", flat=True)[:limit]
            )
            Occurrence.objects.filter(id__in=ids, status=OccurrenceStatus.SCHEDULED).update(
                status=OccurrenceStatus.CLAIMED,
                lease_token=token,
                claimed_until=until,
                attempts=F("attempts") + 1,
            )
            rows = [
                ClaimedOccurrence(*values)
                for values in Occurrence.objects.filter(lease_token=token).values_list(
                    "id", "job_id", "fire_at", "attempts", "idempotency_key", "priority"
                )
            ]
    rows.sort(key=lambda r: (-r.priority, r.fire_at))
    return Claim(token=token, claimed_until=until, occurrences=rows)


def occurrences_mark_delivered(*, token: uuid.UUID, ids: Iterable[int], now: datetime) -> int:
    """Mark delivered the rows this lease still holds; returns how many it still held."""
    return Occurrence.objects.filter(
        id__in=list(ids), lease_token=token, status=OccurrenceStatus.CLAIMED
    ).update(
        status=OccurrenceStatus.DELIVERED,
        delivered_at=now,
        finished_at=now,
        claimed_until=None,
        last_error="",
    )


def occurrences_mark_skipped(*, token: uuid.UUID, ids: Iterable[int], now: datetime, reason: str) -> int:
    return Occurrence.objects.filter(
        id__in=list(ids), lease_token=token, status=OccurrenceStatus.CLAIMED
    ).update(status=OccurrenceStatus.SKIPPED, finished_at=now, claimed_until=None, last_error=reason[:2000])


def occurrences_mark_failed(
    *, token: uuid.UUID, failures: Iterable[Failure], now: datetime, policy: RetryPolicy
) -> int:
    """Send each failed row back to `scheduled` after a backoff, or to `failed` when it cannot succeed."""
    changed = 0
    with transaction.atomic():
        for failure in failures:
            held = Occurrence.objects.filter(
                id=failure.occurrence_id, lease_token=token, status=OccurrenceStatus.CLAIMED
            )
            error = failure.error[:2000]
            if failure.permanent or policy.exhausted(failure.attempts):
                changed += held.update(
                    status=OccurrenceStatus.FAILED, finished_at=now, claimed_until=None, last_error=error
                )
            else:
                retry_at = now + timedelta(seconds=policy.delay(failure.attempts))
                changed += held.update(
                    status=OccurrenceStatus.SCHEDULED,
                    next_attempt_at=retry_at,
                    claimed_until=None,
                    last_error=error,
                )
    return changed


def occurrences_reap_expired(*, now: datetime, policy: RetryPolicy) -> int:
    """Return rows whose lease ran out (their worker died or froze) to `scheduled`, due at once.

    A row whose claims keep expiring (a payload that kills the worker) fails after the maximum attempts
    instead of looping forever. The worker that lost the lease may still be running; its later mark is
    refused because the next claim changes the token.
    """
    expired = Occurrence.objects.filter(status=OccurrenceStatus.CLAIMED, claimed_until__lt=now)
    failed = expired.filter(attempts__gte=policy.max_attempts).update(
        status=OccurrenceStatus.FAILED,
        finished_at=now,
        claimed_until=None,
        last_error="lease expired on the last allowed attempt",
    )
    returned = expired.update(
        status=OccurrenceStatus.SCHEDULED,
        next_attempt_at=now,
        claimed_until=None,
        last_error="lease expired before the delivery was confirmed",
    )
    return failed + returned
