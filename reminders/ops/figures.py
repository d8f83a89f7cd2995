"""The operator's status figures (is the scheduler on time, how much is due, what failed, are workers alive),
and the per-minute scan record they partly come from.

Every query is bounded, so the page costs the same with 5 M or 30 M rows in the occurrence table; its
statements are in reminders/queries.py, the comment above each naming the index that serves it (EXPLAIN
output: bench/status_explain.txt, timing: `python -m bench.status`). On SQLite (the embedded default) the
same figures come from plain ORM queries.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import QuerySet
from django.utils import timezone

from reminders import queries
from reminders.engine.dialect import speaks_postgresql
from reminders.engine.dispatch import ScanResult
from reminders.engine.occurrences import occurrences_cancel, occurrences_retry_now
from reminders.models import RETRYING, Occurrence, OccurrenceStatus, ScanMinute
from reminders.schedules.chain import schedules_advance

# Counts stop here: past it the page says "at least" (a backlog that large is the news, not its digits).
COUNT_CAP = 10_000
# Lateness percentiles over at most this many of the window's latest deliveries (the sample size is shown).
LATENESS_SAMPLE = 5_000
# Failures grouped over at most this many of the last 24 h's latest failed rows, and this many groups.
FAILURE_SAMPLE = 5_000
FAILURE_GROUPS = 20
ERROR_PREFIX = queries.ERROR_PREFIX


def occurrence_state(status: str, attempts: int) -> str:
    """What a person reads: a scheduled row that already failed an attempt is "retrying", not "scheduled"."""
    if status == OccurrenceStatus.SCHEDULED and attempts > 0:
        return f"retrying (after {attempts} attempt{'s' if attempts > 1 else ''})"
    return str(status)


# --- The scan record (written by every scan run) ------------------------------------------------------


def scan_record(*, result: ScanResult, worker: str, at: datetime | None = None) -> None:
    """Add one scan run's totals to its minute's row (one upsert; concurrent workers add, never overwrite)."""
    at = at or timezone.now()
    minute = at.replace(second=0, microsecond=0)
    as_db = connection.ops.adapt_datetimefield_value  # on SQLite: the text the ORM compares with
    params: list[Any] = [
        as_db(minute),
        result.claimed,
        result.delivered,
        result.retried,
        result.failed,
        as_db(at),
        worker[:200],
    ]
    with connection.cursor() as cursor:
        cursor.execute(queries.SCAN_RECORD, params)


def scan_minutes_purge(*, before: datetime) -> int:
    """Retention for the scan record (called with the occurrence purge)."""
    deleted, _ = ScanMinute.objects.filter(minute__lt=before).delete()
    return deleted


# --- The figures ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Lateness:
    window: str
    sample: int
    p50: float | None  # seconds
    p99: float | None


@dataclass(frozen=True)
class FailureGroup:
    error: str
    count: int
    last_at: datetime


@dataclass(frozen=True)
class RetryGroup:
    error: str
    count: int
    oldest_fire_at: datetime
    next_attempt_at: datetime


@dataclass(frozen=True)
class MinutePoint:
    minute: datetime
    delivered: int
    failed: int


@dataclass
class EngineStatus:
    now: datetime
    due: int
    due_capped: bool
    in_flight: int
    oldest_due_at: datetime | None
    lateness: list[Lateness] = field(default_factory=list)
    per_minute: list[MinutePoint] = field(default_factory=list)
    failures: list[FailureGroup] = field(default_factory=list)
    failures_sampled: bool = False
    retrying: list[RetryGroup] = field(default_factory=list)
    retrying_sampled: bool = False
    last_scan_at: datetime | None = None
    last_worker: str = ""

    @property
    def oldest_due_age(self) -> timedelta | None:
        return None if self.oldest_due_at is None else self.now - self.oldest_due_at


def engine_status(*, now: datetime | None = None) -> EngineStatus:
    now = now or timezone.now()
    due, capped = due_count(now=now)
    status = EngineStatus(
        now=now,
        due=due,
        due_capped=capped,
        in_flight=in_flight_count(),
        oldest_due_at=oldest_due_at(now=now),
    )
    status.lateness = [
        lateness(since=now - timedelta(minutes=5), window="last 5 min"),
        lateness(since=now - timedelta(hours=1), window="last hour"),
    ]
    status.per_minute = deliveries_per_minute(now=now)
    status.failures, status.failures_sampled = failures_by_error(since=now - timedelta(hours=24))
    status.retrying, status.retrying_sampled = retrying_by_error()
    last = ScanMinute.objects.order_by("-minute").first()  # primary key, backwards: one row
    if last is not None:
        status.last_scan_at, status.last_worker = last.last_scan_at, last.last_worker
    return status


def status_queries(*, now: datetime) -> dict[str, tuple[str, dict[str, Any]]]:
    """Every PostgreSQL statement of the page with its parameters (the bench EXPLAINs exactly these)."""
    return {
        "due_count": (queries.DUE_COUNT, {"now": now, "cap": COUNT_CAP}),
        "oldest_due": (queries.OLDEST_DUE, {"now": now}),
        "in_flight": (queries.IN_FLIGHT, {"cap": COUNT_CAP}),
        "lateness_1h": (queries.LATENESS, {"since": now - timedelta(hours=1), "sample": LATENESS_SAMPLE}),
        "failures_24h": (
            queries.FAILURES,
            {"since": now - timedelta(hours=24), "sample": FAILURE_SAMPLE, "groups": FAILURE_GROUPS},
        ),
        "retrying": (queries.RETRYING, {"sample": FAILURE_SAMPLE, "groups": FAILURE_GROUPS}),
        # The ORM reads of the scan record, written out: both on the primary key (minute).
        "per_minute": (queries.SCAN_MINUTES, {"start": now - timedelta(minutes=59), "end": now}),
        "last_scan": (queries.SCAN_LAST, {}),
    }


def _one(sql: str, params: dict[str, Any]) -> tuple[Any, ...]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    assert row is not None
    return tuple(row)


def due_count(*, now: datetime) -> tuple[int, bool]:
    if speaks_postgresql():
        (count,) = _one(queries.DUE_COUNT, {"now": now, "cap": COUNT_CAP})
    else:
        count = Occurrence.objects.filter(status=OccurrenceStatus.SCHEDULED, next_attempt_at__lte=now).count()
        count = min(count, COUNT_CAP)
    return int(count), count >= COUNT_CAP


def oldest_due_at(*, now: datetime) -> datetime | None:
    if speaks_postgresql():
        (oldest,) = _one(queries.OLDEST_DUE, {"now": now})
        return oldest
    first = (
        Occurrence.objects.filter(status=OccurrenceStatus.SCHEDULED, next_attempt_at__lte=now)
        .order_by("next_attempt_at")
        .values_list("next_attempt_at", flat=True)
        .first()
    )
    return first


def in_flight_count() -> int:
    if speaks_postgresql():
        return int(_one(queries.IN_FLIGHT, {"cap": COUNT_CAP})[0])
    return Occurrence.objects.filter(status=OccurrenceStatus.CLAIMED)[:COUNT_CAP].count()


def _percentile(sorted_values: list[float], fraction: float) -> float:
    """Linear interpolation, as PostgreSQL's percentile_cont."""
    position = (len(sorted_values) - 1) * fraction
    low, high = math.floor(position), math.ceil(position)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def lateness(*, since: datetime, window: str) -> Lateness:
    """Delivered time minus fire time, over the window's latest LATENESS_SAMPLE deliveries."""
    if speaks_postgresql():
        p50, p99, count = _one(queries.LATENESS, {"since": since, "sample": LATENESS_SAMPLE})
        return Lateness(window, int(count), _float(p50), _float(p99))
    rows = (
        Occurrence.objects.filter(status=OccurrenceStatus.DELIVERED, finished_at__gte=since)
        .order_by("-finished_at")
        .values_list("delivered_at", "fire_at")[:LATENESS_SAMPLE]
    )
    values = sorted((delivered - fire).total_seconds() for delivered, fire in rows if delivered)
    if not values:
        return Lateness(window, 0, None, None)
    return Lateness(window, len(values), _percentile(values, 0.5), _percentile(values, 0.99))


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def deliveries_per_minute(*, now: datetime, minutes: int = 60) -> list[MinutePoint]:
    """The last `minutes` minutes from the scan record (primary key range), zeros where no scan ran."""
    end = now.replace(second=0, microsecond=0)
    start = end - timedelta(minutes=minutes - 1)
    rows = {row.minute: row for row in ScanMinute.objects.filter(minute__gte=start, minute__lte=end)}
    points = []
    for i in range(minutes):
        minute = start + timedelta(minutes=i)
        row = rows.get(minute)
        points.append(MinutePoint(minute, row.delivered if row else 0, row.failed if row else 0))
    return points


def failures_by_error(*, since: datetime) -> tuple[list[FailureGroup], bool]:
    """Failed occurrences since `since`, grouped by the start of their error; True if the sample was full."""
    params: dict[str, Any] = {"since": since, "sample": FAILURE_SAMPLE, "groups": FAILURE_GROUPS}
    with connection.cursor() as cursor:
        cursor.execute(queries.FAILURES, params)
        rows = cursor.fetchall()
    groups = [FailureGroup(error or "", int(n), _aware(last_at)) for error, n, last_at in rows]
    return groups, sum(g.count for g in groups) >= FAILURE_SAMPLE


def retrying_by_error() -> tuple[list[RetryGroup], bool]:
    """Occurrences waiting for another attempt, grouped by the start of their last error."""
    with connection.cursor() as cursor:
        cursor.execute(queries.RETRYING, {"sample": FAILURE_SAMPLE, "groups": FAILURE_GROUPS})
        rows = cursor.fetchall()
    groups = [RetryGroup(error or "", int(n), _aware(first), _aware(nxt)) for error, n, first, nxt in rows]
    return groups, sum(g.count for g in groups) >= FAILURE_SAMPLE


def retrying_matching(*, error: str) -> QuerySet[Occurrence]:
    # occurrence_retrying_idx, then the prefix filter on those rows.
    return Occurrence.objects.filter(RETRYING, last_error__startswith=error)


def retrying_retry_now(*, error: str) -> int:
    """The status page's "Retry now" on a retrying group: due at once, their attempts kept."""
    return occurrences_retry_now(retrying_matching(error=error))


def retrying_cancel(*, error: str, reason: str) -> int:
    """The status page's "Cancel" on a retrying group (at most FAILURE_SAMPLE rows, as shown); a schedule's
    cancelled fire moves the schedule on to its next."""
    with transaction.atomic():
        ids = list(retrying_matching(error=error).values_list("id", flat=True)[:FAILURE_SAMPLE])
        count = occurrences_cancel(Occurrence.objects.filter(id__in=ids), reason=reason)
        schedules_advance(occurrence_ids=ids, now=timezone.now())
    return count


def _aware(value: Any) -> datetime:
    if isinstance(value, str):  # SQLite returns an aggregate of a datetime column as text
        value = datetime.fromisoformat(value)
    if timezone.is_naive(value):
        value = timezone.make_aware(value, UTC)
    return value


def failures_retry(*, error: str, since: datetime) -> int:
    """The status page's "retry": failed occurrences since `since` whose error starts with `error`."""
    return occurrences_retry_now(failed_matching(error=error, since=since))


def failed_matching(*, error: str, since: datetime) -> QuerySet[Occurrence]:
    # occurrence_failed_idx range on finished_at, then the prefix filter on those rows.
    return Occurrence.objects.filter(
        status=OccurrenceStatus.FAILED, finished_at__gte=since, last_error__startswith=error
    )
