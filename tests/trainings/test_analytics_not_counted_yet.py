"""The effectiveness page before the summaries' refresh: a reminder that went out since the last refresh is
"nothing counted yet; next refresh at …", never "No reminder went out"."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest
from django.test import Client
from django.utils import timezone

from tests.clients import logged_in
from tests.factories import PlayerFactory, TeamFactory, TrainingFactory, UserFactory
from trainings.access import coach_group_ensure
from trainings.analytics.summary import local_day, summaries_refresh
from trainings.models import Push, ReminderRule, SummaryMark

pytestmark = [pytest.mark.django_db]

PARIS = ZoneInfo("Europe/Paris")  # the coach's zone: their team's


def _page(client: Client, day: dt.date) -> str:
    response = client.get("/admin/analytics/", {"since": day.isoformat(), "until": day.isoformat()})
    assert response.status_code == 200
    return str(response.content.decode())


def test_it_says_nothing_counted_yet_before_the_refresh_and_the_figures_after() -> None:
    coach = UserFactory(is_staff=True)
    coach.groups.add(coach_group_ensure())
    team = TeamFactory(name="U15", coaches=[coach])
    now = timezone.now()
    training = TrainingFactory(team=team, start=now + dt.timedelta(minutes=80),
                               end=now + dt.timedelta(minutes=140))  # fmt: skip
    player = PlayerFactory()
    refreshed = now - dt.timedelta(minutes=2)
    SummaryMark.objects.update_or_create(id=1, defaults={"refreshed_until": refreshed})
    day = local_day(training)
    assert day is not None
    client = logged_in(coach)
    assert "No reminder went out for these trainings." in _page(client, day)  # nothing went out: true

    fire = now - dt.timedelta(minutes=1)
    Push.objects.create(
        key="k-1", occurrence_key="o-1", training=training, player=player,
        rule=ReminderRule.objects.get(slug="pre-questionnaire"), kind="PRE", offset="90m", language="en",
        title="t", body="b", fire_at=fire, expires_at=training.start, status="sent", sent_at=fire,
    )  # fmt: skip
    page = _page(client, day)
    assert "No reminder went out" not in page
    due = timezone.localtime(refreshed + dt.timedelta(minutes=5), PARIS)
    assert "Nothing counted yet" in page and f"next refresh at {due:%H:%M}" in page

    summaries_refresh()
    page = _page(client, day)
    assert "Nothing counted yet" not in page and "No reminder went out" not in page
    assert '<tr data-offset="90m">' in page


def test_a_late_refresh_is_said_to_be_late() -> None:
    coach = UserFactory(is_staff=True)
    coach.groups.add(coach_group_ensure())
    team = TeamFactory(coaches=[coach])
    now = timezone.now()
    training = TrainingFactory(team=team, start=now + dt.timedelta(minutes=80),
                               end=now + dt.timedelta(minutes=140))  # fmt: skip
    refreshed = now - dt.timedelta(minutes=30)
    SummaryMark.objects.update_or_create(id=1, defaults={"refreshed_until": refreshed})
    fire = now - dt.timedelta(minutes=1)
    Push.objects.create(
        key="k-2", occurrence_key="o-2", training=training, player=PlayerFactory(),
        rule=ReminderRule.objects.get(slug="pre-questionnaire"), kind="PRE", offset="90m", language="en",
        title="t", body="b", fire_at=fire, expires_at=training.start, status="sent", sent_at=fire,
    )  # fmt: skip
    day = local_day(training)
    assert day is not None
    due = timezone.localtime(refreshed + dt.timedelta(minutes=5), PARIS)
    assert f"the refresh due at {due:%H:%M}" in _page(logged_in(coach), day)
