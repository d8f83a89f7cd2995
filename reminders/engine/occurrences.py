"""Every change of an occurrence's status: claim, end, release, reap, cancel, retry, purge.

Each function makes one of the moves in OCCURRENCE_TRANSITIONS (reminders/models.py) and refuses any
other. The moves that end a claim are conditional on the lease token: a worker whose lease expired and was
re-claimed by someone else can no longer write over the newer claim. Ending a row returns what ended; the
caller hands that to the schedule advance (reminders/engine/claiming.py, the admin), so nothing here looks up.
New rows come from reminders/engine/inserts.py.

Who else might be there when claiming: other workers and beats run the same scan at the same moment.
PostgreSQL settles it with FOR UPDATE SKIP LOCKED; SQLite has one writer at a time (BEGIN IMMEDIATE).
The `now` the scan passes in is the database's time (reminders/engine/clock.py), whichever host it runs on.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Case, DateTimeField, F, QuerySet, Value, When
from django.utils import timezone

from reminders import queries
from reminders.engine.kick import scan_kick_on_commit
from reminders.engine.retry import RetryPolicy
from reminders.models import OCCURRENCE_TRANSITIONS, PURGEABLE_STATUSES, Occurrence, OccurrenceStatus
from reminders.ops import metrics

logger = logging.getLogger(__name__)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


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


def _move(
    rows: QuerySet[Occurrence], *, source: OccurrenceStatus, to: OccurrenceStatus, **fields: Any
) -> int:
    """The one place a status is updated: only along an allowed transition, only from `source`."""
    if to not in OCCURRENCE_TRANSITIONS[source]:
        raise ValueError(f"an occurrence cannot move from {source} to {to}")
    return rows.filter(status=source).update(status=to, **fields)


# --- claim ---------------------------------------------------------------------------------------------


def claim_statement_postgres(
    *,
    token: uuid.UUID,
    until: datetime,
    due: datetime,
    aged: datetime,
    limit: int,
    aged_limit: int,
    throttle_id: int | None = None,
) -> tuple[str, dict[str, Any]]:
    """The claim statement and its parameters, exactly as the engine runs it (EXPLAIN reuses it)."""
    scope = queries.CLAIM_SCOPE_THROTTLED if throttle_id is not None else queries.CLAIM_SCOPE_UNTHROTTLED
    params = {
        "token": token,
        "until": until,
        "due": due,
        "aged": aged,
        "limit": limit,
        "aged_limit": aged_limit,
        "throttle": throttle_id,
    }
    return queries.CLAIM_DUE.format(scope=scope), params


@metrics.timed_claim
def occurrences_claim_due(
    *,
    now: datetime,
    limit: int,
    lease_seconds: int,
    early_seconds: float = 0,
    throttle_id: int | None = None,
) -> Claim:
    """Lease up to `limit` due occurrences: the aged share oldest first, then highest priority, oldest first.

    `early_seconds` takes rows due that much later too: the look-ahead scan holds them until their instant.

    Without `throttle_id` only unthrottled rows are taken; with it, only that policy's rows (the caller,
    reminders/engine/throttling.py, decides how many the policy allows now).
    """
    token = uuid.uuid4()
    until = now + timedelta(seconds=lease_seconds)
    due = now + timedelta(seconds=early_seconds)
    aged = now - timedelta(seconds=settings.REMINDERS_PRIORITY_AGING_SECONDS)
    aged_limit = min(limit, math.ceil(limit * settings.REMINDERS_PRIORITY_AGED_SHARE))
    if connection.vendor == "postgresql":
        sql, params = claim_statement_postgres(
            token=token,
            until=until,
            due=due,
            aged=aged,
            limit=limit,
            aged_limit=aged_limit,
            throttle_id=throttle_id,
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = [
                ClaimedOccurrence(
                    id_,
                    job_id,
                    _EPOCH + timedelta(microseconds=us),
                    attempts,
                    key,
                    priority,
                    _EPOCH + timedelta(microseconds=due_us),
                )
                for id_, job_id, us, attempts, key, priority, due_us in cursor.fetchall()
            ]
    else:
        with transaction.atomic():
            ready = Occurrence.objects.filter(status=OccurrenceStatus.SCHEDULED, throttle_id=throttle_id)
            aged_ids = list(
                ready.filter(next_attempt_at__lte=aged)
                .order_by("next_attempt_at", "id")
                .values_list("id", flat=True)[:aged_limit]
            )
            strict_ids = list(
                ready.filter(next_attempt_at__lte=due)
                .order_by("-priority", "next_attempt_at", "id")
                .values_list("id", flat=True)[:limit]
            )
            ids = list(dict.fromkeys(aged_ids + strict_ids))[:limit]
            _move(
                Occurrence.objects.filter(id__in=ids),
                source=OccurrenceStatus.SCHEDULED,
                to=OccurrenceStatus.CLAIMED,
                lease_token=token,
                claimed_until=until,
                attempts=F("attempts") + 1,
            )
            rows = [
                ClaimedOccurrence(*values)
                for values in Occurrence.objects.held_by(token).values_list(
                    "id", "job_id", "fire_at", "attempts", "idempotency_key", "priority", "next_attempt_at"
                )
            ]
    # Ties go to the lower id, the order rows were inserted in: the events of one trigger in batch order.
    rows.sort(key=lambda r: (-r.priority, r.fire_at, r.id))
    return Claim(token=token, claimed_until=until, occurrences=rows)


# --- end a claim ---------------------------------------------------------------------------------------


def occurrences_set_delivered(
    *,
    token: uuid.UUID,
    ids: Iterable[int],
    now: datetime,
    accepted_at: Sequence[tuple[Sequence[int], datetime]] = (),
) -> Ended:
    """Delivered: the rows this lease still holds.

    `delivered_at` is when the broker or endpoint accepted the row: `now`, or, for rows of several chunks
    marked by one UPDATE, each chunk's own acceptance (`accepted_at`: (ids, instant) pairs) as a CASE in
    the same statement, so gathering marks does not make the earlier chunks read later than they were.
    """
    ids = tuple(ids)
    at: Any = now
    if len({instant for _, instant in accepted_at}) > 1:
        at = Case(
            *(When(id__any=list(part), then=Value(instant)) for part, instant in accepted_at),
            default=Value(now),
            output_field=DateTimeField(),
        )
    count = _move(
        Occurrence.objects.filter(id__any=list(ids), lease_token=token),
        source=OccurrenceStatus.CLAIMED,
        to=OccurrenceStatus.DELIVERED,
        delivered_at=at,
        finished_at=at,
        claimed_until=None,
        last_error="",
    )
    return Ended(count, ids if count else ())


def occurrences_set_skipped(*, token: uuid.UUID, ids: Iterable[int], now: datetime, reason: str) -> Ended:
    """Skipped (past its deadline): the rows this lease still holds."""
    ids = tuple(ids)
    count = _move(
        Occurrence.objects.filter(id__any=list(ids), lease_token=token),
        source=OccurrenceStatus.CLAIMED,
        to=OccurrenceStatus.SKIPPED,
        finished_at=now,
        claimed_until=None,
        last_error=reason[:2000],
    )
    return Ended(count, ids if count else ())


def occurrences_set_failed(
    *, token: uuid.UUID, failures: Iterable[Failure], now: datetime, policy: RetryPolicy
) -> Ended:
    """Each failed row goes back to `scheduled` after a backoff, or to `failed` when it cannot succeed."""
    changed = 0
    ended: list[int] = []
    for failure in failures:
        held = Occurrence.objects.filter(id=failure.occurrence_id, lease_token=token)
        error = failure.error[:2000]
        if failure.permanent or policy.exhausted(failure.attempts):
            count = _move(
                held,
                source=OccurrenceStatus.CLAIMED,
                to=OccurrenceStatus.FAILED,
                finished_at=now,
                claimed_until=None,
                last_error=error,
            )
            if count:
                ended.append(failure.occurrence_id)
        else:
            count = _move(
                held,
                source=OccurrenceStatus.CLAIMED,
                to=OccurrenceStatus.SCHEDULED,
                next_attempt_at=now + timedelta(seconds=policy.delay(failure.attempts)),
                claimed_until=None,
                last_error=error,
            )
        changed += count
    return Ended(changed, tuple(ended))


def occurrences_release(*, token: uuid.UUID, ids: Iterable[int]) -> int:
    """Hand rows back untried (lease nearly over, or an error): the attempt they were charged is refunded."""
    return _move(
        Occurrence.objects.filter(id__any=list(ids), lease_token=token),
        source=OccurrenceStatus.CLAIMED,
        to=OccurrenceStatus.SCHEDULED,
        claimed_until=None,
        attempts=F("attempts") - 1,
    )


def occurrences_expire_leases(*, now: datetime, policy: RetryPolicy) -> Ended:
    """Return rows whose lease ran out (their worker died or froze) to `scheduled`, due at once.

    A row whose claims keep expiring (a payload that kills the worker) fails after the maximum attempts
    instead of looping forever; those are what ended. The worker that lost the lease may still be running;
    its later mark is refused because the next claim changes the token.
    """
    expired = Occurrence.objects.filter(claimed_until__lt=now)
    ended = list(
        expired.filter(status=OccurrenceStatus.CLAIMED, attempts__gte=policy.max_attempts).values_list(
            "id", flat=True
        )
    )
    failed = _move(
        expired.filter(id__any=ended),
        source=OccurrenceStatus.CLAIMED,
        to=OccurrenceStatus.FAILED,
        finished_at=now,
        claimed_until=None,
        last_error="lease expired on the last allowed attempt",
    )
    returned = _move(
        expired,
        source=OccurrenceStatus.CLAIMED,
        to=OccurrenceStatus.SCHEDULED,
        next_attempt_at=now,
        claimed_until=None,
        last_error="lease expired before the delivery was confirmed",
    )
    return Ended(failed + returned, tuple(ended) if failed else ())


def occurrences_skip_superseded(
    *, job_id: int, fire_at: datetime, token: uuid.UUID, now: datetime, reason: str
) -> list[int]:
    """A schedule's fire point a later one superseded (a misfire): its rows waiting or held by this lease
    become `skipped`. Returns their ids."""
    point = Occurrence.objects.filter(job_id=job_id, fire_at=fire_at)
    waiting = list(point.filter(status=OccurrenceStatus.SCHEDULED).values_list("id", flat=True))
    held = list(point.held_by(token).values_list("id", flat=True))
    fields = {"finished_at": now, "claimed_until": None, "last_error": reason[:2000]}
    source, to = OccurrenceStatus.SCHEDULED, OccurrenceStatus.SKIPPED
    _move(Occurrence.objects.filter(id__in=waiting), source=source, to=to, **fields)
    _move(Occurrence.objects.filter(id__in=held), source=OccurrenceStatus.CLAIMED, to=to, **fields)
    return waiting + held


# --- operators and retention ---------------------------------------------------------------------------


def occurrences_cancel(occurrences: QuerySet[Occurrence], *, reason: str = "cancelled") -> int:
    """Cancel those not fired yet (`scheduled`); claimed ones complete."""
    now = timezone.now()
    count = _move(
        occurrences,
        source=OccurrenceStatus.SCHEDULED,
        to=OccurrenceStatus.CANCELLED,
        finished_at=now,
        last_error=reason,
    )
    metrics.occurrences_cancelled(occurrences, finished_at=now, count=count)
    return count


def occurrences_retry_now(occurrences: QuerySet[Occurrence]) -> int:
    """Operator action: make failed or waiting occurrences due now (one more attempt for failed ones)."""
    now = timezone.now()
    fields = {"next_attempt_at": now, "finished_at": None}
    with transaction.atomic():
        ids = list(
            occurrences.filter(status__in=[OccurrenceStatus.FAILED, OccurrenceStatus.SCHEDULED]).values_list(
                "id", flat=True
            )
        )
        rows = Occurrence.objects.filter(id__in=ids)
        # Waiting rows first: the failed ones, once moved, must not be counted again.
        count = _move(rows, source=OccurrenceStatus.SCHEDULED, to=OccurrenceStatus.SCHEDULED, **fields)
        count += _move(rows, source=OccurrenceStatus.FAILED, to=OccurrenceStatus.SCHEDULED, **fields)
    if count:
        scan_kick_on_commit(now)
    return count


def occurrences_purge_old(*, now: datetime | None = None, max_batches: int = 100) -> int:
    """Delete finished occurrences older than the retention period, in bounded batches.

    Each batch is its own short statement, so a large purge never holds a long transaction; a run stops
    after `max_batches` and the next hourly run continues.
    """
    cutoff = (now or timezone.now()) - timedelta(days=settings.REMINDERS_RETENTION_DAYS)
    batch = settings.REMINDERS_PURGE_BATCH
    deleted = 0
    for _ in range(max_batches):
        ids = list(
            Occurrence.objects.filter(status__in=PURGEABLE_STATUSES, finished_at__lt=cutoff).values_list(
                "id", flat=True
            )[:batch]
        )
        if not ids:
            break
        count, _ = Occurrence.objects.filter(id__in=ids).delete()
        deleted += count
    if deleted:
        logger.info("purged %d occurrences finished before %s", deleted, cutoff.isoformat())
    return deleted
