"""Misfire policies apply when a schedule's stored point is claimed late, not only to the point after it.

Issue 19, defect 3: the point stored before an outage used to be delivered whenever it was claimed, so
`fire_once` sent two events for one outage (the stale point, then the latest) and `skip` sent the stale
point. The processes-stopped-and-restarted version of these cases is tests/faults/test_misfires.py.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.utils import timezone

from reminders.engine.claiming import occurrences_claim_due, occurrences_mark_delivered
from reminders.engine.dispatch import occurrences_dispatch_for
from reminders.models import MisfirePolicy, Occurrence, OccurrenceStatus, Schedule
from reminders.schedules.lifecycle import schedules_misfire
from tests.conftest import drain_queue
from tests.factories import schedule_create

pytestmark = pytest.mark.django_db

MINUTE = dt.datetime(2026, 1, 5, 16, 42, tzinfo=dt.UTC)


def _pending(schedule: Schedule) -> list[dt.datetime]:
    return list(
        schedule.job.occurrences.filter(status=OccurrenceStatus.SCHEDULED)
        .order_by("fire_at")
        .values_list("fire_at", flat=True)
    )


def _claim_at(at: dt.datetime) -> tuple[object, list[int]]:
    claim = occurrences_claim_due(now=at, limit=1000, lease_seconds=60)
    return claim.token, [o.id for o in claim.occurrences]


def _every_10s_missed_7_runs(key: str, policy: MisfirePolicy, queue: str) -> tuple[Schedule, dt.datetime]:
    """An `@every 10s` schedule created 77.5 s ago, then nothing ran: seven runs were missed. Returns it
    with its stale stored point."""
    schedule = schedule_create(
        key=key,
        expression="@every 10s",
        now=timezone.now() - dt.timedelta(seconds=77.5),
        misfire_policy=policy,
        queue=queue,
    )
    schedule.refresh_from_db()
    assert schedule.next_fire_at is not None
    return schedule, schedule.next_fire_at


def _every_minute_from_16_41_30(key: str, policy: str) -> Schedule:
    """A `* * * * *` schedule created at 16:41:30: its stored point is MINUTE, 16:42:00."""
    return schedule_create(
        key=key, expression="* * * * *", now=MINUTE - dt.timedelta(seconds=30), misfire_policy=policy
    )


def _generated_at(queue: str) -> list[int]:
    return [json.loads(m.body)["generated_at"] for m in drain_queue(queue, timeout=1.0)]


@pytest.mark.rabbitmq
def test_fire_once_sends_one_event_for_an_outage_labelled_with_the_latest_missed_run(queue_name: str) -> None:
    schedule, stale = _every_10s_missed_7_runs("once", MisfirePolicy.FIRE_ONCE, queue_name)

    occurrences_dispatch_for(seconds=5, until_idle=True)
    occurrences_dispatch_for(seconds=5, until_idle=True)  # the replacement is due: the next scan sends it

    now = timezone.now()
    [sent] = _generated_at(queue_name)
    latest = stale + dt.timedelta(seconds=10 * ((now - stale) // dt.timedelta(seconds=10)))
    assert sent == int(latest.timestamp())  # the latest missed run, not the stale stored one
    skipped = Occurrence.objects.get(status=OccurrenceStatus.SKIPPED)
    assert skipped.fire_at == stale and "misfire (fire_once)" in skipped.last_error
    assert _pending(schedule) == [latest + dt.timedelta(seconds=10)]


@pytest.mark.rabbitmq
def test_skip_sends_nothing_stale_and_schedules_the_next_future_run(queue_name: str) -> None:
    schedule, stale = _every_10s_missed_7_runs("skip", MisfirePolicy.SKIP, queue_name)

    occurrences_dispatch_for(seconds=5, until_idle=True)

    assert _generated_at(queue_name) == []
    [following] = _pending(schedule)
    assert following > timezone.now() - dt.timedelta(seconds=1)
    assert (following - stale) % dt.timedelta(seconds=10) == dt.timedelta(0)  # on the timeline
    assert Occurrence.objects.get(status=OccurrenceStatus.SKIPPED).fire_at == stale


def test_skip_sends_a_crontab_run_that_just_came_due_instead_of_the_stale_one() -> None:
    """The issue's case: 16:42:00 stored, workers back at 16:43:00.8. 16:43 is on time, 16:42 is stale."""
    schedule = _every_minute_from_16_41_30("cron-skip", "skip")
    assert _pending(schedule) == [MINUTE]
    restart = MINUTE + dt.timedelta(minutes=1, seconds=0.8)

    token, ids = _claim_at(restart)
    assert schedules_misfire(token=token, occurrence_ids=ids, now=restart) == set(ids)

    assert _pending(schedule) == [MINUTE + dt.timedelta(minutes=1)]
    assert Occurrence.objects.get(id__in=ids).status == OccurrenceStatus.SKIPPED


def test_skip_skips_a_crontab_run_that_came_due_longer_ago_than_the_grace() -> None:
    schedule = _every_minute_from_16_41_30("cron-skip-late", "skip")
    restart = MINUTE + dt.timedelta(minutes=1, seconds=20)

    token, ids = _claim_at(restart)
    schedules_misfire(token=token, occurrence_ids=ids, now=restart)

    assert _pending(schedule) == [MINUTE + dt.timedelta(minutes=2)]


def test_fire_once_replaces_a_stale_crontab_point_with_the_latest_missed_run() -> None:
    schedule = _every_minute_from_16_41_30("cron-once", "fire_once")
    restart = MINUTE + dt.timedelta(minutes=3, seconds=20)

    token, ids = _claim_at(restart)
    assert schedules_misfire(token=token, occurrence_ids=ids, now=restart) == set(ids)

    assert _pending(schedule) == [MINUTE + dt.timedelta(minutes=3)]
    # The replacement is on time for what it stands for: claimed now, it is not a misfire again.
    token, ids = _claim_at(restart + dt.timedelta(seconds=1))
    assert schedules_misfire(token=token, occurrence_ids=ids, now=restart + dt.timedelta(seconds=1)) == set()


def test_a_late_point_with_no_later_run_due_yet_is_no_misfire() -> None:
    """Late but not superseded: both policies send it (a deadline_seconds is what bounds lateness)."""
    for policy in MisfirePolicy.values:
        schedule = _every_minute_from_16_41_30(f"late-{policy}", policy)
        at = MINUTE + dt.timedelta(seconds=50)
        token, ids = _claim_at(at)
        assert schedules_misfire(token=token, occurrence_ids=ids, now=at) == set()
        occurrences_mark_delivered(token=token, ids=ids, now=at)
        assert _pending(schedule) == [MINUTE + dt.timedelta(minutes=1)]
        schedule.job.delete()


def test_skip_keeps_a_run_that_just_came_due_when_the_late_point_ends() -> None:
    """16:42 claimed in time but delivered at 16:43:01: under skip 16:43 just came due and still fires."""
    schedule = _every_minute_from_16_41_30("cron-advance", "skip")
    token, ids = _claim_at(MINUTE + dt.timedelta(seconds=59))
    occurrences_mark_delivered(token=token, ids=ids, now=MINUTE + dt.timedelta(minutes=1, seconds=1))

    assert _pending(schedule) == [MINUTE + dt.timedelta(minutes=1)]
