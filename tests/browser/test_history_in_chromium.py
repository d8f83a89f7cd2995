"""A coach changes a training in the admin in a real browser, then reads who changed what on its History
page (issue 16.7). The screenshot lands in var/artifacts/browser/training-history.png."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from tests.browser.conftest import log_in, shot
from tests.factories import TeamFactory, UserFactory
from trainings.access import coach_group_ensure
from trainings.models import ReminderRule, ReminderTemplate, Training
from trainings.planning.defaults import rules_seed
from trainings.planning.writes import training_create

pytestmark = [pytest.mark.postgres, pytest.mark.rabbitmq, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def training() -> Training:
    rules_seed(ReminderRule, ReminderTemplate)  # a transactional test starts from empty tables
    coach = UserFactory(username="coach", is_staff=True)
    coach.groups.add(coach_group_ensure())
    team = TeamFactory(name="U15 Paris", time_zone="Europe/Paris", coaches=[coach])
    start = (timezone.now() + dt.timedelta(days=3)).replace(microsecond=0)
    return training_create(
        team=team, title="Sprint drills", start=start, end=start + dt.timedelta(minutes=90),
        time_zone="Europe/Paris", location="Stade Charléty",
    )  # fmt: skip


def test_a_coach_sees_their_change_and_their_name_on_the_trainings_history_page(
    page: Any, live_server: Any, training: Training
) -> None:
    log_in(page, live_server.url, "coach")
    page.goto(f"{live_server.url}/admin/trainings/training/{training.pk}/change/")
    page.fill("#id_location", "Gymnase Jean Dame (rain)")
    page.click("input[name=_save]")
    page.wait_for_selector(".messagelist")

    page.goto(f"{live_server.url}/admin/trainings/training/{training.pk}/change/")
    page.click(".object-tools a.historylink")
    page.wait_for_selector("#change-history")
    rows = page.locator("#change-history tbody tr")
    assert rows.count() == 2  # created by the service (no request: no user), changed by the coach
    changed = rows.first.inner_text()
    assert "coach" in changed and "Changed" in changed
    assert "location" in changed.lower()
    assert "Stade Charléty" in changed and "Gymnase Jean Dame (rain)" in changed
    assert "None" in rows.nth(1).inner_text()  # made outside a request: nobody to name
    # The author is named, not linked: the coach may not open the user admin (the link was a 403).
    assert rows.first.locator("a[href*='/admin/auth/user/']").count() == 0
    path = shot(page, "training-history")
    assert path.stat().st_size > 10_000

    # An operator reading the same page may open the coach's user: there the author is a link.
    UserFactory(username="operator", is_staff=True, is_superuser=True)
    page.context.clear_cookies()
    log_in(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/admin/trainings/training/{training.pk}/history/")
    author = page.locator("#change-history tbody tr").first.locator("a[href*='/admin/auth/user/']")
    assert author.inner_text() == "coach"
    shot(page, "training-history-operator")
