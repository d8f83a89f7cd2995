"""Priority: higher first when more is due than a batch takes, and low priority is not starved forever."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from reminders.engine.claiming import occurrences_claim_due
from reminders.models import Occurrence
from tests.factories import JobFactory, OccurrenceFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _aging(settings: Any) -> None:
    settings.REMINDERS_PRIORITY_AGING_SECONDS = 60
    settings.REMINDERS_PRIORITY_AGED_SHARE = 0.1


def test_it_takes_higher_priority_first_then_fire_time_order() -> None:
    now = timezone.now()
    high, low = JobFactory(priority=9), JobFactory(priority=1)
    for seconds in (3, 2, 1):
        OccurrenceFactory(job=low, fire_at=now - dt.timedelta(seconds=seconds))
        OccurrenceFactory(job=high, fire_at=now - dt.timedelta(seconds=seconds))
    claim = occurrences_claim_due(now=now, limit=4, lease_seconds=60)
    assert [(o.priority, o.fire_at) for o in claim.occurrences] == [
        (9, now - dt.timedelta(seconds=3)),
        (9, now - dt.timedelta(seconds=2)),
        (9, now - dt.timedelta(seconds=1)),
        (1, now - dt.timedelta(seconds=3)),
    ]


def test_a_low_priority_row_waits_while_fresh_high_priority_work_fills_the_batches() -> None:
    now = timezone.now()
    waiting = OccurrenceFactory(job=JobFactory(priority=0), fire_at=now - dt.timedelta(seconds=30))
    busy = JobFactory(priority=9)
    for _ in range(20):
        OccurrenceFactory(job=busy, fire_at=now - dt.timedelta(seconds=1))
    claim = occurrences_claim_due(now=now, limit=10, lease_seconds=60)
    assert waiting.id not in {o.id for o in claim.occurrences}


def test_low_priority_is_not_starved_by_a_steady_stream_of_high_priority_work() -> None:
    """Each round 10 fresh high-priority rows arrive and one batch of 10 is claimed: strict priority would
    never reach the low one. Once it has been due longer than the aging threshold it gets a reserved slot."""
    start = timezone.now()
    low = OccurrenceFactory(job=JobFactory(priority=0), fire_at=start)
    busy = JobFactory(priority=9)
    claimed_at = None
    for round_number in range(30):
        now = start + dt.timedelta(seconds=5 * round_number)
        for _ in range(10):
            OccurrenceFactory(job=busy, fire_at=now)
        claim = occurrences_claim_due(now=now, limit=10, lease_seconds=600)
        if low.id in {o.id for o in claim.occurrences}:
            claimed_at = now
            break
    assert claimed_at is not None
    assert dt.timedelta(seconds=60) <= claimed_at - start <= dt.timedelta(seconds=65)
    assert Occurrence.objects.get(id=low.id).status == "claimed"
