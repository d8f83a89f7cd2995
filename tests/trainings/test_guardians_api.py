"""The guardians API: coaches manage their players' guardians; a guardian registers their own devices,
sets their own preferences (the player's shapes) and sees only their own players' trainings."""

from __future__ import annotations

import datetime as dt

import pytest

from delivery.models import Device
from tests.clients import api_as
from tests.factories import (
    GuardianFactory,
    MembershipFactory,
    PlayerFactory,
    TeamFactory,
    UserFactory,
    training_made,
)
from trainings.answers.links import answer_link_read
from trainings.models import Guardian, Player, ReminderPreference, Team

pytestmark = pytest.mark.django_db

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)


@pytest.fixture(autouse=True)
def _pushes_to_a_test_queue(push_queue: str) -> None:
    pass


@pytest.fixture
def zoe(db: None) -> Player:
    """Another coach's player."""
    zoe = PlayerFactory(name="Zoe")
    MembershipFactory(
        team=TeamFactory(name="Seniors B", coaches=[UserFactory(username="coach-b")]), player=zoe
    )
    return zoe


@pytest.fixture
def maria(team: Team) -> Guardian:
    return GuardianFactory(
        name="Maria", user=UserFactory(username="maria"), player=Player.objects.get(name="Alice")
    )


def test_a_coach_adds_a_guardian_to_their_player_and_never_to_another_coachs(
    coach: object, team: Team, zoe: Player
) -> None:
    api = api_as(coach)
    alice = Player.objects.get(name="Alice")
    body = {"name": "Paul", "language": "fr", "time_zone": "Europe/Paris",
            "players": [{"player": alice.pk, "relation": "father"}]}  # fmt: skip
    response = api.post("/api/guardians/", body, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["players"] == [{"player": alice.pk, "name": "Alice", "relation": "father"}]
    response = api.post("/api/guardians/", {**body, "players": [{"player": zoe.pk}]}, format="json")
    assert response.status_code == 400 and "players" in response.json()
    response = api.post("/api/guardians/", {**body, "time_zone": "Mars/Base"}, format="json")
    assert response.status_code == 400 and "time_zone" in response.json()
    GuardianFactory(name="Zoe's dad", player=zoe)
    assert [g["name"] for g in api.get("/api/guardians/").json()["results"]] == ["Paul"]


def test_a_guardian_registers_their_own_devices_and_nobody_elses(
    coach: object, team: Team, maria: Guardian
) -> None:
    own = api_as(maria.user)
    body = {"provider": "apns", "platform": "ios", "token": "abcdef0123"}
    response = own.post(f"/api/guardians/{maria.pk}/devices/", body, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["guardian"] == maria.pk
    assert Device.objects.get(token="abcdef0123").player is None
    assert api_as(coach).post(f"/api/guardians/{maria.pk}/devices/", body, format="json").status_code == 403
    listed = api_as(coach).get(f"/api/guardians/{maria.pk}/devices/").json()
    assert "abcdef0123" not in str(listed)  # coaches read tokens shortened
    other = GuardianFactory(
        name="Other", user=UserFactory(username="other"), player=Player.objects.get(name="Bruno")
    )
    assert api_as(other.user).get(f"/api/guardians/{maria.pk}/devices/").status_code == 404
    assert api_as(maria.user).post("/api/guardians/", {"name": "x"}, format="json").status_code in (400, 403)


def test_a_guardian_sets_their_own_preferences(coach: object, team: Team, maria: Guardian) -> None:
    own = api_as(maria.user)
    body = {"kinds": [{"kind": "PRE", "muted": True}], "quiet_start": "21:00", "quiet_end": "07:00"}
    response = own.put(f"/api/guardians/{maria.pk}/preferences/", body, format="json")
    assert response.status_code == 200, response.json()
    assert ReminderPreference.objects.get(guardian=maria, kind="PRE").muted
    assert not ReminderPreference.objects.filter(player__isnull=False).exists()
    assert (
        api_as(coach).put(f"/api/guardians/{maria.pk}/preferences/", body, format="json").status_code == 403
    )
    assert api_as(coach).get(f"/api/guardians/{maria.pk}/preferences/").json()["quiet_start"] == "21:00:00"


def test_a_guardian_sees_only_their_players_trainings_and_answers_with_their_own_links(
    team: Team, maria: Guardian, zoe: Player
) -> None:
    training = training_made(team, START)
    other = training_made(Team.objects.get(name="Seniors B"), START, title="Not hers")
    api = api_as(maria.user)
    (listed,) = api.get(f"/api/guardians/{maria.pk}/trainings/").json()
    assert listed["id"] == str(training.pk)
    (alice,) = listed["players"]  # Bruno and Chloe are on it too: not hers to see
    assert (alice["name"], alice["relation"], alice["invitation"]) == ("Alice", "mother", "PENDING")
    invitation = next(link for link in alice["open"] if link["kind"] == "INVITATION")
    link = answer_link_read(invitation["answer_url"].rstrip("/").rsplit("/", 1)[1])
    assert (link.player_id, link.guardian_id) == (Player.objects.get(name="Alice").pk, maria.pk)
    response = api.post(invitation["answer_url"], {"response": "accepted", "source": "app"}, format="json")
    assert response.status_code == 200 and response.json()["answer"]["source"] == "app"

    # Another player's training: not listed, not readable, not hers through any door.
    assert str(other.pk) not in str(api.get(f"/api/guardians/{maria.pk}/trainings/").json())
    assert api.get(f"/api/trainings/{other.pk}/").status_code == 404
    assert api.get(f"/api/trainings/{training.pk}/").status_code == 404  # coaches' API: not a guardian's
    zoes = GuardianFactory(name="Zoe's dad", player=zoe)
    assert api.get(f"/api/guardians/{zoes.pk}/trainings/").status_code == 404
    assert api.get(f"/api/players/{zoe.pk}/devices/").status_code == 404
