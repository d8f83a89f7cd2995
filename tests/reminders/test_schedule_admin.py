"""Operators' view of schedules: changes go through the service; cancelling one fire skips just that one."""

from __future__ import annotations

import datetime as dt

import pytest
from django.test import Client
from django.utils import timezone

from reminders.models import Occurrence, OccurrenceStatus
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
