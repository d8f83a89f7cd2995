"""Escalation and the daily cap in the admin (docs/escalation.md), in Chromium: an operator types a rule's
escalation offset ("6h") like its offsets; a coach's training page shows a reminder the team's daily cap
held back, with the reason, on the player's row. The screenshots are the page's pictures: with
DOCS_SCREENSHOTS=1 they are written to docs/ (escalation-rule.png, escalation-daily-cap.png), otherwise
under var/artifacts/browser/."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from reminders.engine.dispatch import occurrences_dispatch_batch
from reminders.models import Occurrence
from tests.browser.conftest import ARTIFACTS, log_in
from tests.factories import (
    MembershipFactory,
    PlayerFactory,
    TeamFactory,
    UserFactory,
    rules_seeded,
    training_made,
)
from trainings.access import coach_group_ensure
from trainings.models import Push, PushStatus
from trainings.selectors import job_key

pytestmark = [pytest.mark.postgres, pytest.mark.rabbitmq, pytest.mark.django_db(transaction=True)]

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _picture(page: Any, name: str) -> None:
    folder = DOCS if os.environ.get("DOCS_SCREENSHOTS") == "1" else ARTIFACTS
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"{name}.png"), full_page=False)


def test_an_operator_sets_an_escalation_offset_and_a_coach_reads_a_capped_reminder(
    page: Any, live_server: Any, settings: Any, queue_name: str
) -> None:
    settings.TRAININGS_PUSH_QUEUE = queue_name
    rules = rules_seeded()
    UserFactory(username="operator", is_staff=True, is_superuser=True)
    log_in(page, live_server.url, "operator")
    page.goto(f"{live_server.url}/admin/trainings/reminderrule/{rules['invitation'].pk}/change/")
    page.fill("#id_escalate", "6h")
    page.click("input[name=_continue]")
    page.wait_for_selector(".messagelist")
    assert page.locator("input#id_escalate").input_value() == "6h"
    rules["invitation"].refresh_from_db()
    assert rules["invitation"].escalate == ["6h"]
    page.locator("#id_escalate").scroll_into_view_if_needed()
    _picture(page, "escalation-rule")

    # A team capped at one push a day: the 75 min reminder is held back for Anna, who had the 90 min one.
    coach = UserFactory(username="coach", is_staff=True)
    coach.groups.add(coach_group_ensure())
    team = TeamFactory(name="U13", coaches=[coach], daily_push_cap=1)
    MembershipFactory(team=team, player=PlayerFactory(name="Anna"))
    start = (timezone.now() + dt.timedelta(days=2)).replace(hour=16, minute=0, second=0, microsecond=0)
    training = training_made(team, start, title="Speed session")
    key = job_key(training_id=training.pk, rule=rules["pre-questionnaire"])
    for minutes in (90, 75):
        Occurrence.objects.filter(job__key=key, fire_at=start - dt.timedelta(minutes=minutes)).update(
            next_attempt_at=timezone.now() - dt.timedelta(seconds=1)
        )
        assert occurrences_dispatch_batch().delivered == 1
    held = Push.objects.get(offset="75m")
    assert held.status == PushStatus.SKIPPED and held.status_reason.startswith(
        "held back: daily push cap of 1"
    )

    page.context.clear_cookies()
    log_in(page, live_server.url, "coach")
    page.goto(f"{live_server.url}/admin/trainings/training/{training.pk}/change/")
    row = page.locator("tr", has_text="Anna").filter(has_text="daily push cap").first
    assert "held back: daily push cap of 1 reached" in row.inner_text()
    row.scroll_into_view_if_needed()
    _picture(page, "escalation-daily-cap")
