"""A coach's squad in Chromium: the training page has the minimum and maximum, the player grid shows who is
on the waiting list, and raising the maximum in the form gives the first waiting player the place.

The screenshots are docs/squads.md's pictures: with DOCS_SCREENSHOTS=1 they are written to docs/squads/
(`DOCS_SCREENSHOTS=1 .venv/bin/pytest tests/browser/test_squads_in_chromium.py`, with DATABASE_URL on
PostgreSQL), otherwise under var/artifacts/browser/squads-*.png."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from tests.browser.conftest import ARTIFACTS, log_in
from tests.factories import MembershipFactory, PlayerFactory, TeamFactory, UserFactory, training_made
from trainings.access import coach_group_ensure
from trainings.models import Invitation, InvitationStatus, ReminderRule, ReminderTemplate
from trainings.planning.defaults import rules_seed
from trainings.planning.writes import invitation_respond

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

DOCS = Path(__file__).resolve().parents[2] / "docs" / "squads"


def _picture(target: Any, name: str) -> Path:
    folder = DOCS if os.environ.get("DOCS_SCREENSHOTS") == "1" else ARTIFACTS
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (f"{name}.png" if folder == DOCS else f"squads-{name}.png")
    target.screenshot(path=str(path))
    return path


def test_the_grid_shows_the_waiting_list_and_a_raised_maximum_moves_it_up(
    live_server: Any, page: Any
) -> None:
    rules_seed(ReminderRule, ReminderTemplate)
    user = UserFactory(username="coach", is_staff=True, first_name="Camille")
    user.groups.add(coach_group_ensure())
    team = TeamFactory(name="U15", coaches=[user])
    for name in ("Anna", "Ben", "Chloé", "Dan", "Eve"):
        MembershipFactory(team=team, player=PlayerFactory(name=name))
    start = (timezone.now() + dt.timedelta(days=4)).replace(hour=16, minute=0, second=0, microsecond=0)
    training = training_made(team, start, title="Match day", min_players=2, max_players=3)
    for name in ("Anna", "Ben", "Chloé", "Dan"):  # Dan accepts fourth: the squad is full
        invitation_respond(invitation=Invitation.objects.get(training=training, player__name=name),
                           status=InvitationStatus.ACCEPTED)  # fmt: skip

    log_in(page, live_server.url, "coach")
    page.goto(f"{live_server.url}/admin/trainings/training/{training.pk}/change/")
    assert page.input_value("#id_min_players") == "2"
    assert page.input_value("#id_max_players") == "3"
    grid = page.locator("table.player-grid")
    dan = grid.locator("tr", has_text="Dan")
    assert "Waiting list" in dan.inner_text()
    assert "Accepted" in grid.locator("tr", has_text="Chloé").inner_text()
    page.locator("fieldset", has=grid).scroll_into_view_if_needed()
    _picture(page.locator("fieldset", has=grid), "waiting-list")
    _picture(page.locator("#id_max_players").locator("xpath=ancestor::fieldset[1]"), "squad-size")

    page.fill("#id_max_players", "4")
    page.click("input[name=_continue]")
    page.wait_for_selector(".messagelist")
    assert "Accepted" in page.locator("table.player-grid tr", has_text="Dan").inner_text()
    assert Invitation.objects.get(training=training, player__name="Dan").status == InvitationStatus.ACCEPTED
