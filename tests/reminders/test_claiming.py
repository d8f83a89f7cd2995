"""The claim is the scheduler's only concurrency control: these tests hold it to its promises."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from reminders.engine.claiming import (
    occurrences_claim_due,
    occurrences_mark_delivered,
    occurrences_reap_expired,
)
from reminders.engine.retry import RetryPolicy
from reminders.models import Occurrence, OccurrenceStatus
from tests.concurrency import run_together
from tests.factories import JobFactory, OccurrenceFactory

POLICY = RetryPolicy(max_attempts=3, base_seconds=1, max_seconds=10)


def _due(n: int, **kwargs: object) -> list[Occurrence]:
    job = JobFactory(**kwargs)
    now = timezone.now()
    instants = [now - dt.timedelta(seconds=i + 1) for i in range(n)]
    return Occurrence.objects.bulk_create(
        Occurrence(
            job=job, fire_at=at, next_attempt_at=at, priority=job.priority, idempotency_key=f"{job.key}-{i}"
        )
        for i, at in enumerate(instants)
    )


@pytest.mark.django_db
def test_it_claims_only_due_rows_highest_priority_first_then_oldest() -> None:
    now = timezone.now()
    low = OccurrenceFactory(job=JobFactory(priority=1), fire_at=now - dt.timedelta(minutes=5))
    high_new = OccurrenceFactory(job=JobFactory(priority=9), fire_at=now - dt.timedelta(seconds=1))
    high_old = OccurrenceFactory(job=JobFactory(priority=9), fire_at=now - dt.timedelta(seconds=30))
    future = OccurrenceFactory(fire_at=now + dt.timedelta(minutes=1))

    claim = occurrences_claim_due(now=now, limit=10, lease_seconds=60)

    assert [o.id for o in claim.occurrences] == [high_old.id, high_new.id, low.id]
    future.refresh_from_db()
    assert future.status == OccurrenceStatus.SCHEDULED
    claimed = Occurrence.objects.get(id=low.id)
    assert claimed.status == OccurrenceStatus.CLAIMED
    assert claimed.lease_token == claim.token
    assert claimed.attempts == 1


@pytest.mark.django_db
def test_it_returns_each_claimed_row_as_stored_to_the_microsecond() -> None:
    """fire_at goes out in headers and envelopes: the claim must hand it back exactly, in UTC."""
    fire_at = dt.datetime(2026, 3, 29, 0, 59, 59, 999_999, tzinfo=dt.UTC)  # an odd microsecond, before DST
    row = OccurrenceFactory(job=JobFactory(priority=7), fire_at=fire_at, idempotency_key="k-1")

    [claimed] = occurrences_claim_due(now=timezone.now(), limit=10, lease_seconds=60).occurrences

    assert (claimed.id, claimed.job_id, claimed.attempts, claimed.idempotency_key, claimed.priority) == (
        row.id,
        row.job_id,
        1,
        "k-1",
        7,
    )
    assert claimed.fire_at == fire_at and claimed.fire_at.utcoffset() == dt.timedelta(0)


@pytest.mark.django_db
def test_it_respects_the_limit_and_the_early_window() -> None:
    now = timezone.now()
    _due(5)
    soon = OccurrenceFactory(fire_at=now + dt.timedelta(seconds=20))

    assert len(occurrences_claim_due(now=now, limit=3, lease_seconds=60).occurrences) == 3
    assert len(occurrences_claim_due(now=now, limit=10, lease_seconds=60).occurrences) == 2
    assert occurrences_claim_due(now=now, limit=10, lease_seconds=60, early_seconds=10).occurrences == []
    early = occurrences_claim_due(now=now, limit=10, lease_seconds=60, early_seconds=30)
    assert [o.id for o in early.occurrences] == [soon.id]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_concurrent_claimers_never_take_the_same_row() -> None:
    rows = _due(3000)

    def claim_all(_: int) -> list[int]:
        taken: list[int] = []
        while claim := occurrences_claim_due(now=timezone.now(), limit=100, lease_seconds=60).occurrences:
            taken.extend(o.id for o in claim)
        return taken

    taken = run_together(claim_all)

    assert set(taken[0]).isdisjoint(taken[1])
    assert sorted(taken[0] + taken[1]) == sorted(o.id for o in rows)
    # Both really ran concurrently rather than one draining everything first.
    assert taken[0] and taken[1]


@pytest.mark.django_db
def test_an_expired_lease_is_reclaimed_and_the_stale_worker_cannot_mark_it() -> None:
    (occurrence,) = _due(1)
    now = timezone.now()
    stale = occurrences_claim_due(now=now, limit=10, lease_seconds=30)
    assert [o.id for o in stale.occurrences] == [occurrence.id]

    # The first worker freezes; its lease runs out and the reaper hands the row back.
    later = now + dt.timedelta(seconds=31)
    assert occurrences_reap_expired(now=later, policy=POLICY) == 1
    fresh = occurrences_claim_due(now=later, limit=10, lease_seconds=30)
    assert [o.id for o in fresh.occurrences] == [occurrence.id]
    assert fresh.token != stale.token

    # The frozen worker wakes up and tries to mark its (lost) claim delivered: refused.
    assert occurrences_mark_delivered(token=stale.token, ids=[occurrence.id], now=later) == 0
    occurrence.refresh_from_db()
    assert occurrence.status == OccurrenceStatus.CLAIMED
    assert occurrence.lease_token == fresh.token
    assert occurrence.attempts == 2

    assert occurrences_mark_delivered(token=fresh.token, ids=[occurrence.id], now=later) == 1
    occurrence.refresh_from_db()
    assert occurrence.status == OccurrenceStatus.DELIVERED


@pytest.mark.django_db
def test_a_lease_that_keeps_expiring_fails_after_the_maximum_attempts() -> None:
    (occurrence,) = _due(1)
    now = timezone.now()
    for _ in range(POLICY.max_attempts):
        occurrences_claim_due(now=now, limit=1, lease_seconds=1)
        now += dt.timedelta(seconds=2)
        occurrences_reap_expired(now=now, policy=POLICY)
    occurrence.refresh_from_db()
    assert occurrence.status == OccurrenceStatus.FAILED
    assert occurrence.attempts == POLICY.max_attempts
    assert "lease expired" in occurrence.last_error


@pytest.mark.django_db
def test_an_unexpired_lease_is_left_alone() -> None:
    _due(1)
    now = timezone.now()
    occurrences_claim_due(now=now, limit=1, lease_seconds=30)
    assert occurrences_reap_expired(now=now + dt.timedelta(seconds=29), policy=POLICY) == 0
    assert Occurrence.objects.filter(status=OccurrenceStatus.CLAIMED).count() == 1
