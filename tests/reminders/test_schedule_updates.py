"""Updating, pausing and deleting a schedule: the old pending fire never arrives, nothing fires after."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.utils import timezone

from reminders.engine.dispatch import occurrences_dispatch_batch
from reminders.models import MisfirePolicy, Occurrence, OccurrenceStatus, Schedule
from reminders.schedules.lifecycle import schedule_delete, schedule_pause, schedule_resume, schedule_update
from tests.conftest import drain_queue
from tests.factories import schedule_create

pytestmark = pytest.mark.django_db


def _unix(instant: dt.datetime) -> int:
    return int(instant.timestamp())


@pytest.mark.postgres
@pytest.mark.rabbitmq
def test_an_update_bumps_the_version_and_the_old_pending_fire_never_arrives(queue_name: str) -> None:
    now = timezone.now().replace(microsecond=0)
    old_fire, new_fire = now - dt.timedelta(seconds=5), now - dt.timedelta(seconds=2)
    schedule = schedule_create(key="renewal", expression=f"@at {_unix(old_fire)}", queue=queue_name)
    assert schedule.version == 1
    [old] = Occurrence.objects.filter(status=OccurrenceStatus.SCHEDULED)
    assert old.fire_at == old_fire  # already due: only the update stands between it and the queue

    schedule = schedule_update(schedule=schedule, changes={"expression": f"@at {_unix(new_fire)}"})
    assert schedule.version == 2
    while occurrences_dispatch_batch().claimed:
        pass

    messages = drain_queue(queue_name, expect=1, timeout=5)
    assert [m.properties["message_id"] for m in messages] == [f"renewal-{_unix(new_fire)}"]
    assert json.loads(messages[0].body) == {
        "id": f"renewal-{_unix(new_fire)}",
        "generated_at": _unix(new_fire),
        "schedule_id": "renewal",
        "payload": {"hello": "world"},
    }
    old.refresh_from_db()
    assert old.status == OccurrenceStatus.CANCELLED
    assert Occurrence.objects.get(status=OccurrenceStatus.DELIVERED).job_version == 2
    assert drain_queue(queue_name, timeout=0.5) == []


def test_an_update_that_keeps_the_next_point_replaces_it_with_the_new_version() -> None:
    start = timezone.now() + dt.timedelta(hours=1)
    schedule = schedule_create(key="same", expression="@every 1h", start_at=start)
    schedule = schedule_update(schedule=schedule, changes={"priority": 9})
    [pending] = Occurrence.objects.filter(status=OccurrenceStatus.SCHEDULED)
    assert (pending.fire_at, pending.job_version, pending.priority) == (start, 2, 9)
    assert pending.idempotency_key == f"same-{_unix(start)}"


def test_pause_and_delete_leave_nothing_that_can_fire_and_resume_continues_from_now() -> None:
    past = timezone.now() - dt.timedelta(minutes=1)
    schedule = schedule_create(key="often", expression="@every 10s", start_at=past - dt.timedelta(seconds=5))
    schedule = schedule_pause(schedule=schedule)
    assert occurrences_dispatch_batch().claimed == 0
    assert not Occurrence.objects.filter(status=OccurrenceStatus.SCHEDULED).exists()

    # The first period boundary after the resume: bounded by clock readings taken around the call, not by
    # one taken afterwards (a loaded machine can spend over a second between the resume and that reading).
    before = timezone.now()
    schedule = schedule_resume(schedule=schedule)
    after = timezone.now()
    [pending] = Occurrence.objects.filter(status=OccurrenceStatus.SCHEDULED)
    assert before <= pending.fire_at <= after + dt.timedelta(seconds=10)
    assert schedule.version == 3

    schedule_delete(schedule=schedule)
    assert not Schedule.objects.exists()
    # Issue 18: the history stays, as a deleted job's does; nothing is left that can fire.
    assert set(Occurrence.objects.values_list("status", flat=True)) == {OccurrenceStatus.CANCELLED}
    assert occurrences_dispatch_batch().claimed == 0


def test_a_deadline_records_a_late_fire_as_skipped_and_the_timeline_goes_on() -> None:
    start = timezone.now() - dt.timedelta(minutes=10)
    schedule = schedule_create(
        now=start - dt.timedelta(minutes=1),  # created before a 10-minute outage
        key="strict",
        expression="@every 1h",
        start_at=start,
        deadline_seconds=60,
        misfire_policy=MisfirePolicy.FIRE_ONCE,
        queue="test.reminders.never-published",
    )
    result = occurrences_dispatch_batch()
    assert result.skipped == 1
    skipped = Occurrence.objects.get(status=OccurrenceStatus.SKIPPED)
    assert skipped.fire_at == start
    schedule.refresh_from_db()
    assert schedule.next_fire_at == start + dt.timedelta(hours=1)
