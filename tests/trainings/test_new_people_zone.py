"""A player or guardian added by a coach lives in the team's time zone unless someone picks another: in the
admin (the form offers the team's zone, an untouched zone follows the team picked) and through the API (a
new guardian sent without a zone)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests.clients import api_as, logged_in
from tests.factories import MembershipFactory, PlayerFactory, TeamFactory, UserFactory
from trainings.access import coach_group_ensure
from trainings.models import Guardian, Player, Team

pytestmark = pytest.mark.django_db


@pytest.fixture
def coach(db: None) -> Any:
    user = UserFactory(username="coach-ny", is_staff=True)
    user.groups.add(coach_group_ensure())
    return user


@pytest.fixture
def new_york(coach: Any) -> Team:
    team = TeamFactory(name="NY U15", time_zone="America/New_York", coaches=[coach])
    MembershipFactory(team=team, player=PlayerFactory(name="Alice", time_zone="America/New_York"))
    return team


def _as_posted(page: Any) -> dict[str, Any]:
    """The admin page's form and inline rows as a browser posts them unchanged (unticked boxes left out)."""
    forms = [page.context["adminform"].form]
    for inline in page.context["inline_admin_formsets"]:
        forms += [inline.formset.management_form, *inline.formset.initial_forms]
    data: dict[str, Any] = {}
    for form in forms:
        for name in form.fields:
            value = form[name].value()
            if value is not None and value is not False:
                data[form.add_prefix(name)] = "on" if value is True else value
    return data


def test_it_offers_a_new_player_the_team_zone_and_saves_it(coach: Any, new_york: Team) -> None:
    admin = logged_in(coach)
    page = admin.get("/admin/trainings/player/add/")
    assert page.context["adminform"].form["time_zone"].value() == "America/New_York"

    response = admin.post(
        "/admin/trainings/player/add/", {**_as_posted(page), "name": "Bea", "team": new_york.pk}
    )

    assert response.status_code == 302, response.content.decode()[:2000]
    assert Player.objects.get(name="Bea").time_zone == "America/New_York"


def test_it_gives_an_untouched_zone_the_team_picked_and_keeps_one_chosen(coach: Any, new_york: Team) -> None:
    tokyo = TeamFactory(name="Tokyo U17", time_zone="Asia/Tokyo", coaches=[coach])
    admin = logged_in(coach)
    form = _as_posted(admin.get("/admin/trainings/player/add/"))

    admin.post("/admin/trainings/player/add/", {**form, "name": "Kenji", "team": tokyo.pk})
    admin.post(
        "/admin/trainings/player/add/", {**form, "name": "Lea", "team": tokyo.pk, "time_zone": "Europe/Rome"}
    )

    assert Player.objects.get(name="Kenji").time_zone == "Asia/Tokyo"
    assert Player.objects.get(name="Lea").time_zone == "Europe/Rome"


def _guardian_form(admin: Client, player: Player) -> dict[str, Any]:
    page = admin.get("/admin/trainings/guardian/add/")
    return {
        **_as_posted(page),
        "name": "Paul",
        "guardianships-TOTAL_FORMS": 1,
        "guardianships-0-player": player.pk,
        "guardianships-0-relation": "father",
    }


def test_it_offers_a_new_guardian_the_team_zone_and_saves_it(coach: Any, new_york: Team) -> None:
    admin = logged_in(coach)
    page = admin.get("/admin/trainings/guardian/add/")
    assert page.context["adminform"].form["time_zone"].value() == "America/New_York"

    response = admin.post(
        "/admin/trainings/guardian/add/", _guardian_form(admin, Player.objects.get(name="Alice"))
    )

    assert response.status_code == 302, response.content.decode()[:2000]
    assert Guardian.objects.get(name="Paul").time_zone == "America/New_York"


def test_an_operators_new_guardian_lives_in_the_players_team_zone(new_york: Team) -> None:
    admin = logged_in(UserFactory(username="root", is_staff=True, is_superuser=True))

    response = admin.post(
        "/admin/trainings/guardian/add/", _guardian_form(admin, Player.objects.get(name="Alice"))
    )

    assert response.status_code == 302, response.content.decode()[:2000]
    assert Guardian.objects.get(name="Paul").time_zone == "America/New_York"


def test_a_guardian_added_through_the_api_without_a_zone_gets_the_team_zone(
    coach: Any, new_york: Team
) -> None:
    api = api_as(coach)
    alice = Player.objects.get(name="Alice")

    response = api.post("/api/guardians/", {"name": "Paul", "players": [{"player": alice.pk}]}, format="json")
    chosen = api.post(
        "/api/guardians/",
        {"name": "Rosa", "time_zone": "Europe/Madrid", "players": [{"player": alice.pk}]},
        format="json",
    )

    assert response.status_code == 201, response.json()
    assert response.json()["time_zone"] == "America/New_York"
    assert chosen.json()["time_zone"] == "Europe/Madrid"
    renamed = api.patch(f"/api/guardians/{response.json()['id']}/", {"name": "Paulo"}, format="json")
    assert renamed.json()["time_zone"] == "America/New_York"
