"""Guardians in the admin: a coach sees and links the guardians of their own teams' players only; a
player's page names their guardians; a team says who its reminders go to."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import IntegrityError
from django.test import Client

from delivery.models import Device
from tests.clients import logged_in
from tests.factories import (
    GuardianFactory,
    MembershipFactory,
    PlayerFactory,
    TeamFactory,
    UserFactory,
)
from trainings.access import coach_group_ensure
from trainings.models import Guardian, Guardianship, Player, Team

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


@pytest.mark.parametrize("who", ["coach", "operator"])
def test_a_guardian_with_a_login_has_a_change_page_that_saves(admin_a: Client, team: Team, who: str) -> None:
    """The login field offered the free accounts `|` the guardian's own: a distinct query with one that
    is not, which Django refuses (a 500 for every guardian with a login)."""
    login = UserFactory(username="maria-login")
    maria = GuardianFactory(name="Maria", user=login, player=Player.objects.get(name="Alice"), devices=[])
    client = admin_a if who == "coach" else logged_in(UserFactory(is_staff=True, is_superuser=True))
    url = f"/admin/trainings/guardian/{maria.pk}/change/"

    page = client.get(url)
    assert page.status_code == 200
    offered = set(page.context["adminform"].form.fields["user"].queryset.values_list("username", flat=True))
    assert "maria-login" in offered and "coach-a" not in offered

    saved = client.post(url, {**_as_posted(page), "name": "Maria B."})
    assert saved.status_code == 302, saved.content.decode()[:3000]
    maria.refresh_from_db()
    assert (maria.name, maria.user) == ("Maria B.", login)
    unlinked = client.post(url, {**_as_posted(client.get(url)), "user": ""})
    assert unlinked.status_code == 302
    maria.refresh_from_db()
    assert maria.user is None


def test_a_coach_cannot_add_a_guardian_without_a_player(admin_a: Client, team: Team) -> None:
    """Saved without one of the coach's players, the guardian would be nobody the coach can see: "added
    successfully", then "doesn't exist", and a row no coach can delete."""
    form = {**_as_posted(admin_a.get("/admin/trainings/guardian/add/")), "name": "Nobody's"}

    response = admin_a.post("/admin/trainings/guardian/add/", form)

    assert response.status_code == 200
    assert "A guardian guards at least one player" in response.content.decode()
    assert not Guardian.objects.filter(name="Nobody's").exists()


def test_a_coach_cannot_take_a_guardians_last_player_but_an_operator_can(admin_a: Client, team: Team) -> None:
    maria = GuardianFactory(name="Maria", player=Player.objects.get(name="Alice"), devices=[])
    url = f"/admin/trainings/guardian/{maria.pk}/change/"
    form = {**_as_posted(admin_a.get(url)), "guardianships-0-DELETE": "on"}

    refused = admin_a.post(url, form)
    assert refused.status_code == 200 and "to remove this guardian, delete them" in refused.content.decode()
    assert maria.guardianships.count() == 1

    operator = logged_in(UserFactory(is_staff=True, is_superuser=True))
    assert operator.post(url, form).status_code == 302
    assert maria.guardianships.count() == 0


def test_a_coach_deletes_a_guardian_of_their_players_alone(admin_a: Client, team: Team) -> None:
    maria = GuardianFactory(name="Maria", player=Player.objects.get(name="Alice"))  # with a device
    url = f"/admin/trainings/guardian/{maria.pk}/delete/"

    assert admin_a.get(url).status_code == 200
    assert admin_a.post(url, {"post": "yes"}).status_code == 302
    assert not Guardian.objects.filter(pk=maria.pk).exists()


def test_a_guardian_shared_with_another_team_shows_a_coach_only_their_rows(
    admin_a: Client, team: Team, zoe: Player
) -> None:
    """Another coach's player is neither shown nor lost: the coach unlinks their own, the guardian stays
    with Zoe, and only an operator deletes them."""
    shared = Guardian.objects.get(name="Zoe's dad")
    Guardianship.objects.create(guardian=shared, player=Player.objects.get(name="Alice"), relation="uncle")
    url = f"/admin/trainings/guardian/{shared.pk}/change/"

    page = admin_a.get(url)
    assert page.status_code == 200 and "Zoe" not in page.content.decode().replace("Zoe&#x27;s dad", "")
    assert admin_a.get(f"/admin/trainings/guardian/{shared.pk}/delete/").status_code == 403
    unlinked = admin_a.post(url, {**_as_posted(page), "guardianships-0-DELETE": "on"})

    assert unlinked.status_code == 302, unlinked.content.decode()[:3000]
    assert list(shared.guardianships.values_list("player__name", flat=True)) == ["Zoe"]
