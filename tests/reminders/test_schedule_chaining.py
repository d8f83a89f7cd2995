"""A schedule keeps its next fire point materialised and chains on its own timeline."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from reminders.engine.claiming import occurrences_claim_due, occurrences_mark_delivered
from reminders.models import MisfirePolicy, Occurrence, OccurrenceStatus, Schedule
from reminders.schedules.lifecycle import schedules_advance
from tests.factories import schedule_create

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 1, 5, 12, 0, tzinfo=dt.UTC)


def _pending(schedule: Schedule) -> list[Occurrence]:
    return list(
        schedule.job.occurrences.filter(status=OccurrenceStatus.SCHEDULED).order_by("fire_at", "batch_index")
    )


def _deliver_head(schedule: Schedule, *, at: dt.datetime) -> None:
    """Claim and mark delivered the schedule's pending rows as a worker would at `at`."""
    claim = occurrences_claim_due(now=at, limit=1000, lease_seconds=60)
    occurrences_mark_delivered(token=claim.token, ids=[o.id for o in claim.occurrences], now=at)


def test_it_materialises_only_the_next_fire_point() -> None:
    schedule = schedule_create(key="hourly", expression="@every 1h", now=T0)
    pending = _pending(schedule)
    assert [o.fire_at for o in pending] == [T0 + dt.timedelta(hours=1)]
    assert pending[0].idempotency_key == f"hourly-{int((T0 + dt.timedelta(hours=1)).timestamp())}"
    assert schedule.next_fire_at == T0 + dt.timedelta(hours=1)


def test_it_keeps_the_original_timeline_when_deliveries_are_late_by_several_periods() -> None:
    schedule = schedule_create(
        key="late",
        expression="*/10 * * * *",
        now=T0 + dt.timedelta(seconds=1),
        misfire_policy=MisfirePolicy.FIRE_ONCE,
    )
    first = T0 + dt.timedelta(minutes=10)
    assert [o.fire_at for o in _pending(schedule)] == [first]

    # Delivered 35 minutes late (three and a half periods): the missed 12:20, 12:30, 12:40 become one
    # occurrence at 12:40 (the latest missed point), on the grid, not 12:45 + 10 min.
    _deliver_head(schedule, at=first + dt.timedelta(minutes=35))
    assert [o.fire_at for o in _pending(schedule)] == [T0 + dt.timedelta(minutes=40)]

    # Delivered 7 minutes late: the next one is 12:50, not 12:47 + 10 min.
    _deliver_head(schedule, at=T0 + dt.timedelta(minutes=47))
    assert [o.fire_at for o in _pending(schedule)] == [T0 + dt.timedelta(minutes=50)]

    # On time again: 13:00.
    _deliver_head(schedule, at=T0 + dt.timedelta(minutes=50, seconds=1))
    assert [o.fire_at for o in _pending(schedule)] == [T0 + dt.timedelta(minutes=60)]
    fired = schedule.job.occurrences.filter(status=OccurrenceStatus.DELIVERED).values_list(
        "fire_at", flat=True
    )
    assert all(f.minute % 10 == 0 and f.second == 0 for f in fired)


def test_it_skips_to_the_next_future_fire_with_the_skip_policy() -> None:
    schedule = schedule_create(
        key="skipper", expression="@every 10m", now=T0, misfire_policy=MisfirePolicy.SKIP
    )
    _deliver_head(schedule, at=T0 + dt.timedelta(minutes=45))
    assert [o.fire_at for o in _pending(schedule)] == [T0 + dt.timedelta(minutes=50)]


def test_it_does_not_move_the_timeline_twice_for_siblings_of_one_batch() -> None:
    schedule = schedule_create(key="batch", expression="@every 1h", now=T0, batch_size=3)
    pending = _pending(schedule)
    assert [o.batch_index for o in pending] == [0, 1, 2]
    assert [o.idempotency_key for o in pending] == [
        f"batch-{int(pending[0].fire_at.timestamp())}",
        f"batch-{int(pending[0].fire_at.timestamp())}-1",
        f"batch-{int(pending[0].fire_at.timestamp())}-2",
    ]
    at = pending[0].fire_at + dt.timedelta(seconds=1)
    claim = occurrences_claim_due(now=at, limit=1000, lease_seconds=60)
    for occurrence in claim.occurrences:  # one at a time, as three workers would
        occurrences_mark_delivered(token=claim.token, ids=[occurrence.id], now=at)
    assert [o.fire_at for o in _pending(schedule)] == [pending[0].fire_at + dt.timedelta(hours=1)] * 3
    # Advancing again from an old point changes nothing.
    assert schedules_advance(occurrence_ids=[o.id for o in claim.occurrences], now=at) == 0
    assert len(_pending(schedule)) == 3


def test_it_ends_after_end_at() -> None:
    schedule = schedule_create(
        key="ending",
        expression="@every 1h",
        now=T0,
        start_at=T0,
        end_at=T0 + dt.timedelta(hours=1, minutes=30),
    )
    assert [o.fire_at for o in _pending(schedule)] == [T0]  # with a start, the start itself fires
    _deliver_head(schedule, at=T0)
    _deliver_head(schedule, at=T0 + dt.timedelta(hours=1))
    assert _pending(schedule) == []
    schedule.refresh_from_db()
    assert schedule.next_fire_at is None


def test_it_fires_an_at_schedule_once() -> None:
    instant = timezone.now() + dt.timedelta(minutes=5)
    schedule = schedule_create(key="once", expression=f"@at {int(instant.timestamp())}")
    [occurrence] = _pending(schedule)
    _deliver_head(schedule, at=occurrence.fire_at)
    assert _pending(schedule) == []


def test_an_every_schedule_first_fires_a_whole_period_after_it_was_created() -> None:
    """Issue 19, defect 8: created at 12:00:00.8, `@every 10s` fired at 12:00:10 (9.2 s later) because the
    anchor was truncated to the second. Rounded up, the first fire is 12:00:11, still on whole seconds."""
    created = T0 + dt.timedelta(milliseconds=800)
    schedule = schedule_create(key="ten", expression="@every 10s", now=created)

    assert schedule.next_fire_at == T0 + dt.timedelta(seconds=11)
    assert schedule.next_fire_at - created >= dt.timedelta(seconds=10)
    [pending] = _pending(schedule)
    assert pending.idempotency_key == f"ten-{int((T0 + dt.timedelta(seconds=11)).timestamp())}"
    # An instant already on a whole second stays the anchor.
    assert schedule_create(key="exact", expression="@every 10s", now=T0).next_fire_at == T0 + dt.timedelta(
        seconds=10
    )
