"""Operators choose the zone their times are shown in (default UTC); the API gives people local times."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from reminders.models import UserPreference
from tests.factories import OccurrenceFactory, UserFactory

pytestmark = pytest.mark.django_db

# Paris leaves summer time at 01:00 UTC on 27 October 2030.
BEFORE_DST_END = dt.datetime(2030, 10, 26, 15, 25, 7, tzinfo=dt.UTC)
AFTER_DST_END = dt.datetime(2030, 10, 27, 16, 25, 7, tzinfo=dt.UTC)


@pytest.fixture
def operator() -> Any:
    return UserFactory(is_staff=True, is_superuser=True)


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_times_are_utc_until_the_operator_chooses_a_zone_and_then_follow_it_across_dst(operator: Any) -> None:
    for instant in (BEFORE_DST_END, AFTER_DST_END):
        OccurrenceFactory(fire_at=instant, next_attempt_at=instant)
    client = _client(operator)
    page = client.get("/admin/reminders/occurrence/", {"state": "all"}).content.decode()
    assert "2030-10-26 15:25:07 UTC" in page and "Times in UTC" in page

    response = client.post("/admin/time-zone/", {"time_zone": "Europe/Paris", "next": "/admin/"})
    assert response.status_code == 302 and response["Location"] == "/admin/"
    assert UserPreference.objects.get(user=operator).time_zone == "Europe/Paris"

    page = client.get("/admin/reminders/occurrence/", {"state": "all"}).content.decode()
    assert "2030-10-26 17:25:07 CEST" in page  # UTC+2 the day before
    assert "2030-10-27 17:25:07 CET" in page  # UTC+1 after the change
    assert "Times in Europe/Paris" in page
    other = _client(UserFactory(is_staff=True, is_superuser=True))
    assert (
        "2030-10-26 15:25:07 UTC"
        in other.get("/admin/reminders/occurrence/", {"state": "all"}).content.decode()
    )


def test_an_unknown_zone_is_refused_naming_the_field(operator: Any) -> None:
    response = _client(operator).post("/admin/time-zone/", {"time_zone": "Mars/Olympus"})
    assert response.status_code == 400
    assert "time_zone" in response.content.decode() and "Mars/Olympus" in response.content.decode()
    assert not UserPreference.objects.exists()


def test_an_offsite_next_is_not_followed(operator: Any) -> None:
    response = _client(operator).post(
        "/admin/time-zone/", {"time_zone": "Asia/Tokyo", "next": "https://evil.example/"}
    )
    assert response["Location"] == "/admin/"


def test_the_training_api_gives_people_local_times_beside_utc(operator: Any) -> None:
    from tests.factories import TrainingFactory

    training = TrainingFactory(start=AFTER_DST_END, end=AFTER_DST_END + dt.timedelta(hours=1))
    api = APIClient()
    api.force_authenticate(operator)
    body = api.get(f"/api/trainings/{training.pk}/").json()
    assert body["start_local"] == "2030-10-27T17:25:07+01:00"
    assert body["time_zone"] == "Europe/Paris"
    assert dt.datetime.fromisoformat(body["start"]) == AFTER_DST_END


def test_the_api_stays_in_utc_for_a_signed_in_person_with_a_zone(operator: Any) -> None:
    from tests.factories import TrainingFactory

    UserPreference.objects.create(user=operator, time_zone="Asia/Tokyo")
    training = TrainingFactory(start=AFTER_DST_END, end=AFTER_DST_END + dt.timedelta(hours=1))
    body = _client(operator).get(f"/api/trainings/{training.pk}/").json()  # session, as a browser
    assert body["start"].endswith(("Z", "+00:00"))
    assert body["start_local"] == "2030-10-27T17:25:07+01:00"  # the training's zone, not the person's
