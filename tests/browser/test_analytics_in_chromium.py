"""The reminder effectiveness page in Chromium, as a coach: three trainings of the known questionnaire
(tests/trainings/analytics_data.py) on three days, so three players are chronic non-responders; the
charts, the table and the player list read right and fit the window. Screenshot:
var/artifacts/browser/analytics-coach.png."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from tests.browser.conftest import fits_without_sideways_scroll, log_in, shot
from tests.factories import TeamFactory, UserFactory
from tests.trainings.analytics_data import known_training
from trainings.access import coach_group_ensure
from trainings.analytics.summary import local_day, summaries_rebuild
from trainings.models import ReminderRule, ReminderTemplate
from trainings.planning.defaults import rules_seed

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_a_coach_reads_which_reminders_work(live_server: Any, page: Any) -> None:
    rules_seed(ReminderRule, ReminderTemplate)
    coach = UserFactory(username="coach", is_staff=True)
    coach.groups.add(coach_group_ensure())
    team = TeamFactory(name="U15 Girls", coaches=[coach])
    TeamFactory(name="U17 Boys", coaches=[coach])
    days = []
    for back in (2, 4, 6):
        start = dt.datetime.combine(
            timezone.localdate() - dt.timedelta(days=back), dt.time(17), tzinfo=dt.UTC
        )
        days.append(local_day(known_training(team, start)))
    summaries_rebuild(since=min(days), until=max(days))

    log_in(page, live_server.url, "coach")
    page.click("text=Reminder effectiveness")
    page.wait_for_selector("svg.time-to-answer")
    page.select_option("select[name=team]", label="U15 Girls")
    page.fill("input[name=since]", min(days).isoformat())
    page.fill("input[name=until]", max(days).isoformat())
    page.click("#analytics-filters button")
    page.wait_for_selector("table.analytics-players")

    assert page.locator("svg.answer-rate > rect.within-15").count() == 4  # 90, 75, 30 and 15 min got answers
    assert page.locator("svg.time-to-answer polyline").count() == 6
    assert page.inner_text('tr[data-offset="90m"] td[data-figure="answered"]') == "6 (29%)"  # 2 of 7, 3 times
    assert page.inner_text('[data-figure="unreminded-PRE"]') == "6"
    chronic = page.locator("tr.chronic td:first-child").all_inner_texts()
    assert sorted(name.split()[0] for name in chronic) == ["Cleo", "Eva", "Ida"]
    assert "3 chronic non-responders" in page.inner_text("#players h2")
    assert fits_without_sideways_scroll(page)
    shot(page, "analytics-coach")

    page.fill("input[name=since]", max(days).isoformat())
    page.fill("input[name=until]", min(days).isoformat())
    page.click("#analytics-filters button")
    assert "is before since" in page.inner_text("#analytics-errors")
