"""The timeline's `?status=` filter, and what a caller reads of a training it cancelled or deleted: a
cancelled training keeps its timeline (every pending reminder cancelled); a deleted one's goes with it (404),
as docs/api.md says."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from reminders.models import Occurrence, OccurrenceStatus
from tests.clients import api_as
from trainings.models import ReminderRule, Team

pytestmark = pytest.mark.django_db

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)


def _training(api: Any, team: Team) -> str:
    body = {"team": team.pk, "title": "Speed session", "start": START.isoformat(),
            "end": (START + dt.timedelta(minutes=90)).isoformat()}  # fmt: skip
    answer = api.post("/api/trainings/", body, format="json")
    assert answer.status_code == 201, answer.content
    return str(answer.json()["id"])


def test_status_filters_the_timeline(coach: Any, team: Team, rules: dict[str, ReminderRule]) -> None:
    api = api_as(coach)
    training = _training(api, team)
    url = f"/api/trainings/{training}/timeline/"
    every = api.get(url).json()
    assert len(every) > 2
    first = Occurrence.objects.get(pk=every[0]["occurrence_id"])
    Occurrence.objects.filter(pk=first.pk).update(status=OccurrenceStatus.DELIVERED)

    delivered = api.get(url, {"status": "delivered"}).json()
    assert [e["occurrence_id"] for e in delivered] == [first.pk]
    scheduled = api.get(url, {"status": "scheduled"}).json()
    assert [e["occurrence_id"] for e in scheduled] == [e["occurrence_id"] for e in every[1:]]
    both = api.get(f"{url}?status=delivered,scheduled").json()
    assert both == api.get(f"{url}?status=delivered&status=scheduled").json()
    assert [e["occurrence_id"] for e in both] == [e["occurrence_id"] for e in every]

    refused = api.get(url, {"status": "sent"})
    assert refused.status_code == 400
    assert "'sent' is none of scheduled" in refused.json()["status"][0]


def test_a_cancelled_training_keeps_its_timeline_a_deleted_one_does_not(
    coach: Any, team: Team, rules: dict[str, ReminderRule]
) -> None:
    api = api_as(coach)
    cancelled = _training(api, team)
    assert api.patch(f"/api/trainings/{cancelled}/", {"cancelled": True}, format="json").status_code == 200
    timeline = api.get(f"/api/trainings/{cancelled}/timeline/").json()
    assert timeline and {e["status"] for e in timeline} == {"cancelled"}

    deleted = _training(api, team)
    keys = [e["occurrence_id"] for e in api.get(f"/api/trainings/{deleted}/timeline/").json()]
    assert api.delete(f"/api/trainings/{deleted}/").status_code == 204
    assert api.get(f"/api/trainings/{deleted}/timeline/").status_code == 404
    # The engine keeps the cancelled occurrences (its history), but nothing names the training any more.
    assert set(Occurrence.objects.filter(pk__in=keys).values_list("status", flat=True)) == {"cancelled"}
