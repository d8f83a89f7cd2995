"""The daily cap (issue 46, item 5): a team's `daily_push_cap` pushes per player and calendar day in the
player's own zone; a further non-critical reminder is held back (recorded skipped, with the reason, on the
coach's grid), a critical one still goes. End to end: fired by the engine, published to RabbitMQ, sent by
the gateway to the loopback FCM peer."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from typing import Any

import pytest

from delivery.gateway.consumer import Outcome, PushSender
from reminders.models import Occurrence
from tests.clients import api_as
from tests.conftest import drain_queue
from tests.factories import training_made
from tests.peers.apns_fcm import FcmPeer
from tests.trainings.conftest import fire
from trainings.models import Player, Push, PushStatus, ReminderRule, Team, Training
from trainings.selectors import job_key, training_player_grid

pytestmark = pytest.mark.django_db

# 01:00 in Paris on 12 June, 23:00 UTC on 11 June: the 90, 75 and 60 min reminders fall on the 11th for a
# player living in UTC, while for one in Paris the 60 min one (00:00) is on the 12th already.
START = dt.datetime(2030, 6, 11, 23, tzinfo=dt.UTC)


def _fire(training: Training, rule: ReminderRule, minutes: int) -> None:
    key = job_key(training_id=training.pk, rule=rule)
    occurrence = Occurrence.objects.get(job__key=key, fire_at=START - dt.timedelta(minutes=minutes))
    assert fire(occurrence).delivered == 1


def test_a_coach_sets_the_cap_through_the_api(coach: Any, team: Team) -> None:
    api = api_as(coach)
    response = api.patch(f"/api/teams/{team.pk}/", {"daily_push_cap": 3}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["daily_push_cap"] == 3
    response = api.patch(f"/api/teams/{team.pk}/", {"daily_push_cap": -1}, format="json")
    assert response.status_code == 400
    assert set(response.json()) == {"daily_push_cap"}
    assert api.patch(f"/api/teams/{team.pk}/", {"daily_push_cap": None}, format="json").status_code == 200
    team.refresh_from_db()
    assert team.daily_push_cap is None


@pytest.mark.rabbitmq
def test_past_the_cap_a_reminder_is_held_back_in_the_players_own_day_and_a_critical_one_still_goes(
    team: Team, rules: dict[str, ReminderRule], push_queue: str, fcm: FcmPeer, sender: PushSender
) -> None:
    Team.objects.filter(pk=team.pk).update(daily_push_cap=2)
    Player.objects.filter(name="Chloe").update(time_zone="UTC")
    rule = rules["pre-questionnaire"]
    ReminderRule.objects.filter(pk=rule.pk).update(critical_offsets=["15m"])
    training = training_made(team, START)
    for minutes in (90, 75, 60):
        _fire(training, rule, minutes)

    chloe = Push.objects.get(player__name="Chloe", offset="60m")
    assert chloe.status == PushStatus.SKIPPED
    assert chloe.status_reason == "held back: daily push cap of 2 reached for 2030-06-11 (UTC)"
    # Alice and Bruno live in Paris: their third reminder is the first of their 12 June.
    assert set(Push.objects.filter(offset="60m").exclude(player__name="Chloe").values_list(
        "status", flat=True)) == {PushStatus.SENT}  # fmt: skip
    grid = {row.player: row.last_push for row in training_player_grid(training=training)}
    assert grid["Chloe"] == "skipped: held back: daily push cap of 2 reached for 2030-06-11 (UTC)"

    # The last reminder is critical: the cap does not hold it back.
    _fire(training, rule, 15)
    assert Push.objects.get(player__name="Chloe", offset="15m").status == PushStatus.SENT

    bodies = [json.loads(m.body) for m in drain_queue(push_queue, expect=3 + 3 + 2 + 3)]
    assert {h.outcome for h in sender.handle(bodies)} == {Outcome.DELIVERED}
    received = Counter(fcm.tokens())
    assert received == {"fcm-alice": 4, "fcm-bruno": 4, "fcm-chloe": 3}


def test_a_team_without_a_cap_holds_nothing_back(team: Team, rules: dict[str, ReminderRule]) -> None:
    training = training_made(team, START)
    rule = rules["pre-questionnaire"]
    for minutes in (90, 75, 60, 45):
        _fire(training, rule, minutes)
    assert not Push.objects.filter(status=PushStatus.SKIPPED).exists()
