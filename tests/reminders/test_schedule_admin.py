"""Operators' view of schedules: changes go through the service; cancelling one fire skips just that one."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest
from django.test import Client
from django.utils import timezone

from reminders.models import Occurrence, OccurrenceStatus, Schedule
from reminders.schedules.lifecycle import schedule_run_now
from tests.factories import schedule_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(operator: Client) -> Client:
    """The admin as a superuser (tests/conftest.py's `operator`)."""
    return operator


def test_cancelling_a_schedules_pending_fire_in_the_admin_moves_it_to_the_next_fire(staff: Client) -> None:
    start = timezone.now() + dt.timedelta(hours=1)
    schedule = schedule_create(key="ops", expression="@every 1h", start_at=start)
    [pending] = Occurrence.objects.filter(status=OccurrenceStatus.SCHEDULED)
    response = staff.post(
        "/admin/reminders/occurrence/", {"action": "cancel", "_selected_action": [pending.id]}, follow=True
    )
    assert response.status_code == 200
    [following] = Occurrence.objects.filter(status=OccurrenceStatus.SCHEDULED)
    assert following.fire_at == start + dt.timedelta(hours=1)
    schedule.refresh_from_db()
    assert schedule.next_fire_at == following.fire_at


def test_editing_a_schedule_in_the_admin_bumps_the_version_and_replaces_the_pending_fire(
    staff: Client,
) -> None:
    schedule = schedule_create(key="edit", expression="0 9 * * *")
    page = staff.get(f"/admin/reminders/schedule/{schedule.pk}/change/")
    assert page.status_code == 200
    response = staff.post(
        f"/admin/reminders/schedule/{schedule.pk}/change/",
        {"expression": "0 10 * * *", "timezone": "Europe/Paris", "misfire_policy": "fire_once"},
    )
    assert response.status_code == 302, response.content[:2000]
    schedule.refresh_from_db()
    assert schedule.version == 2
    [pending] = Occurrence.objects.filter(status=OccurrenceStatus.SCHEDULED)
    assert pending.fire_at.astimezone(dt.UTC).hour in (8, 9)  # 10:00 in Paris
    bad = staff.post(
        f"/admin/reminders/schedule/{schedule.pk}/change/",
        {"expression": "@every 1s", "timezone": "UTC", "misfire_policy": "fire_once"},
    )
    assert bad.status_code == 200
    assert b"at least" in bad.content
    assert staff.get("/admin/reminders/throttlepolicy/").status_code == 200


def _add_form(**changes: object) -> dict[str, object]:
    form: dict[str, object] = {
        "key": "nightly-report", "expression": "30 2 * * *", "timezone": "Europe/Paris",
        "start_at_0": "", "start_at_1": "", "end_at_0": "", "end_at_1": "", "misfire_policy": "fire_once",
        "callback_type": "rabbitmq", "target": "reports", "payload": '{"report": "nightly"}',
        "priority": 5, "batch_size": 1,
    }  # fmt: skip
    return {**form, **changes}


def test_an_operator_creates_a_schedule_in_the_admin_as_through_the_api(staff: Client) -> None:
    refused = staff.post("/admin/reminders/schedule/add/", _add_form(expression="61 * * * *"))
    assert refused.status_code == 200 and "expression:" in refused.content.decode()
    bad_queue = staff.post("/admin/reminders/schedule/add/", _add_form(target="amq.nope"))
    assert "reserved by RabbitMQ" in bad_queue.content.decode()
    assert staff.post("/admin/reminders/schedule/add/", _add_form(payload="{not json")).status_code == 200
    twice = staff.post("/admin/reminders/schedule/add/", _add_form(payload='{"report": "a", "report": "b"}'))
    assert twice.status_code == 200 and "duplicate key &#x27;report&#x27;" in twice.content.decode()
    response = staff.post("/admin/reminders/schedule/add/", _add_form())
    assert response.status_code == 302, response.content.decode()[:2000]
    schedule = Schedule.objects.select_related("job").get(key="nightly-report")
    assert (schedule.job.target, schedule.job.payload) == ("reports", {"report": "nightly"})
    [pending] = Occurrence.objects.filter(job=schedule.job, status=OccurrenceStatus.SCHEDULED)
    assert pending.fire_at.astimezone(ZoneInfo("Europe/Paris")).strftime("%H:%M") == "02:30"


def test_the_admin_previews_runs_now_pauses_and_resumes_a_schedule(staff: Client) -> None:
    schedule = schedule_create(key="every-hour", expression="0 * * * *", timezone="Europe/Paris")
    page = staff.get(f"/admin/reminders/schedule/{schedule.pk}/change/").content.decode()
    preview = page.split('<ol class="schedule-preview">', 1)[1].split("</ol>", 1)[0]
    assert preview.count("<li>") == 10 and ":00:00 CET" in preview  # in the schedule's zone

    before = schedule.next_fire_at
    staff.post("/admin/reminders/schedule/", {"action": "run_now", "_selected_action": [schedule.pk]})
    runs = Occurrence.objects.filter(job=schedule.job, idempotency_key__startswith="every-hour-run-")
    assert runs.count() == 1 and runs.get().next_attempt_at <= timezone.now()
    schedule.refresh_from_db()
    at = runs.get().fire_at
    schedule_run_now(schedule=schedule, now=at + dt.timedelta(milliseconds=400))  # a double click
    assert runs.count() == 1
    schedule.refresh_from_db()
    assert schedule.next_fire_at == before  # the timeline did not move

    staff.post("/admin/reminders/schedule/", {"action": "pause", "_selected_action": [schedule.pk]})
    schedule.refresh_from_db()
    assert schedule.paused
    staff.post("/admin/reminders/schedule/", {"action": "resume", "_selected_action": [schedule.pk]})
    schedule.refresh_from_db()
    assert not schedule.paused and schedule.next_fire_at is not None
