"""The README's demo as a newcomer follows it: the answer link `demo_trainings` prints opens the answer page
in Chromium, one tap records the answer, and the invitation's next reminder no longer chases the player."""

from __future__ import annotations

import re
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from tests.browser.conftest import shot
from trainings.models import Invitation, InvitationStatus, ReminderRule, ReminderTemplate, Training
from trainings.planning.defaults import rules_seed
from trainings.reminding.recipients import reminder_recipients

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_a_printed_link_answers_in_one_tap(page: Any, live_server: Any, settings: Any) -> None:
    rules_seed(ReminderRule, ReminderTemplate)  # a transactional test starts from empty tables
    settings.DEBUG = True
    settings.TRAININGS_PUBLIC_URL = live_server.url  # where `make run` would serve
    out = StringIO()
    call_command("demo_trainings", stdout=out)
    [link] = re.findall(
        r"^  Alice, before the invitation reminder at [\d:]+: (http\S+)$", out.getvalue(), re.M
    )

    page.goto(link)
    assert page.locator("h1").inner_text() == "Demo invitation"
    shot(page, "demo-answer-page")
    page.locator("form:has(input[value=accepted]) button").click()  # "I'll come"
    page.wait_for_load_state()
    shot(page, "demo-answer-page-accepted")
    assert "✓" in page.locator("body").inner_text()

    training = Training.objects.get(title="Demo invitation")
    invitation = Invitation.objects.get(training=training, player__name="Demo Alice")
    assert invitation.status == InvitationStatus.ACCEPTED
    chased = reminder_recipients(training=training, rule=ReminderRule.objects.get(slug="invitation"))
    assert "Demo Alice" not in set(chased.values_list("name", flat=True))
