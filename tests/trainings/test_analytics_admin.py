"""The admin's reminder effectiveness page: a coach reaches it from the index and reads their teams'
figures (those of tests/trainings/analytics_data.py), charts per rule, CSV downloads, and a bad period
said on the page with a 400."""

from __future__ import annotations

import csv
import datetime as dt
import io
from typing import Any

import pytest
from django.utils import timezone

from tests.clients import logged_in
from tests.factories import TeamFactory, UserFactory
from tests.trainings.analytics_data import EXPECTED, EXPECTED_PLAYERS, known_training
from trainings.access import coach_group_ensure
from trainings.analytics.summary import local_day, summaries_rebuild

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def built() -> dict[str, Any]:
    coach = UserFactory(is_staff=True)
    coach.groups.add(coach_group_ensure())
    mine, other = TeamFactory(name="U15", coaches=[coach]), TeamFactory(name="U17")
    start = dt.datetime.combine(timezone.localdate() - dt.timedelta(days=2), dt.time(17), tzinfo=dt.UTC)
    day = local_day(known_training(mine, start))
    known_training(other, start, prefix="B-")
    summaries_rebuild(since=day, until=day)
    return {"coach": logged_in(coach), "mine": mine, "other": other, "day": day.isoformat()}


def test_a_coach_reaches_the_page_from_the_index(built: dict[str, Any]) -> None:
    index = built["coach"].get("/admin/").content.decode()
    assert 'href="/admin/analytics/"' in index


def test_it_shows_the_coachs_figures_with_charts(built: dict[str, Any]) -> None:
    response = built["coach"].get("/admin/analytics/", {"since": built["day"], "until": built["day"]})
    assert response.status_code == 200
    page = response.content.decode()
    assert "U15" in page and "B-Ana" not in page  # the other team's players are not listed
    assert page.count('class="chart answer-rate"') == 1 and page.count('class="chart time-to-answer"') == 1
    assert page.count("<polyline") == 6  # one curve per offset (60 and 45, never answered, lie flat at 0)
    for offset, (_, _, answered, *_) in EXPECTED.items():
        row = page.split(f'<tr data-offset="{offset}">')[1].split("</tr>")[0]
        assert f'<td data-figure="answered">{answered}' in row
    assert 'data-figure="unreminded-PRE">2<' in page
    for name in EXPECTED_PLAYERS:
        assert f'data-player="{name}"' in page


def test_the_csv_downloads_hold_the_same_figures(built: dict[str, Any]) -> None:
    query = {"since": built["day"], "until": built["day"]}
    offsets = built["coach"].get("/admin/analytics/", {**query, "export": "offsets"})
    assert offsets["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(offsets.content.decode())))
    got = {r["offset"]: (int(r["sent"]), int(r["reached"]), int(r["answered"])) for r in rows if r["offset"]}
    assert got == {offset: expected[:3] for offset, expected in EXPECTED.items()}
    assert [r["answered"] for r in rows if r["rule"] == "(no reminder)"] == ["2"]
    players = built["coach"].get("/admin/analytics/", {**query, "export": "players"})
    rows = list(csv.DictReader(io.StringIO(players.content.decode())))
    assert {r["name"]: (int(r["after_last"]), int(r["never"])) for r in rows} == {
        name: (late, never) for name, (_, _, late, never) in EXPECTED_PLAYERS.items()
    }


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ({"since": "2026-03-10", "until": "2026-03-01"}, "until: 2026-03-01 is before since (2026-03-10)."),
        ({"team": "999999"}, "team: No team with this id among the teams you may see."),
    ],
)
def test_a_bad_query_is_said_on_the_page(built: dict[str, Any], query: dict[str, str], says: str) -> None:
    response = built["coach"].get("/admin/analytics/", query)
    assert response.status_code == 400
    assert says in response.content.decode()


def test_another_coachs_team_is_refused(built: dict[str, Any]) -> None:
    response = built["coach"].get("/admin/analytics/", {"team": built["other"].pk})
    assert response.status_code == 400


def test_signed_out_visitors_are_sent_to_the_login(client: Any) -> None:
    response = client.get("/admin/analytics/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_among_hundreds_of_teams_the_team_is_typed_by_id(
    built: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainings.admin import analytics_page

    operator = logged_in(UserFactory(is_staff=True, is_superuser=True))
    assert '<select name="team">' in operator.get("/admin/analytics/").content.decode()
    monkeypatch.setattr(analytics_page, "TEAM_SELECT_MAX", 1)
    page = operator.get("/admin/analytics/", {"team": built["other"].pk}).content.decode()
    assert '<select name="team">' not in page
    assert f'<input type="number" name="team" min="1" value="{built["other"].pk}"' in page
