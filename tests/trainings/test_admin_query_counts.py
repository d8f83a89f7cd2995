"""The coach's busiest admin pages read a bounded number of statements, whatever the size of the team: the
training page (its player grid, invitations and answers) and the team page cost the same with 3 players as
with 13, each with a device and a reminder sent (python -m bench --only admin found 3 statements per player).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from delivery.models import PushSend, SendStatus
from tests.factories import WELLNESS, DeviceFactory, MembershipFactory, PlayerFactory, training_made
from trainings.access import coach_group_ensure
from trainings.models import ReminderRule, Team, Training
from trainings.planning.writes import answer_record
from trainings.reminding.remind_now import training_remind_now

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _pushes_to_a_test_queue(push_queue: str) -> None:
    pass


@pytest.fixture
def browser(coach: Any) -> Client:
    coach.is_staff = True
    coach.save()
    coach.groups.add(coach_group_ensure())
    client = Client()
    client.force_login(coach)
    return client


def _statements(client: Client, path: str) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(path)
    assert response.status_code == 200, response.content[:500]
    return [q["sql"] for q in queries.captured_queries]


def _grow(team: Team, training: Training, rules: dict[str, ReminderRule], count: int, click: str) -> None:
    """`count` more players on the list, each with a device, a push sent and a recorded send."""
    from trainings.models import Invitation, Push

    for i in range(count):
        player = PlayerFactory(name=f"Extra {click} {i}", devices=[])
        DeviceFactory(player=player, provider="fcm", platform="android", token=f"tok-{click}-{i}")
        MembershipFactory(team=team, player=player)
        Invitation.objects.create(training=training, player=player)
    training_remind_now(training=training, rule=rules["pre-questionnaire"], click=click)
    for push in Push.objects.filter(training=training, key__contains=click):
        device = push.player.devices.first()
        PushSend.objects.create(push_key=push.key, device=device, player_id=push.player_id, provider="fcm",
                                status=SendStatus.ACCEPTED, recorded_at=timezone.now())  # fmt: skip


@pytest.mark.parametrize("page", ["training", "team"])
def test_the_page_reads_as_many_statements_for_13_players_as_for_3(
    browser: Client, team: Team, rules: dict[str, ReminderRule], page: str
) -> None:
    training = training_made(team, timezone.now() + dt.timedelta(days=2))
    alice = training.invitations.get(player__name="Alice").player
    answer_record(training=training, player=alice, phase="PRE", answers=WELLNESS)
    _grow(team, training, rules, 1, "first")
    path = (
        f"/admin/trainings/training/{training.pk}/change/"
        if page == "training"
        else f"/admin/trainings/team/{team.pk}/change/"
    )
    small = _statements(browser, path)
    _grow(team, training, rules, 10, "second")
    large = _statements(browser, path)
    assert len(large) <= len(small), "\n".join(large)


@pytest.mark.parametrize("page", ["training", "team"])
def test_the_page_names_its_own_players_and_not_every_player_of_the_club(
    browser: Client, team: Team, rules: dict[str, ReminderRule], page: str
) -> None:
    """Each row's player is a search box showing that player: the club's other players (here 30 on a
    second team of the coach's) are found by typing, not listed in every row."""
    training = training_made(team, timezone.now() + dt.timedelta(days=2))
    other = Team.objects.create(name="U17", time_zone="Europe/Paris", quiet_start=None, quiet_end=None)
    other.coaches.add(*team.coaches.all())
    for i in range(30):
        MembershipFactory(team=other, player=PlayerFactory(name=f"Elsewhere {i}"))
    path = (
        f"/admin/trainings/training/{training.pk}/change/"
        if page == "training"
        else f"/admin/trainings/team/{team.pk}/change/"
    )
    html = browser.get(path).content.decode()
    assert "Elsewhere" not in html
    for invitation in training.invitations.select_related("player"):
        assert f'<option value="{invitation.player_id}" selected>{invitation.player.name}</option>' in html
    found = browser.get(
        "/admin/autocomplete/",
        {"app_label": "trainings", "model_name": "invitation", "field_name": "player", "term": "Elsewhere"},
    ).json()
    assert len(found["results"]) == 20 and found["pagination"]["more"] is True  # paged, 20 at a time
