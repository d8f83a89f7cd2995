"""The coach's training list says what is true of an ended training: "Done" only once its answer windows
have closed; while the post-training questionnaire is still asked for, when it closes, in the training's
local time."""

from __future__ import annotations

import datetime as dt
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.test import Client
from django.utils import timezone

from tests.clients import logged_in
from tests.factories import UserFactory, training_made
from trainings.access import coach_group_ensure
from trainings.models import ReminderRule, Team


@pytest.fixture
def coach(db: None) -> Any:  # a staff user in the Coaches group (the conftest's coach is not staff)
    user = UserFactory(username="coach-a", is_staff=True)
    user.groups.add(coach_group_ensure())
    return user


@pytest.fixture
def admin_a(coach: Any) -> Client:
    return logged_in(coach)


def _state(admin: Client, title: str) -> str:
    page = admin.get("/admin/trainings/training/")
    assert page.status_code == 200
    html = page.content.decode()
    row = html[html.index(title) :]
    cell = row[row.index('class="field-state"') :]
    return cell[cell.index(">") + 1 : cell.index("</td>")]


def test_an_ended_training_whose_post_questionnaire_is_open_says_until_when(
    admin_a: Client, team: Team, rules: dict[str, ReminderRule]
) -> None:
    end = timezone.now().replace(microsecond=0) - dt.timedelta(minutes=30)
    training_made(team, end - dt.timedelta(minutes=90), title="Evening session", time_zone="Europe/Paris")

    state = _state(admin_a, "Evening session")

    local = timezone.localtime(end + dt.timedelta(minutes=180), ZoneInfo("Europe/Paris"))  # the last 180m
    assert "Done" not in state
    assert state.startswith("Ended; questionnaire open until ")
    assert f"{local:%Y-%m-%d}" in state and f"{local:%H:%M:%S} {local.tzname()}" in state


def test_an_ended_training_whose_windows_have_closed_is_done(
    admin_a: Client, team: Team, rules: dict[str, ReminderRule]
) -> None:
    start = timezone.now() - dt.timedelta(days=2)
    training_made(team, start, title="Old session")

    assert _state(admin_a, "Old session") == "Done"
