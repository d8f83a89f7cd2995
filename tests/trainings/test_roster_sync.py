"""POST /api/roster/: a club's roster upserted by external ids, all or nothing (trainings/roster/sync.py)."""

from __future__ import annotations

import copy
import threading
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from delivery.models import Device
from tests.clients import api_as
from tests.factories import PlayerFactory
from tests.trainings.roster_people import coach, integration_caller
from trainings.models import Guardian, Guardianship, Membership, Player, Team

pytestmark = pytest.mark.django_db

ZERO = {"created": 0, "updated": 0, "deactivated": 0}


def _roster() -> dict[str, Any]:
    def mum() -> dict[str, Any]:
        return {"external_id": "g-mum", "name": "Maria", "email": "maria@example.com", "relation": "mother"}

    def ana() -> dict[str, Any]:
        return {"external_id": "p-ana", "name": "Ana", "language": "es", "email": "ana@example.com",
                "guardians": [mum()]}  # fmt: skip

    rui = {"external_id": "p-rui", "name": "Rui", "guardians": [mum()]}
    kenji = {"external_id": "p-kenji", "name": "Kenji"}
    return {
        "teams": [
            {"external_id": "t-u15", "name": "U15", "time_zone": "Europe/Lisbon", "players": [ana(), rui]},
            {"external_id": "t-u17", "name": "U17", "time_zone": "Asia/Tokyo", "players": [ana(), kenji]},
        ],
    }


def _sync(api: Any, body: dict[str, Any]) -> Any:
    return api.post("/api/roster/", body, format="json")


def _snapshot() -> tuple[Any, ...]:
    return (
        list(Team.objects.order_by("pk").values_list("external_id", "name", "time_zone")),
        list(Player.objects.order_by("pk").values_list("external_id", "name", "language", "time_zone")),
        sorted(Membership.objects.values_list("team__external_id", "player__external_id", "active")),
        list(Guardian.objects.order_by("pk").values_list("external_id", "name", "time_zone")),
        sorted(Guardianship.objects.values_list("player__external_id", "guardian__external_id", "relation")),
        sorted(Device.objects.values_list("token", "player__external_id", "guardian__external_id")),
    )


def test_it_creates_the_roster_then_an_identical_call_writes_nothing() -> None:
    api = api_as(integration_caller())

    first = _sync(api, _roster())

    assert first.status_code == 200, first.json()
    assert first.json() == {
        "teams": {"created": 2, "updated": 0, "deactivated": 0},
        "players": {"created": 3, "updated": 0, "deactivated": 0},
        "memberships": {"created": 4, "updated": 0, "deactivated": 0},
        "guardians": {"created": 1, "updated": 0, "deactivated": 0},
        "guardianships": {"created": 2, "updated": 0, "deactivated": 0},
    }
    # A new player lives in their first team's zone; a new guardian in their first player's.
    assert Player.objects.get(external_id="p-kenji").time_zone == "Asia/Tokyo"
    assert Player.objects.get(external_id="p-ana").time_zone == "Europe/Lisbon"
    assert Guardian.objects.get().time_zone == "Europe/Lisbon"
    assert Device.objects.get(token="ana@example.com").player == Player.objects.get(external_id="p-ana")
    assert Device.objects.get(token="maria@example.com").guardian == Guardian.objects.get()
    before = _snapshot()

    with CaptureQueriesContext(connection) as queries:
        second = _sync(api, _roster())

    assert second.json() == dict.fromkeys(first.json(), ZERO)
    assert _snapshot() == before
    writes = [
        q["sql"] for q in queries if (q["sql"] or "").lstrip().startswith(("INSERT", "UPDATE", "DELETE"))
    ]
    assert [w for w in writes if "trainings_" in w] == []  # nothing of the roster written


def test_a_changed_field_updates_that_row_alone() -> None:
    api = api_as(integration_caller())
    _sync(api, _roster())
    body = _roster()
    body["teams"][1]["players"][1]["name"] = "Kenji S."
    body["teams"][0]["name"] = "U15 A"
    body["teams"][0]["players"][1]["guardians"][0]["relation"] = "mother"  # already so

    response = _sync(api, body)

    assert response.json()["teams"] == {"created": 0, "updated": 1, "deactivated": 0}
    assert response.json()["players"] == {"created": 0, "updated": 1, "deactivated": 0}
    assert Player.objects.get(external_id="p-kenji").name == "Kenji S."


def test_an_email_change_alone_updates_the_person() -> None:
    api = api_as(integration_caller())
    _sync(api, _roster())
    body = _roster()
    for team in body["teams"]:
        for player in team["players"]:
            if player["external_id"] == "p-ana":
                player["email"] = "ana@club.example"

    response = _sync(api, body)

    assert response.json()["players"]["updated"] == 1
    ana = Player.objects.get(external_id="p-ana")
    assert list(Device.objects.filter(player=ana).values_list("token", flat=True)) == ["ana@club.example"]


def test_one_bad_row_is_a_400_naming_its_path_and_nothing_is_written() -> None:
    api = api_as(integration_caller())
    body = _roster()
    body["teams"][1]["players"][1]["time_zone"] = "Mars/Olympus"
    body["teams"][0]["players"][0]["guardians"][0]["email"] = "nope"
    body["teams"][0]["players"][1]["language"] = "xx"

    response = _sync(api, body)

    assert response.status_code == 400
    assert set(response.json()) == {
        "teams[1].players[1].time_zone",
        "teams[0].players[0].guardians[0].email",
        "teams[0].players[1].language",
    }, response.json()
    assert _snapshot() == ([], [], [], [], [], [])


@pytest.mark.parametrize(
    ("change", "path"),
    [
        (lambda b: b["teams"][1].update(external_id="t-u15"), "teams[1].external_id"),
        (lambda b: b["teams"][1]["players"][0].update(name="Ana B."), "teams[1].players[0]"),
        (lambda b: b["teams"][1]["players"][1].update(email="ana@example.com"), "teams[1].players[1].email"),
        (
            lambda b: b["teams"][0]["players"].append(dict(b["teams"][0]["players"][1])),
            "teams[0].players[2].external_id",
        ),
    ],
    ids=["team-twice", "player-disagrees", "email-twice", "player-twice-in-a-team"],
)
def test_rows_that_disagree_across_the_body_are_a_400_naming_the_later_one(change: Any, path: str) -> None:
    api = api_as(integration_caller())
    body = _roster()
    change(body)

    response = _sync(api, body)

    assert response.status_code == 400 and path in response.json(), response.json()
    assert not Team.objects.exists()


def test_an_address_held_outside_the_callers_roster_is_refused_and_nothing_written() -> None:
    stranger = PlayerFactory()
    Device.objects.create(player=stranger, provider="email", platform="email", token="ana@example.com")
    api = api_as(integration_caller())

    response = _sync(api, _roster())

    assert response.status_code == 400 and "teams[0].players[0].email" in response.json(), response.json()
    assert not Team.objects.exists() and Device.objects.get(token="ana@example.com").player == stranger


def test_deactivate_missing_ends_what_the_roster_leaves_out_and_keeps_the_rows() -> None:
    api = api_as(integration_caller())
    _sync(api, _roster())
    body = _roster()
    body["teams"] = body["teams"][:1]  # U17 gone (Kenji with it); Rui leaves U15, named nowhere
    body["teams"][0]["players"] = body["teams"][0]["players"][:1]
    body["teams"][0]["players"][0]["guardians"] = []  # Ana's mother is named nowhere now
    body["deactivate_missing"] = True

    response = _sync(api, body)
    again = _sync(api, body)

    assert response.status_code == 200, response.json()
    counts = response.json()
    assert counts["teams"]["deactivated"] == 1  # U17: its memberships ended
    assert counts["players"]["deactivated"] == 2  # Kenji and Rui: named nowhere
    assert counts["memberships"]["deactivated"] == 3  # Rui in U15, Ana and Kenji in U17
    assert counts["guardianships"]["deactivated"] == 2  # Maria of Ana (not listed), of Rui (Maria gone)
    assert counts["guardians"]["deactivated"] == 1
    assert again.json() == dict.fromkeys(counts, ZERO)
    active = set(
        Membership.objects.filter(active=True).values_list("team__external_id", "player__external_id")
    )
    assert active == {("t-u15", "p-ana")}
    assert Membership.objects.count() == 4 and Player.objects.count() == 3 and Team.objects.count() == 2
    assert Guardian.objects.count() == 1 and not Guardianship.objects.exists()


def test_without_deactivate_missing_a_sync_only_adds() -> None:
    api = api_as(integration_caller())
    _sync(api, _roster())
    body = copy.deepcopy(_roster())
    body["teams"] = body["teams"][:1]

    response = _sync(api, body)

    assert response.json() == dict.fromkeys(response.json(), ZERO)
    assert Membership.objects.filter(active=True).count() == 4


def test_a_reactivated_membership_counts_as_updated() -> None:
    api = api_as(integration_caller())
    _sync(api, _roster())
    Membership.objects.filter(player__external_id="p-rui").update(active=False)

    response = _sync(api, _roster())

    assert response.json()["memberships"] == {"created": 0, "updated": 1, "deactivated": 0}


def test_each_caller_syncs_its_own_rows() -> None:
    first, second = api_as(integration_caller("platform-a")), api_as(integration_caller("platform-b"))
    _sync(first, _roster())
    body = _roster()

    taken = _sync(second, body)  # the first caller's player holds ana@example.com
    for team in body["teams"]:
        for player in team["players"]:
            player.pop("email", None)
            for guardian in player.get("guardians", []):
                guardian.pop("email", None)
    response = _sync(second, body)

    assert taken.status_code == 400 and "teams[0].players[0].email" in taken.json()
    assert response.json()["teams"]["created"] == 2  # the same ids, another caller's own rows
    assert Team.objects.count() == 4


def test_coaches_and_anonymous_callers_may_not_sync() -> None:
    from rest_framework.test import APIClient

    assert _sync(api_as(coach()), _roster()).status_code == 403
    assert _sync(APIClient(), _roster()).status_code == 401
    assert not Team.objects.exists()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_syncs_at_once_apply_one_after_the_other() -> None:
    """Both answer 200; the rows exist once; the second of them found the first's rows (it created none)."""
    caller = integration_caller()
    results: list[Any] = []
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def one() -> None:
        try:
            start.wait(timeout=10)
            results.append(_sync(api_as(caller, raise_request_exception=False), _roster()))
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=one) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert errors == []
    assert sorted(r.status_code for r in results) == [200, 200], [r.content[:300] for r in results]
    created = sorted(r.json()["players"]["created"] for r in results)
    assert created == [0, 3]
    assert Team.objects.count() == 2 and Player.objects.count() == 3 and Membership.objects.count() == 4
    assert Device.objects.count() == 2
