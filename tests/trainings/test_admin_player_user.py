"""The player admin's account field: a coach reaches only accounts free to link, by an exact search.

It was a raw id box: the form echoed the username of any id typed into it (team B's players' accounts,
which accounts are players, staff) and saved any id, a superuser's included.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests.clients import logged_in
from tests.factories import MembershipFactory, PlayerFactory, TeamFactory, UserFactory
from trainings.access import coach_group_ensure
from trainings.models import Player, Team

SEARCH = "/admin/trainings/player/user-search/"


def _staff_coach(username: str) -> Any:
    user = UserFactory(username=username, is_staff=True)
    user.groups.add(coach_group_ensure())
    return user


@pytest.fixture
def coach(db: None) -> Any:
    return _staff_coach("coach-a")


@pytest.fixture
def admin_a(coach: Any) -> Client:
    return logged_in(coach)


@pytest.fixture
def accounts(db: None) -> dict[str, Any]:
    return {
        "root": UserFactory(username="root-account", is_staff=True, is_superuser=True),
        "staff": UserFactory(username="staff-account", is_staff=True),
        "free": UserFactory(username="free-account", email="free@example.com"),
        "zoe": UserFactory(username="zoe-account"),
    }


@pytest.fixture
def team_b(accounts: dict[str, Any]) -> Team:
    team = TeamFactory(name="Seniors B", coaches=[_staff_coach("coach-b")])
    MembershipFactory(team=team, player=PlayerFactory(name="Zoe", user=accounts["zoe"]))
    return team


def _form(name: str, user: object, **extra: Any) -> dict[str, Any]:
    return {"name": name, "user": user, "time_zone": "Europe/Paris", "language": "fr"} | extra


def _found(client: Client, term: str) -> list[str]:
    response = client.get(SEARCH, {"term": term, "app_label": "trainings", "model_name": "player"})
    assert response.status_code == 200
    return [row["text"] for row in response.json()["results"]]


def test_the_search_finds_only_a_free_account_by_its_exact_name_or_email(
    admin_a: Client, team: Team, team_b: Team, accounts: dict[str, Any]
) -> None:
    assert _found(admin_a, "free-account") == ["free-account"]
    assert _found(admin_a, "FREE@example.com") == ["free-account"]
    for term in ("", "f", "free", "account", "root-account", "staff-account", "zoe-account", "coach-b"):
        assert _found(admin_a, term) == [], term


def test_a_coach_cannot_bind_a_staff_account_or_another_players_and_never_sees_their_names(
    admin_a: Client, team: Team, team_b: Team, accounts: dict[str, Any]
) -> None:
    page = admin_a.get("/admin/trainings/player/add/").content.decode()
    for name in ("root-account", "staff-account", "zoe-account", "free-account", "coach-b"):
        assert name not in page, name

    for refused in ("root", "staff", "zoe"):
        response = admin_a.post(
            "/admin/trainings/player/add/", _form("Eve", accounts[refused].pk, team=team.pk)
        )
        html = response.content.decode()
        assert response.status_code == 200 and "errorlist" in html, refused
        assert accounts[refused].username not in html, refused
    assert not Player.objects.filter(name="Eve").exists()

    dora = Player.objects.create(name="Dora")
    MembershipFactory(team=team, player=dora)
    response = admin_a.post(f"/admin/trainings/player/{dora.pk}/change/", _form("Dora", accounts["root"].pk))
    assert response.status_code == 200 and "errorlist" in response.content.decode()
    dora.refresh_from_db()
    assert dora.user is None

    response = admin_a.post(f"/admin/trainings/player/{dora.pk}/change/", _form("Dora", accounts["free"].pk))
    assert response.status_code == 302, response.content.decode()[:2000]
    dora.refresh_from_db()
    assert dora.user == accounts["free"]
    # Linked now: no longer offered to anyone, but still Dora's own choice (her form saves unchanged).
    assert _found(admin_a, "free-account") == []
    change = admin_a.get(f"/admin/trainings/player/{dora.pk}/change/").content.decode()
    assert "free-account" in change
    response = admin_a.post(f"/admin/trainings/player/{dora.pk}/change/", _form("Dora", accounts["free"].pk))
    assert response.status_code == 302


def test_someone_who_may_not_change_players_cannot_search(db: None, accounts: dict[str, Any]) -> None:
    outsider = logged_in(UserFactory(username="outsider", is_staff=True))
    assert outsider.get(SEARCH, {"term": "free-account"}).status_code == 403
