"""The analytics API: the figures of tests/trainings/analytics_data.py as JSON, scoped like the rest of the
API, a 400 naming the field for a bad query, and both endpoints in the OpenAPI schema."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from tests.clients import api_as
from tests.factories import TeamFactory, UserFactory
from tests.trainings.analytics_data import EXPECTED, EXPECTED_PLAYERS, known_training
from trainings.analytics.figures import PLAYER_LIST_TEAMS
from trainings.analytics.summary import local_day, summaries_rebuild

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def built() -> dict[str, Any]:
    """A coach's team and another team, each with the known training two days ago, summarised."""
    coach = UserFactory(is_staff=True)
    mine, other = TeamFactory(name="U15", coaches=[coach]), TeamFactory(name="U17")
    start = dt.datetime.combine(timezone.localdate() - dt.timedelta(days=2), dt.time(17), tzinfo=dt.UTC)
    day = local_day(known_training(mine, start))
    known_training(other, start, prefix="B-")
    summaries_rebuild(since=day, until=day)
    return {"coach": coach, "mine": mine, "other": other, "day": day.isoformat()}


def _offsets(body: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    names = ("sent", "reached", "answered", "answered_15", "answered_60", "answered_in_window")
    return {
        row["offset"]: (
            *(row[n] for n in names),
            row["median_minutes"]["low"] if row["median_minutes"] else None,
        )
        for row in body["offsets"]
    }


def test_it_serves_a_coachs_figures(built: dict[str, Any]) -> None:
    day = built["day"]
    response = api_as(built["coach"]).get("/api/analytics/offsets/", {"since": day, "until": day})
    assert response.status_code == 200, response.content
    body = response.json()
    assert _offsets(body) == EXPECTED  # the other team's identical training is not added
    assert body["teams"] == "U15"
    first = body["offsets"][0]
    assert (first["offset"], first["answer_rate"], first["reached_rate"]) == ("90m", 2 / 7, 7 / 8)
    assert body["unreminded"] == [
        {"kind": "PRE", "kind_label": "Pre-training questionnaire", "answers": 2, "in_window": 2}
    ]

    players = api_as(built["coach"]).get("/api/analytics/players/", {"since": day, "until": day}).json()
    got = {p["name"]: (p["before_reminder"], p["after_reminder"], p["after_last"], p["never"])
           for p in players["players"]}  # fmt: skip
    assert got == EXPECTED_PLAYERS
    assert [p["name"] for p in players["players"] if p["chronic"]] == []  # asked once: too few to judge


def test_an_operator_sees_every_team(built: dict[str, Any]) -> None:
    operator = UserFactory(is_staff=True, is_superuser=True)
    day = built["day"]
    body = api_as(operator).get("/api/analytics/offsets/", {"since": day, "until": day}).json()
    assert body["teams"] == "all teams"
    assert _offsets(body)["90m"][:3] == (16, 14, 4)
    one = api_as(operator).get(
        "/api/analytics/offsets/", {"since": day, "until": day, "team": built["other"].pk}
    )
    assert _offsets(one.json()) == EXPECTED
    players = api_as(operator).get("/api/analytics/players/", {"since": day, "until": day}).json()
    assert len(players["players"]) == 2 * len(EXPECTED_PLAYERS)


@pytest.mark.parametrize(
    ("query", "field", "reason"),
    [
        ({"since": "2026-03-10", "until": "2026-03-01"}, "until", "is before since"),
        ({"since": "2025-01-01", "until": "2026-03-01"}, "since", "at most 366"),
        ({"since": "yesterday"}, "since", "Date has wrong format"),
        ({"kind": "NAP"}, "kind", "not a valid choice"),
        ({"team": "0"}, "team", "greater than or equal to 1"),
        ({"until": "0001-01-05"}, "until", "too early"),
    ],
)
def test_a_bad_query_is_a_400_naming_the_field(
    built: dict[str, Any], query: dict[str, str], field: str, reason: str
) -> None:
    for path in ("/api/analytics/offsets/", "/api/analytics/players/"):
        response = api_as(built["coach"]).get(path, query)
        assert response.status_code == 400
        assert reason in " ".join(response.json()[field])


def test_another_coachs_team_is_a_400_on_team(built: dict[str, Any]) -> None:
    response = api_as(built["coach"]).get("/api/analytics/offsets/", {"team": built["other"].pk})
    assert response.status_code == 400
    assert response.json() == {"team": ["No team with this id among the teams you may see."]}


def test_the_player_list_wants_a_team_among_many(built: dict[str, Any]) -> None:
    operator = UserFactory(is_staff=True, is_superuser=True)
    TeamFactory.create_batch(PLAYER_LIST_TEAMS)
    response = api_as(operator).get("/api/analytics/players/")
    assert response.status_code == 400
    assert "choose a team" in response.json()["team"][0]
    assert api_as(operator).get("/api/analytics/players/", {"team": built["mine"].pk}).status_code == 200


def test_anonymous_callers_get_a_401(client: Any) -> None:
    assert client.get("/api/analytics/offsets/").status_code == 401


def test_both_endpoints_are_in_the_schema(client: Any) -> None:
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    for path in ("/api/analytics/offsets/", "/api/analytics/players/"):
        operation = schema["paths"][path]["get"]
        assert {p["name"] for p in operation["parameters"]} >= {"since", "until", "team", "kind"}
        assert {"200", "400"} <= set(operation["responses"])


def test_the_curve_counts_an_answer_at_exactly_m_minutes_as_within_m(built: dict[str, Any]) -> None:
    """90's answers came exactly 2 and 40 minutes after it: the curve holds each from that minute on, as
    "within 15 / 60 min" count an answer at exactly 15 / 60."""
    day = built["day"]
    body = api_as(built["coach"]).get("/api/analytics/offsets/", {"since": day, "until": day}).json()
    row = next(r for r in body["offsets"] if r["offset"] == "90m")
    curve = dict(row["curve"])
    one, two = round(1 / 7, 4), round(2 / 7, 4)
    assert (curve[1], curve[2], curve[39], curve[40]) == (0, one, one, two)
    assert curve[15] == round(row["answered_15"] / row["reached"], 4)
    assert curve[60] == round(row["answered_60"] / row["reached"], 4)
