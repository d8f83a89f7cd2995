"""Several hosts, one clock (issue 16, item 6): the scan judges time by PostgreSQL's clock, not its host's.

Here the host's clock is an hour ahead inside this process (Django's `timezone.now`); the database keeps
the real time. tests/faults/test_shifted_clock.py runs the same against real worker processes whose whole
clock is shifted.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest
from django.db import connection
from django.utils import timezone

from reminders.engine.clock import DbClock
from reminders.engine.dispatch import occurrences_dispatch_batch, occurrences_dispatch_for
from reminders.models import Occurrence, OccurrenceStatus, ThrottlePolicy
from tests.factories import JobFactory, OccurrenceFactory, ThrottlePolicyFactory

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

AHEAD = dt.timedelta(hours=1)


def _db_now() -> dt.datetime:
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        return cursor.fetchone()[0]


@pytest.fixture
def host_clock_ahead(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    real_now = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: real_now() + AHEAD)
    assert timezone.now() - _db_now() > AHEAD - dt.timedelta(minutes=1)
    yield


def test_it_reads_the_database_clock_and_never_runs_ahead_of_it(host_clock_ahead: None) -> None:
    before = _db_now()
    clock = DbClock.read()
    assert before <= clock.at <= _db_now()
    assert before <= clock.now() <= _db_now()


def test_it_claims_nothing_the_database_does_not_see_due(host_clock_ahead: None) -> None:
    row = OccurrenceFactory(fire_at=_db_now() + dt.timedelta(minutes=10))

    result = occurrences_dispatch_batch()

    assert result.claimed == 0
    row.refresh_from_db()
    assert (row.status, row.attempts) == (OccurrenceStatus.SCHEDULED, 0)


def test_its_reaper_leaves_a_lease_the_database_sees_live(host_clock_ahead: None) -> None:
    token = "5f0c3a52-8a51-4b8b-9d4e-0d2b8f5a0c11"
    row = OccurrenceFactory(
        status=OccurrenceStatus.CLAIMED,
        attempts=1,
        lease_token=token,
        claimed_until=_db_now() + dt.timedelta(seconds=60),
        fire_at=_db_now() - dt.timedelta(seconds=5),
    )

    totals, _ = occurrences_dispatch_for(seconds=0)

    assert totals.claimed == 0
    row.refresh_from_db()
    assert (row.status, str(row.lease_token), row.attempts) == (OccurrenceStatus.CLAIMED, token, 1)


def test_its_throttle_bucket_refills_by_the_database_clock(host_clock_ahead: None) -> None:
    """An empty bucket at one event per 100 s stays empty; an hour-ahead host would have refilled it to the
    burst and stamped `refilled_at` an hour into the other workers' future."""
    policy = ThrottlePolicyFactory(max_per_second=0.01, burst=10, tokens=0, refilled_at=_db_now())
    job = JobFactory(throttle=policy)
    for _ in range(20):
        OccurrenceFactory(job=job, throttle=policy, fire_at=_db_now() - dt.timedelta(seconds=5))

    result = occurrences_dispatch_batch()

    assert result.claimed == 0
    assert Occurrence.objects.filter(status=OccurrenceStatus.SCHEDULED).count() == 20
    refilled_at = ThrottlePolicy.objects.get(pk=policy.pk).refilled_at
    assert refilled_at is not None and refilled_at <= _db_now()
