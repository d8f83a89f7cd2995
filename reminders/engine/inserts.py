"""New `scheduled` occurrences: the bulk insert (COPY on PostgreSQL) and the idempotent insert of a
schedule's fire points. Both run inside the caller's transaction; every later move of a row is
reminders/engine/occurrences.py's, the idempotent insert's revival of a cancelled row included (its
statement is there).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.utils import timezone

from reminders import queries
from reminders.engine.dialect import streams_copy
from reminders.engine.occurrences import INSERT_IDEMPOTENT, INSERT_IDEMPOTENT_ROW
from reminders.models import Job, Occurrence, OccurrenceStatus, new_idempotency_key


def batch_offset(job: Job, index: int) -> timedelta:
    """How far after its instant event `index` of a batch is due: spread over the policy's window, if any."""
    window = job.throttle.window_seconds if job.throttle is not None else None
    if not window or job.batch_size <= 1:
        return timedelta(0)
    return timedelta(seconds=window * index / job.batch_size)


def occurrences_insert(rows: Sequence[tuple[Job, datetime, int]]) -> int:
    """Insert new `scheduled` occurrences, one per (job, instant, batch index), each with a fresh key.

    On PostgreSQL the rows are streamed with COPY (bulk scheduling is measured by the benchmark); either
    way it runs inside the caller's transaction.
    """
    if not rows:
        return 0
    now = timezone.now()
    if streams_copy():
        scheduled = OccurrenceStatus.SCHEDULED.value
        spread: dict[int, bool] = {}  # per job (by identity): are its batch's events spread over a window?
        with connection.cursor() as cursor:
            raw = cursor.cursor  # the psycopg 3 cursor under Django's wrapper
            with raw.copy(queries.COPY_OCCURRENCES) as copy:
                for job, instant, index in rows:
                    spreads = spread.get(id(job))
                    if spreads is None:
                        spreads = spread[id(job)] = batch_offset(job, 1) != timedelta(0)
                    copy.write_row(
                        (job.pk, instant, instant + batch_offset(job, index) if spreads else instant,
                         job.priority, scheduled, 0, "", new_idempotency_key(), job.version, index,
                         job.throttle_id, now)
                    )  # fmt: skip
        return len(rows)
    Occurrence.objects.bulk_create(
        [
            Occurrence(
                job=job,
                fire_at=instant,
                next_attempt_at=instant + batch_offset(job, index),
                priority=job.priority,
                job_version=job.version,
                batch_index=index,
                throttle_id=job.throttle_id,
                idempotency_key=new_idempotency_key(),
            )
            for job, instant, index in rows
        ],
        batch_size=2000,
    )
    return len(rows)


def occurrences_insert_idempotent(rows: Sequence[tuple[Any, ...]], *, chunk: int = 500) -> None:
    """INSERT rows keyed by a deterministic idempotency key; existing ids are left alone, cancelled revived.

    Two workers inserting the same id at once: PostgreSQL makes the second wait for the first and then
    take the conflict branch; SQLite has one writer. So a fire point exists at most once.
    """
    with connection.cursor() as cursor:
        for start in range(0, len(rows), chunk):
            part = rows[start : start + chunk]
            values = ", ".join([INSERT_IDEMPOTENT_ROW] * len(part))
            sql = INSERT_IDEMPOTENT.format(values=values)
            cursor.execute(sql, [_db_value(value) for row in part for value in row])


def _db_value(value: Any) -> Any:
    return connection.ops.adapt_datetimefield_value(value) if isinstance(value, datetime) else value
