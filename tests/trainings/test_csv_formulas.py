"""Every CSV export writes a cell that a spreadsheet would run as a formula as text: a player, a team or a
rule named `=HYPERLINK(...)` reaches the coach's and the operator's all-teams downloads with a leading `'`."""

from __future__ import annotations

import csv
import datetime as dt
import io

import pytest
from django.test import Client
from django.utils import timezone

from common.spreadsheet import csv_cell, csv_text
from tests.clients import logged_in
from tests.factories import TeamFactory, UserFactory
from tests.trainings.analytics_data import known_training
from trainings.access import coach_group_ensure
from trainings.analytics.summary import local_day, summaries_rebuild
from trainings.models import Player, ReminderRule

LINK = '=HYPERLINK("https://evil.example/login","Ana")'
TEAM = "@SUM(1+1)*cmd|' /C calc'!A0"


@pytest.mark.parametrize("start", ["=", "+", "-", "@", "\t", "\r"])
def test_it_writes_a_cell_that_starts_like_a_formula_as_text(start: str) -> None:
    value = f"{start}1+2"
    assert csv_cell(value) == f"'{value}"
    assert list(csv.reader(io.StringIO(csv_text(["name"], [[value]]))))[1] == [f"'{value}"]


def test_it_leaves_plain_text_and_numbers_as_they_are() -> None:
    assert [csv_cell(v) for v in ("Ana", "1+2", "a=b", -3, 0.5, True)] == ["Ana", "1+2", "a=b", -3, 0.5, True]


def _downloads(client: Client, day: str) -> dict[str, list[dict[str, str]]]:
    query = {"since": day, "until": day}
    found = {}
    for export in ("offsets", "players"):
        response = client.get("/admin/analytics/", {**query, "export": export})
        assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
        found[export] = list(csv.DictReader(io.StringIO(response.content.decode())))
    return found


@pytest.mark.django_db
@pytest.mark.parametrize("who", ["coach", "operator"])
def test_no_export_carries_a_live_formula(who: str) -> None:
    coach = UserFactory(is_staff=True)
    coach.groups.add(coach_group_ensure())
    team = TeamFactory(name=TEAM, coaches=[coach])
    start = dt.datetime.combine(timezone.localdate() - dt.timedelta(days=2), dt.time(17), tzinfo=dt.UTC)
    day = local_day(known_training(team, start))
    ReminderRule.objects.filter(slug="pre-questionnaire").update(slug="-pre")
    Player.objects.filter(name="Ana").update(name=LINK)
    summaries_rebuild(since=day, until=day)
    user = coach if who == "coach" else UserFactory(is_staff=True, is_superuser=True)

    found = _downloads(logged_in(user), day.isoformat())

    names = {row["name"] for row in found["players"]}
    assert f"'{LINK}" in names and LINK not in names
    assert {row["rule"] for row in found["offsets"]} >= {"'-pre"}
    if who == "coach":  # the coach's scope is named by their teams; the operator's is "all teams"
        assert {row["teams"] for row in found["offsets"] + found["players"]} == {f"'{TEAM}"}
    every_cell = [cell for rows in found.values() for row in rows for cell in row.values()]
    assert not [cell for cell in every_cell if cell.startswith(("=", "+", "@", "\t", "\r"))]
