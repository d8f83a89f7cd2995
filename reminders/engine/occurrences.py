"""Every change of an occurrence's status: claim, end, release, reap, cancel, retry, purge.

Each function makes one of the moves in OCCURRENCE_TRANSITIONS (reminders/models.py) and refuses any
other; the statements of the moves made in SQL (OCCURRENCE_SQL_MOVES) are here too. The moves that end a
claim are conditional on the lease token: a worker whose lease expired and was re-claimed by someone else
can no longer write over the newer claim. Ending a row returns what ended; the caller hands that to the
schedule advance (reminders/engine/claiming.py, the admin), so nothing here looks up. New rows come from
reminders/engine/inserts.py (its idempotent insert, which revives a cancelled fire point, runs ours).

Other workers and beats claim at the same moment: where a claimer can skip locked rows (PostgreSQL's FOR
UPDATE SKIP LOCKED) one statement claims, SQLite has one writer (BEGIN IMMEDIATE). `now` is the database's.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Case, DateTimeField, F, QuerySet, Value, When
from django.utils import timezone

from reminders import queries
from reminders.engine.claim_types import Claim, ClaimedOccurrence, Ended, Failure
from reminders.engine.kick import scan_kick_on_commit
from reminders.engine.retry import RetryPolicy
from reminders.models import OCCURRENCE_TRANSITIONS, PURGEABLE_STATUSES, Occurrence, OccurrenceStatus
from reminders.ops import metrics

logger = logging.getLogger(__name__)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _move(
    rows: QuerySet[Occurrence], *, source: OccurrenceStatus, to: OccurrenceStatus, **fields: Any
) -> int:
    """The one place a status is updated: only along an allowed transition, only from `source`."""
    if to not in OCCURRENCE_TRANSITIONS[source]:
        raise ValueError(f"an occurrence cannot move from {source} to {to}")
    return rows.filter(status=source).update(status=to, **fields)


# --- the moves made in SQL (OCCURRENCE_SQL_MOVES): their statements ------------------------------------

# The claim's columns, and its ranges of rows due before %(aged)s (the anti-starvation share).
_CLAIMED = "id, priority, next_attempt_at"
_AGED_RANGES = queries.due_ranges(
    _CLAIMED, scope="{scope}", until="%(aged)s", limit="%(aged_limit)s", alias="a", lock=True
)
# Lease up to %(limit)s due rows (scheduled -> claimed, new token, attempts + 1) and return them.
# One index range scan per priority level, highest first; each level stops at `now`, so the claim never
# touches future rows (see occurrence_due_idx). SKIP LOCKED sits inside each level so a concurrent claimer's
# locked rows are passed over rather than waited on. The outer LIMIT stops pulling (and locking) early.
# Anti-starvation (seed 003): a share of every batch (%(aged_limit)s) first goes to rows due before
# %(aged)s, oldest first whatever their priority; the rest is strict priority. `= ANY(ARRAY(...))` makes
# the id list an InitPlan, so the UPDATE finds its rows through the primary key whatever the planner
# estimates (`IN (subquery)` was planned as a hash join over a full table scan). `{scope}` is one of the
# CLAIM_SCOPE_* below. fire_at and next_attempt_at (the instant a look-ahead claim holds the row until) come
# back as exact epoch microseconds (cheaper to parse than timestamptz).
CLAIM_DUE = f"""
UPDATE {queries.OCCURRENCE_TABLE} AS o
   SET status = 'claimed', lease_token = %(token)s, claimed_until = %(until)s, attempts = o.attempts + 1
 WHERE o.id = ANY(ARRAY(
    SELECT c.id FROM (
        (SELECT a.id, 0 AS part, a.priority AS level, a.next_attempt_at AS due
           FROM {_AGED_RANGES}
          ORDER BY a.next_attempt_at
          LIMIT %(aged_limit)s)
        UNION ALL
        (SELECT d.id, 1, d.priority, d.next_attempt_at
           FROM {queries.due_ranges(_CLAIMED, scope="{scope}", until="%(due)s", limit="%(limit)s", lock=True)}
          LIMIT %(limit)s)
    ) AS c
     GROUP BY c.id
     ORDER BY min(c.part), max(c.level) DESC, min(c.due), c.id
     LIMIT %(limit)s))
RETURNING o.id, o.job_id, (EXTRACT(EPOCH FROM o.fire_at) * 1000000)::bigint, o.attempts, o.idempotency_key,
          o.priority, (EXTRACT(EPOCH FROM o.next_attempt_at) * 1000000)::bigint
"""  # noqa: S608 - table and bounds are constants, values are bound parameters
# The generic claim takes unthrottled rows only; a throttle policy's claim takes only that policy's rows.
CLAIM_SCOPE_UNTHROTTLED = "throttle_id IS NULL"
CLAIM_SCOPE_THROTTLED = "throttle_id = %(throttle)s"

# Insert a schedule's fire point under its deterministic ids: an existing id is left alone, except that
# a cancelled one is revived (cancelled -> scheduled). `{values}` is one INSERT_IDEMPOTENT_ROW per row.
INSERT_IDEMPOTENT = f"""
INSERT INTO {queries.OCCURRENCE_TABLE} (job_id, fire_at, next_attempt_at, priority, job_version, batch_index,
                                throttle_id, idempotency_key, created_at, status, attempts, last_error)
VALUES {{values}}
ON CONFLICT (idempotency_key) DO UPDATE SET
    status = 'scheduled', next_attempt_at = excluded.next_attempt_at, priority = excluded.priority,
    job_version = excluded.job_version, throttle_id = excluded.throttle_id, attempts = 0,
    finished_at = NULL, last_error = ''
WHERE {queries.OCCURRENCE_TABLE}.status = 'cancelled'
"""  # noqa: S608 - table names are constants, values are bound parameters
INSERT_IDEMPOTENT_ROW = "(%s, %s, %s, %s, %s, %s, %s, %s, %s, 'scheduled', 0, '')"


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
    scope = CLAIM_SCOPE_THROTTLED if throttle_id is not None else CLAIM_SCOPE_UNTHROTTLED
    params = dict(token=token, until=until, due=due, aged=aged, limit=limit, aged_limit=aged_limit)
    return CLAIM_DUE.format(scope=scope), {**params, "throttle": throttle_id}


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
    if connection.features.has_select_for_update_skip_locked:
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


def occurrences_release(*, token: uuid.UUID, ids: Iterable[int], until: datetime | None = None) -> int:
    """Hand rows back untried (lease nearly over, an error, a full HTTP lane), the attempt they were charged
    refunded; with `until`, due again only then (behind the rows due now)."""
    held = Occurrence.objects.filter(id__any=list(ids), lease_token=token)
    later = {} if until is None else {"next_attempt_at": until}
    fields = {"claimed_until": None, "attempts": F("attempts") - 1, **later}
    return _move(held, source=OccurrenceStatus.CLAIMED, to=OccurrenceStatus.SCHEDULED, **fields)


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
