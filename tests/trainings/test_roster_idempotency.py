"""`Idempotency-Key` on the roster's creating POSTs (/api/teams/, /api/players/, /api/roster/): a retried
create or sync answers the first response and writes nothing (common/idempotency.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.clients import api_as
from tests.trainings.roster_people import integration_caller
from trainings.models import Player, Team

pytestmark = pytest.mark.django_db


def _post(api: Any, url: str, body: dict[str, Any], key: str) -> Any:
    return api.post(url, body, format="json", headers={"Idempotency-Key": key})


def test_a_retried_team_or_player_create_makes_one_row() -> None:
    api = api_as(integration_caller())
    team = {"name": "U15", "time_zone": "Europe/Berlin", "external_id": "t-1"}
    first = _post(api, "/api/teams/", team, "team-t-1")
    again = _post(api, "/api/teams/", team, "team-t-1")
    assert (first.status_code, again.status_code, again.headers["Idempotent-Replayed"]) == (201, 201, "true")
    assert again.json() == first.json() and Team.objects.count() == 1

    player = {"name": "Ana", "external_id": "p-1"}
    assert _post(api, "/api/players/", player, "player-p-1").status_code == 201
    assert _post(api, "/api/players/", player, "player-p-1").headers["Idempotent-Replayed"] == "true"
    assert _post(api, "/api/players/", {**player, "name": "Other"}, "player-p-1").status_code == 422
    assert Player.objects.count() == 1


def test_a_retried_sync_answers_the_first_counts() -> None:
    api = api_as(integration_caller())
    roster = {"teams": [{"external_id": "t-u15", "name": "U15", "time_zone": "Europe/Lisbon",
                         "players": [{"external_id": "p-ana", "name": "Ana"}]}]}  # fmt: skip
    first = _post(api, "/api/roster/", roster, "sync-1")
    assert first.status_code == 200, first.content
    # Without the key an identical sync answers zeros; with it, the first call's counts again.
    again = _post(api, "/api/roster/", roster, "sync-1")
    assert again.json() == first.json() and again.headers["Idempotent-Replayed"] == "true"
    assert (Team.objects.count(), Player.objects.count()) == (1, 1)
