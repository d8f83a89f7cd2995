"""The coach's guide (docs/coach-guide.md), step by step in Chromium on the demo data (`demo_trainings`,
the coach / coach login), as the guide tells a coach to do it: an operator adds a team and names its
coach; the coach adds a player, sets quiet hours, creates a training, sees who answered, switches the
digest on and reads the effectiveness page (three past trainings of known answers make its figures).

Each step's screenshot is the guide's picture: with DOCS_SCREENSHOTS=1 they are written to docs/guide/
(refresh them: `DOCS_SCREENSHOTS=1 .venv/bin/pytest tests/browser/test_coach_guide_in_chromium.py`, with
DATABASE_URL on PostgreSQL), otherwise under var/artifacts/browser/guide-*.png."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone

from tests.browser.conftest import ARTIFACTS, fits_without_sideways_scroll, log_in
from tests.factories import UserFactory
from tests.trainings.analytics_data import known_training
from trainings.analytics.summary import local_day, summaries_rebuild
from trainings.models import Coach, Player, ReminderRule, ReminderTemplate, Team, Training
from trainings.planning.defaults import rules_seed

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

DOCS = Path(__file__).resolve().parents[2] / "docs" / "guide"


def _picture(page: Any, name: str) -> Path:
    """The window as the reader sees it (not the whole page: the guide shows one step a picture)."""
    folder = DOCS if os.environ.get("DOCS_SCREENSHOTS") == "1" else ARTIFACTS
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (f"{name}.png" if folder == DOCS else f"guide-{name}.png")
    page.screenshot(path=str(path), full_page=False)
    return path


def _log_in_as_demo_coach(page: Any, base_url: str) -> None:
    page.context.clear_cookies()
    page.goto(f"{base_url}/admin/login/?next=/admin/")
    page.fill("#id_username", "coach")
    page.fill("#id_password", "coach")  # demo_trainings' login
    page.click("input[type=submit]")
    page.wait_for_selector("#site-name")


def _saved(page: Any) -> str:
    page.wait_for_selector(".messagelist")
    return str(page.inner_text(".messagelist"))


def test_the_coachs_guide_step_by_step(live_server: Any, page: Any, settings: Any) -> None:
    rules_seed(ReminderRule, ReminderTemplate)
    settings.DEBUG = True  # demo_trainings runs in development only
    call_command("demo_trainings", stdout=open(os.devnull, "w"))  # noqa: SIM115
    settings.DEBUG = False
    demo = Team.objects.get(name="Demo U15")
    past = []
    for back in (3, 5, 7):  # a few trainings of last week, answered as tests/trainings/analytics_data.py says
        day = timezone.localdate() - dt.timedelta(days=back)
        start = dt.datetime.combine(day, dt.time(16), tzinfo=dt.UTC)
        past.append(local_day(known_training(demo, start)))
    summaries_rebuild(since=min(past), until=max(past))
    UserFactory(username="operator", is_staff=True, is_superuser=True)

    # 1. An operator adds the team and names its coach.
    log_in(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/admin/trainings/team/add/")
    page.fill("#id_name", "U17 Girls")
    page.select_option("#id_coaches_from", label="coach")
    page.click("#id_coaches_add")
    _picture(page, "team-add")
    page.click("input[name=_save]")
    assert "was added successfully" in _saved(page)
    u17 = Team.objects.get(name="U17 Girls")
    assert list(u17.coaches.values_list("username", flat=True)) == ["coach"]
    assert (u17.quiet_start, u17.quiet_end) == (dt.time(22), dt.time(7))  # a new team's quiet hours

    # 2. The coach adds a player to their team.
    _log_in_as_demo_coach(page, live_server.url)
    page.goto(f"{live_server.url}/admin/trainings/player/add/")
    page.fill("#id_name", "Zoe Martin")
    page.select_option("#id_team", label="U17 Girls")
    _picture(page, "player-add")
    page.click("input[name=_save]")
    assert "was added successfully" in _saved(page)
    assert Player.objects.get(name="Zoe Martin").memberships.get().team == u17

    # 3. Quiet hours: when phones stay silent.
    page.goto(f"{live_server.url}/admin/trainings/team/{u17.pk}/change/")
    page.fill("#id_quiet_start", "21:30")
    page.fill("#id_quiet_end", "07:30")
    page.locator("#id_quiet_start").scroll_into_view_if_needed()
    _picture(page, "quiet-hours")
    page.click("input[name=_continue]")
    assert "was changed successfully" in _saved(page)
    u17.refresh_from_db()
    assert (u17.quiet_start, u17.quiet_end) == (dt.time(21, 30), dt.time(7, 30))

    # 4. A training: its reminders are scheduled as it is saved.
    day = timezone.localdate() + dt.timedelta(days=4)
    page.goto(f"{live_server.url}/admin/trainings/training/add/")
    page.select_option("#id_team", label="U17 Girls")
    page.fill("#id_title", "Sprint drills")
    page.fill("#id_start_0", day.isoformat())
    page.fill("#id_start_1", "18:00:00")
    page.fill("#id_end_0", day.isoformat())
    page.fill("#id_end_1", "19:30:00")
    page.fill("#id_location", "Stade municipal")
    _picture(page, "training-add")
    page.click("input[name=_continue]")
    assert "was added successfully" in _saved(page)
    sprint = Training.objects.get(title="Sprint drills")
    assert list(sprint.invitations.values_list("player__name", flat=True)) == ["Zoe Martin"]

    # 5. Who answered: the demo's training, some players reminded, one answered.
    page.goto(f"{live_server.url}/admin/trainings/training/")
    page.click("text=Demo pre-training")
    page.wait_for_selector("table.player-grid")
    assert "Demo Alice" in page.inner_text("table.player-grid")
    assert fits_without_sideways_scroll(page)
    _picture(page, "who-answered")

    # 6. The coaches' digest: switched on by the coach, no operator step; the page says if it reaches nobody.
    page.goto(f"{live_server.url}/admin/trainings/team/{demo.pk}/change/")
    page.fill("#id_digest_before", "2h")
    page.click("input[name=_continue]")
    said = _saved(page)
    assert "was changed successfully" in said
    assert "reach nobody" in said  # the demo coach's account has no email yet
    page.locator("#id_digest_before").scroll_into_view_if_needed()
    _picture(page, "digest-nobody")
    page.goto(f"{live_server.url}/admin/trainings/coach/")
    page.click("#result_list tbody tr a")
    page.wait_for_selector("#id_email")
    page.fill("#id_email", "coach@example.com")
    _picture(page, "coach-profile")
    page.click("input[name=_save]")
    _saved(page)
    assert Coach.objects.get(user__username="coach").devices.get().token == "coach@example.com"
    page.goto(f"{live_server.url}/admin/trainings/team/{demo.pk}/change/")
    assert "reach nobody" not in page.inner_text("#content")

    # 7. Which reminders work: the effectiveness page over last week.
    page.goto(f"{live_server.url}/admin/")
    page.click("text=Reminder effectiveness")
    page.wait_for_selector("svg.time-to-answer")
    page.select_option("select[name=team]", label="Demo U15")
    page.fill("input[name=since]", min(past).isoformat())
    page.fill("input[name=until]", max(past).isoformat())
    page.click("#analytics-filters button")
    page.wait_for_selector("table.analytics-players")
    assert page.locator("svg.answer-rate > rect.within-15").count() > 0
    assert fits_without_sideways_scroll(page)
    _picture(page, "effectiveness")
