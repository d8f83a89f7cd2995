"""The claims' cost does not grow with future rows: PostgreSQL plans them as bounded index range scans."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from django.db import connection
from django.utils import timezone

from reminders.engine.occurrences import claim_statement_postgres
from reminders.models import Job, Occurrence
from tests.factories import JobFactory, ThrottlePolicyFactory

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def _future_rows(job: Job, count: int, throttle_id: int | None) -> None:
    now = timezone.now()
    Occurrence.objects.bulk_create(
        [
            Occurrence(
                job=job,
                fire_at=now + dt.timedelta(minutes=1 + i),
                next_attempt_at=now + dt.timedelta(minutes=1 + i),
                priority=i % 10,
                throttle_id=throttle_id,
            )
            for i in range(count)
        ],
        batch_size=5000,
    )


def _plan(throttle_id: int | None) -> str:
    now = timezone.now()
    sql, params = claim_statement_postgres(
        token=uuid.uuid4(),
        until=now,
        due=now,
        aged=now - dt.timedelta(seconds=60),
        limit=1000,
        aged_limit=100,
        throttle_id=throttle_id,
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE reminders_occurrence")
        cursor.execute("EXPLAIN (ANALYZE, FORMAT TEXT) " + sql, params)
        return "\n".join(row[0] for row in cursor.fetchall())


def test_the_claims_use_their_partial_indexes_and_read_no_future_rows() -> None:
    policy = ThrottlePolicyFactory()
    _future_rows(JobFactory(), 20000, None)
    _future_rows(JobFactory(throttle=policy), 20000, policy.id)

    plain = _plan(None)
    assert "occurrence_due_idx" in plain
    assert "Seq Scan on reminders_occurrence" not in plain
    throttled = _plan(policy.id)
    assert "occurrence_throttled_due_idx" in throttled
    assert "Seq Scan on reminders_occurrence" not in throttled
    # Nothing is due: every index scan stops at its first (future) entry.
    for plan in (plain, throttled):
        # The UPDATE reaches the claimed rows through the primary key, never a scan of the table.
        assert "Index Scan using reminders_occurrence_pkey" in plan, plan
        assert "Seq Scan" not in plan, plan
        for line in plan.splitlines():
            if "Index Scan using occurrence_" in line:
                assert "actual" in line and "rows=0 " in line.split("actual")[1], plan
        assert "Rows Removed by Filter" not in plan
