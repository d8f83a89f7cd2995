"""The scrape-time backlog query stays bounded: index range scans that stop at now(), no full scans."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.utils import timezone

from reminders.models import Occurrence
from reminders.ops.db_gauges import due_backlog
from reminders.queries import DUE_BACKLOG
from tests.factories import JobFactory, ThrottlePolicyFactory

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def _rows(count: int, *, start: dt.datetime, throttle_id: int | None) -> None:
    job = JobFactory()
    Occurrence.objects.bulk_create(
        [
            Occurrence(
                job=job,
                fire_at=start + dt.timedelta(seconds=i),
                next_attempt_at=start + dt.timedelta(seconds=i),
                priority=i % 10,
                throttle_id=throttle_id,
            )
            for i in range(count)
        ],
        batch_size=5000,
    )


def test_it_reads_due_rows_through_the_partial_indexes_and_never_the_future_ones() -> None:
    now = timezone.now()
    policy = ThrottlePolicyFactory()
    _rows(20000, start=now + dt.timedelta(minutes=1), throttle_id=None)
    _rows(20000, start=now + dt.timedelta(minutes=1), throttle_id=policy.id)
    _rows(30, start=now - dt.timedelta(seconds=100), throttle_id=None)
    _rows(7, start=now - dt.timedelta(seconds=50), throttle_id=policy.id)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE reminders_occurrence")
        cursor.execute("EXPLAIN (ANALYZE, FORMAT TEXT) " + DUE_BACKLOG, {"cap": 100000})
        plan = "\n".join(row[0] for row in cursor.fetchall())

    assert "Seq Scan on reminders_occurrence" not in plan, plan
    assert "occurrence_due_idx" in plan, plan
    assert "occurrence_throttled_due_idx" in plan, plan
    # Every index scan returns only due rows: at most 30 (unthrottled) or 7 (throttled) per level.
    for line in plan.splitlines():
        if "Index" in line and "reminders_occurrence" in line:
            actual = line.split("actual time=")[1].split("rows=")[1].split()[0]
            assert int(actual) <= 30, line

    assert due_backlog() == {False: (30, pytest.approx(100, abs=30)), True: (7, pytest.approx(50, abs=30))}


def test_the_backlog_is_capped_per_priority_level(settings: pytest.FixtureRequest) -> None:
    settings.REMINDERS_METRICS_BACKLOG_CAP = 2
    _rows(50, start=timezone.now() - dt.timedelta(seconds=100), throttle_id=None)  # 5 per level

    count, _age = due_backlog()[False]

    assert count == 20  # 2 per level, 10 levels
