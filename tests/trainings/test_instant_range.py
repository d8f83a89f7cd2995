"""Dates at the edges: every boundary that takes an instant accepts [2000-01-01, 2100-01-01) UTC and answers
a 400 (or a form error) naming the field outside it, and no stored row outside it breaks a periodic task."""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

import pytest

from tests.clients import api_as, logged_in
from tests.factories import (
    WELLNESS,
    MembershipFactory,
    PlayerFactory,
    TeamFactory,
    TrainingFactory,
    UserFactory,
    training_made,
)
from trainings.access import coach_group_ensure
from trainings.analytics.summary import summaries_refresh
from trainings.models import OffsetDay, Team, Training
from trainings.planning.writes import answer_record
from trainings.tasks import analytics_refresh

pytestmark = pytest.mark.django_db

EDGES = [
    "0001-01-01T00:00:00Z",
    "1999-12-31T23:59:59Z",
    "2100-01-01T00:00:00Z",
    "9999-12-30T00:00:00+14:00",
    "9999-12-31T23:00:00Z",
]


def _training_body(team: Team, start: str, end: str) -> dict[str, Any]:
    return {"team": team.pk, "title": "Edge", "start": start, "end": end, "time_zone": "Pacific/Kiritimati"}


@pytest.mark.parametrize("edge", EDGES)
def test_a_training_starting_outside_the_range_is_a_400_naming_start(
    coach: Any, team: Team, edge: str
) -> None:
    api = api_as(coach, raise_request_exception=False)
    response = api.post("/api/trainings/", _training_body(team, edge, "2030-01-01T00:00:00Z"), format="json")
    assert response.status_code == 400, response.content
    assert "start" in response.json()
    assert "2000-01-01" in str(response.json()["start"])
    assert not Training.objects.exists()


@pytest.mark.parametrize("edge", EDGES)
def test_a_move_or_an_end_outside_the_range_is_a_400_naming_the_field(
    coach: Any, team: Team, edge: str
) -> None:
    training = training_made(team, dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC))
    api = api_as(coach, raise_request_exception=False)
    response = api.patch(f"/api/trainings/{training.pk}/", {"end": edge}, format="json")
    assert response.status_code == 400, response.content
    assert "end" in response.json()
    training.refresh_from_db()
    assert training.end == dt.datetime(2030, 6, 11, 17, 30, tzinfo=dt.UTC)


def test_the_range_s_own_edges_are_accepted(coach: Any, team: Team) -> None:
    api = api_as(coach)
    body = _training_body(team, "2000-01-01T00:00:00Z", "2099-12-31T23:59:59Z")
    assert api.post("/api/trainings/", body, format="json").status_code == 201


@pytest.mark.parametrize("edge", EDGES)
def test_a_job_instant_outside_the_range_is_a_400_naming_schedules(edge: str) -> None:
    api = api_as(UserFactory(is_staff=True, is_superuser=True), raise_request_exception=False)
    job = {
        "key": "edge",
        "schedules": ["2030-01-01T00:00:00Z", edge],
        "callback": {"type": "rabbitmq", "data": {"queue": "q.edge", "payload": {}}},
    }
    response = api.post("/api/jobs/", job, format="json")
    assert response.status_code == 400, response.content
    assert "schedules" in response.json()
    response = api.post("/api/jobs/bulk/", {"jobs": [job]}, format="json")
    assert response.status_code == 400, response.content
    assert "schedules" in str(response.json())


@pytest.mark.parametrize(
    ("day", "zone"),
    [("9999-12-31", "Europe/Paris"), ("0001-01-01", "Pacific/Kiritimati"), ("2100-06-01", "UTC")],
)
def test_the_admin_form_refuses_a_start_outside_the_range(team: Team, day: str, zone: str) -> None:
    coach = UserFactory(is_staff=True)
    coach.groups.add(coach_group_ensure())
    team.coaches.add(coach)
    management = {"TOTAL_FORMS": 0, "INITIAL_FORMS": 0, "MIN_NUM_FORMS": 0, "MAX_NUM_FORMS": 1000}
    form = {"team": team.pk, "title": "Edge", "start_0": day, "start_1": "12:00:00", "end_0": "2030-01-01",
            "end_1": "12:00:00", "time_zone": zone, "location": "",
            **{f"invitations-{k}": v for k, v in management.items()},
            **{f"answers-{k}": v for k, v in management.items()}}  # fmt: skip
    response = logged_in(coach).post("/admin/trainings/training/add/", form)
    assert response.status_code == 200, response.status_code  # the form again, with its errors
    errors = response.context["adminform"].form.errors
    assert "start" in errors, errors
    assert not Training.objects.exists()


def test_a_stored_training_at_the_end_of_time_does_not_break_the_analytics_refresh(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Stored before the range was enforced: the periodic refresh leaves it out (logged) and sums the rest."""
    team = TeamFactory(time_zone="Pacific/Kiritimati")
    player = PlayerFactory()
    MembershipFactory(team=team, player=player)
    edge = dt.datetime(9999, 12, 31, 8, tzinfo=dt.UTC)  # 22:00 on New Year's Eve of 9999 in Kiritimati
    broken = TrainingFactory(team=team, start=edge, end=edge + dt.timedelta(hours=1),
                             time_zone="Pacific/Kiritimati")  # fmt: skip
    fine = training_made(
        team, dt.datetime.now(dt.UTC) - dt.timedelta(hours=3), time_zone="Pacific/Kiritimati"
    )
    answer_record(training=broken, player=player, phase="PRE", answers=WELLNESS)
    answer_record(training=fine, player=player, phase="PRE", answers=WELLNESS)
    with caplog.at_level(logging.WARNING):
        analytics_refresh.apply().get()
        summaries_refresh()
    assert str(broken.pk) in caplog.text
    assert not OffsetDay.objects.filter(day__year=9999).exists()
