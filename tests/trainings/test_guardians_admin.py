"""Guardians in the admin: a coach sees and links the guardians of their own teams' players only; a
player's page names their guardians; a team says who its reminders go to."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import IntegrityError
from django.test import Client

from tests.clients import logged_in
from tests.factories import (
    GuardianFactory,
    MembershipFactory,
    PlayerFactory,
    TeamFactory,
    UserFactory,
)
from trainings.models import Device, Guardian, Guardianship, Player, Team
from trainings.services import coach_group_ensure

pytestmark = pytest.mark.django_db


def _staff_coach(username: str) -> Any:
    user = UserFactory(username=username, is_staff=True)
    user.groups.add(coach_group_ensure())
    return user


@pytest.fixture
def coach(db: None) -> Any:  # a staff user in the Coaches group
    return _staff_coach("coach-a")


@pytest.fixture
def admin_a(coach: Any) -> Client:
    return logged_in(coach)


@pytest.fixture
def zoe(db: None) -> Player:
    """Another coach's player, with a guardian of her own."""
    team = TeamFactory(name="Seniors B", coaches=[_staff_coach("coach-b")])
    zoe = PlayerFactory(name="Zoe")
    MembershipFactory(team=team, player=zoe)
    GuardianFactory(name="Zoe's dad", player=zoe, player__relation="father")
    return zoe


def test_a_coach_sees_their_players_guardians_only(admin_a: Client, team: Team, zoe: Player) -> None:
    anna = Player.objects.get(name="Alice")
    maria = GuardianFactory(name="Maria", player=anna)
    listing = admin_a.get("/admin/trainings/guardian/").content.decode()
    assert "Maria" in listing and "Zoe&#x27;s dad" not in listing and "Zoe's dad" not in listing
    other = Guardian.objects.get(name="Zoe's dad")
    assert admin_a.get(f"/admin/trainings/guardian/{other.pk}/change/").status_code == 302  # not theirs
    page = admin_a.get(f"/admin/trainings/guardian/{maria.pk}/change/").content.decode()
    assert "Alice" in page and ">Zoe<" not in page  # the player list offers their own players only
    player_page = admin_a.get(f"/admin/trainings/player/{anna.pk}/change/").content.decode()
    assert "Maria (mother)" in player_page


def test_a_coach_adds_a_guardian_for_their_player_and_cannot_link_another_coachs(
    admin_a: Client, team: Team, zoe: Player
) -> None:
    alice = Player.objects.get(name="Alice")
    form = {
        "name": "Paul",
        "language": "fr",
        "time_zone": "Europe/Paris",
        "guardianships-TOTAL_FORMS": 1,
        "guardianships-INITIAL_FORMS": 0,
        "guardianships-MIN_NUM_FORMS": 0,
        "guardianships-MAX_NUM_FORMS": 1000,
        "guardianships-0-player": alice.pk,
        "guardianships-0-relation": "father",
        "devices-TOTAL_FORMS": 0,
        "devices-INITIAL_FORMS": 0,
        "devices-MIN_NUM_FORMS": 0,
        "devices-MAX_NUM_FORMS": 1000,
    }
    response = admin_a.post("/admin/trainings/guardian/add/", form)
    assert response.status_code == 302, response.content.decode()[:3000]
    assert list(
        Guardianship.objects.filter(guardian__name="Paul").values_list("player__name", "relation")
    ) == [("Alice", "father")]
    refused = {**form, "name": "Intruder", "guardianships-0-player": zoe.pk}
    response = admin_a.post("/admin/trainings/guardian/add/", refused)
    assert response.status_code == 200 and "errorlist" in response.content.decode()
    assert not Guardian.objects.filter(name="Intruder").exists()


def test_a_team_says_who_its_reminders_go_to(admin_a: Client, team: Team) -> None:
    assert team.reminds == "player"
    page = admin_a.get(f"/admin/trainings/team/{team.pk}/change/").content.decode()
    assert 'name="reminds"' in page and "youth teams" in page


def test_a_device_belongs_to_a_player_or_a_guardian_never_both(team: Team) -> None:
    alice = Player.objects.get(name="Alice")
    maria = GuardianFactory(name="Maria", player=alice, devices=[])
    with pytest.raises(IntegrityError):
        Device.objects.create(player=alice, guardian=maria, provider="fcm", platform="android", token="x")


def test_a_guardians_login_is_nobody_elses(admin_a: Client, team: Team) -> None:
    """The guardian's account is offered like a player's: never a staff account, nor a player's login."""
    player_login = UserFactory(username="alice-login")
    Player.objects.filter(name="Alice").update(user=player_login)
    free = UserFactory(username="maria-login")
    page = admin_a.get("/admin/trainings/guardian/add/")
    assert page.status_code == 200
    form = page.context["adminform"].form
    offered = set(form.fields["user"].queryset.values_list("username", flat=True))
    assert "maria-login" in offered and "alice-login" not in offered and "coach-a" not in offered
    maria = GuardianFactory(name="Maria", user=free)
    assert "maria-login" not in set(
        logged_in(UserFactory(username="root", is_staff=True, is_superuser=True))
        .get("/admin/trainings/player/add/")
        .context["adminform"]
        .form.fields["user"]
        .queryset.values_list("username", flat=True)
    )
    assert maria.user == free
