"""The team's quiet hours as an operator edits them in the admin: the help text says what the window
promises players, and the one exception (news of a training moved to start before it ends goes at once)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import log_in, shot
from tests.factories import TeamFactory, UserFactory

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_the_team_form_explains_quiet_hours_and_their_one_exception(page: Any, live_server: Any) -> None:
    UserFactory(username="operator", is_staff=True, is_superuser=True)
    team = TeamFactory(name="U15 Paris", time_zone="Europe/Paris")
    log_in(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/admin/trainings/team/{team.pk}/change/")
    start = page.locator(".field-quiet_start").inner_text()
    end = page.locator(".field-quiet_end").inner_text()
    assert "Players get no push from (local time)" in start
    assert "then held pushes go. Exception: news of a move to before then." in end
    shot(page, "admin-team-quiet-hours")
