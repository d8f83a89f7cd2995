"""The roster one row at a time: /api/teams/, /api/players/, /api/teams/{id}/members/ and guardians'
external ids (trainings/roster/). Who may do what per caller is in the authorization matrix; here, what
each route does with its rows."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from delivery.models import Device
from tests.clients import api_as
from tests.factories import MembershipFactory, PlayerFactory, TeamFactory, rules_seeded, training_made
from tests.trainings.roster_people import coach, integration_caller, operator
from trainings.models import Guardian, Membership, Player, Team

pytestmark = pytest.mark.django_db

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)


def _team(api: Any, **fields: Any) -> dict[str, Any]:
    response = api.post("/api/teams/", {"name": "U15", "time_zone": "Europe/Berlin", **fields}, format="json")
    assert response.status_code == 201, response.json()
    return dict(response.json())


def test_an_integration_caller_creates_reads_changes_and_finds_its_team_by_external_id() -> None:
    api = api_as(integration_caller())
    team = _team(api, external_id="club-7", reminds="both")

    assert (team["quiet_start"], team["quiet_end"]) == ("22:00:00", "07:00:00")  # a new team's default
    changed = api.patch(
        f"/api/teams/{team['id']}/",
        {"name": "U15 A", "quiet_start": None, "quiet_end": None, "digest_before": "2h"},
        format="json",
    )
    assert changed.status_code == 200, changed.json()
    assert changed.json()["name"] == "U15 A" and changed.json()["quiet_start"] is None
    stored = Team.objects.get(pk=team["id"])
    assert (stored.digest_before, stored.reminds, stored.external_id) == ("2h", "both", "club-7")
    found = api.get("/api/teams/", {"external_id": "club-7"}).json()["results"]
    assert [row["id"] for row in found] == [team["id"]]
    assert api.get("/api/teams/", {"external_id": "nope"}).json()["results"] == []


def test_external_ids_are_unique_per_caller_and_callers_do_not_see_each_other() -> None:
    first, second = api_as(integration_caller("platform-a")), api_as(integration_caller("platform-b"))
    team = _team(first, external_id="t1")

    again = first.post("/api/teams/", {"name": "Other", "external_id": "t1"}, format="json")
    theirs = _team(second, external_id="t1")  # the same id is another caller's own

    assert again.status_code == 400 and "external_id" in again.json()
    assert first.get(f"/api/teams/{theirs['id']}/").status_code == 404
    assert second.get(f"/api/teams/{team['id']}/").status_code == 404
    assert [row["id"] for row in second.get("/api/teams/").json()["results"]] == [theirs["id"]]
    assert Team.objects.count() == 2


def test_a_bad_field_is_a_400_naming_it_and_writes_nothing() -> None:
    api = api_as(integration_caller())
    for body, field in (
        ({"name": "T", "time_zone": "Mars/Olympus"}, "time_zone"),
        ({"name": "T", "quiet_start": "22:00"}, "quiet_end"),
        ({"name": "T", "quiet_end": None}, "quiet_end"),  # was a 500: the default start stayed, alone
        ({"name": "T", "digest_before": "soon"}, "digest_before"),
        ({"name": "T", "timezone": "UTC"}, "timezone"),  # an unknown field
    ):
        response = api.post("/api/teams/", body, format="json")
        assert response.status_code == 400 and field in response.json(), response.json()
    assert not Team.objects.exists()


def test_a_player_on_a_team_lives_in_its_zone_and_their_email_is_their_email_device() -> None:
    api = api_as(integration_caller())
    team = _team(api)

    response = api.post(
        "/api/players/",
        {
            "name": "Ana",
            "language": "de",
            "email": "ana@example.com",
            "external_id": "p1",
            "team": team["id"],
        },
        format="json",
    )

    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["time_zone"], body["email"], body["teams"], body["language"]) == (
        "Europe/Berlin", "ana@example.com", [team["id"]], "de",
    )  # fmt: skip
    device = Device.objects.get(player_id=body["id"])
    assert (device.provider, device.platform, device.token) == ("email", "email", "ana@example.com")
    # A new address replaces the old one; null removes it.
    api.patch(f"/api/players/{body['id']}/", {"email": "ana@club.example"}, format="json")
    assert list(Device.objects.filter(player_id=body["id"]).values_list("token", flat=True)) == [
        "ana@club.example"
    ]
    assert api.get(f"/api/players/{body['id']}/").json()["email"] == "ana@club.example"
    assert api.patch(f"/api/players/{body['id']}/", {"email": None}, format="json").json()["email"] is None
    assert not Device.objects.filter(player_id=body["id"]).exists()
    # The player's own devices route keeps working beside the new ones.
    assert api.get(f"/api/players/{body['id']}/devices/").status_code == 200


def test_a_players_language_zone_and_email_are_checked() -> None:
    api = api_as(integration_caller())
    for body, field in (
        ({"name": "A", "language": "klingon"}, "language"),
        ({"name": "A", "time_zone": "Europe/Atlantis"}, "time_zone"),
        ({"name": "A", "email": "not an address"}, "email"),
    ):
        response = api.post("/api/players/", body, format="json")
        assert response.status_code == 400 and field in response.json(), response.json()
    assert not Player.objects.exists()


def test_an_email_address_of_someone_outside_the_callers_roster_is_refused() -> None:
    stranger = PlayerFactory()
    Device.objects.create(player=stranger, provider="email", platform="email", token="taken@example.com")
    api = api_as(integration_caller())

    response = api.post("/api/players/", {"name": "A", "email": "taken@example.com"}, format="json")

    assert response.status_code == 400 and "email" in response.json()
    assert Device.objects.get(token="taken@example.com").player_id == stranger.pk


def test_members_put_sets_the_active_roster_and_keeps_who_left() -> None:
    caller = integration_caller()
    api = api_as(caller)
    team = _team(api)
    ids = [api.post("/api/players/", {"name": n}, format="json").json()["id"] for n in ("A", "B", "C")]

    first = api.put(f"/api/teams/{team['id']}/members/", {"players": ids[:2]}, format="json")
    second = api.put(f"/api/teams/{team['id']}/members/", {"players": ids[1:]}, format="json")
    again = api.put(f"/api/teams/{team['id']}/members/", {"players": ids[1:]}, format="json")

    assert first.json() == {"players": ids[:2]}
    assert second.json() == again.json() == {"players": ids[1:]}
    assert api.get(f"/api/teams/{team['id']}/members/").json() == {"players": ids[1:]}
    rows = dict(Membership.objects.filter(team_id=team["id"]).values_list("player_id", "active"))
    assert rows == {ids[0]: False, ids[1]: True, ids[2]: True}  # who left stays, inactive
    back = api.put(f"/api/teams/{team['id']}/members/", {"players": ids}, format="json")
    assert back.json() == {"players": ids}
    assert Membership.objects.filter(team_id=team["id"]).count() == 3


def test_members_put_refuses_a_player_the_caller_does_not_see() -> None:
    api = api_as(integration_caller())
    team = _team(api)
    stranger = PlayerFactory()

    response = api.put(f"/api/teams/{team['id']}/members/", {"players": [stranger.pk]}, format="json")
    twice = api.put(f"/api/teams/{team['id']}/members/", {"players": []}, format="json")

    assert response.status_code == 400 and "players" in response.json()
    assert twice.status_code == 200
    assert not Membership.objects.exists()


def test_deleting_a_team_or_player_with_history_is_a_409_naming_what_holds_it() -> None:
    rules_seeded()
    api = api_as(operator())
    team = TeamFactory()
    player = PlayerFactory()
    MembershipFactory(team=team, player=player)
    training_made(team, START)
    spare_team, spare_player = TeamFactory(), PlayerFactory()

    team_refused = api.delete(f"/api/teams/{team.pk}/")
    player_refused = api.delete(f"/api/players/{player.pk}/")

    assert team_refused.status_code == 409
    assert team_refused.json()["held_by"] == {"trainings": 1}
    assert "trainings" in team_refused.json()["detail"]
    assert player_refused.status_code == 409 and player_refused.json()["held_by"] == {"invitations": 1}
    assert Team.objects.filter(pk=team.pk).exists() and Player.objects.filter(pk=player.pk).exists()
    assert api.delete(f"/api/teams/{spare_team.pk}/").status_code == 204
    assert api.delete(f"/api/players/{spare_player.pk}/").status_code == 204
    assert not Team.objects.filter(pk=spare_team.pk).exists()


def test_the_schema_documents_the_409_of_a_delete() -> None:
    from django.test import Client

    schema = Client().get("/api/schema/", {"format": "json"}).json()
    for path in ("/api/teams/{id}/", "/api/players/{id}/"):
        conflict = schema["paths"][path]["delete"]["responses"]["409"]
        assert "held_by" in str(conflict["content"]), conflict


def test_a_coach_changes_their_teams_and_adds_players_onto_them_but_creates_and_deletes_no_team() -> None:
    user = coach()
    own = TeamFactory(coaches=[user], time_zone="America/New_York")
    other = TeamFactory()
    api = api_as(user)

    assert api.post("/api/teams/", {"name": "Mine"}, format="json").status_code == 403
    assert api.patch(f"/api/teams/{own.pk}/", {"name": "Renamed"}, format="json").status_code == 200
    assert api.patch(f"/api/teams/{other.pk}/", {"name": "Hijacked"}, format="json").status_code == 404
    assert api.delete(f"/api/teams/{own.pk}/").status_code == 403
    no_team = api.post("/api/players/", {"name": "Lost"}, format="json")
    assert no_team.status_code == 400 and "team" in no_team.json()
    created = api.post("/api/players/", {"name": "Bea", "team": own.pk}, format="json")
    assert created.status_code == 201 and created.json()["time_zone"] == "America/New_York"
    elsewhere = api.post("/api/players/", {"name": "Cy", "team": other.pk}, format="json")
    assert elsewhere.status_code == 400 and "team" in elsewhere.json()
    assert api.delete(f"/api/players/{created.json()['id']}/").status_code == 403
    assert Team.objects.get(pk=own.pk).name == "Renamed" and Team.objects.get(pk=other.pk).name != "Hijacked"


def test_guardians_carry_an_external_id_of_their_creator() -> None:
    api = api_as(integration_caller())
    player = api.post("/api/players/", {"name": "Kid", "external_id": "k1"}, format="json").json()

    made = api.post(
        "/api/guardians/",
        {"name": "Mum", "external_id": "g1", "players": [{"player": player["id"]}]},
        format="json",
    )
    again = api.post(
        "/api/guardians/",
        {"name": "Dad", "external_id": "g1", "players": [{"player": player["id"]}]},
        format="json",
    )
    bad_language = api.post(
        "/api/guardians/",
        {"name": "X", "language": "zz", "players": [{"player": player["id"]}]},
        format="json",
    )

    assert made.status_code == 201 and made.json()["external_id"] == "g1"
    assert again.status_code == 400 and "external_id" in again.json()
    assert bad_language.status_code == 400 and "language" in bad_language.json()
    linked = api.post(
        "/api/guardians/",
        {"name": "Gran", "players": [{"player_external_id": "k1", "relation": "grandmother"}]},
        format="json",
    )
    unknown = api.post(
        "/api/guardians/", {"name": "X", "players": [{"player_external_id": "nope"}]}, format="json"
    )
    assert linked.status_code == 201, linked.json()
    assert linked.json()["players"] == [{"player": player["id"], "name": "Kid", "relation": "grandmother"}]
    assert unknown.status_code == 400 and "players" in unknown.json()
    found = api.get("/api/guardians/", {"external_id": "g1"}).json()["results"]
    assert [row["name"] for row in found] == ["Mum"]
    assert Guardian.objects.get(name="Mum").owner.username == "platform"
