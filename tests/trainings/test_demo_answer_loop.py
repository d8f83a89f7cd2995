"""The README's demo closes the loop: `demo_trainings` prints an answer link per player and, in development,
the logging stand-in's PUSH line carries the push's answer page; following either records the answer in
one tap, and the training's next reminder no longer chases that player."""

from __future__ import annotations

import re
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from delivery.channels.providers import providers_from_settings
from delivery.gateway.consumer import Outcome, PushSender
from tests.factories import WELLNESS
from tests.trainings.push_fixtures import message
from trainings.models import Invitation, InvitationStatus, Player, ReminderRule, Training
from trainings.planning import kinds
from trainings.reminding.recipients import reminder_recipients

# The email page's form: one field per question of the built-in wellness check.
WELLNESS_FORM = {f"q-{key}": str(value) for key, value in WELLNESS.items()}

pytestmark = pytest.mark.django_db

LINK = re.compile(r"^  (\w+), before the ([\w-]+) reminder at [\d:]+: (http\S+)$", re.MULTILINE)


def _demo(settings: Any) -> str:
    settings.DEBUG = True
    out = StringIO()
    call_command("demo_trainings", stdout=out)
    return out.getvalue()


def _path(url: str, settings: Any) -> str:
    assert url.startswith(settings.TRAININGS_PUBLIC_URL.rstrip("/") + "/answer/"), url
    return url.removeprefix(settings.TRAININGS_PUBLIC_URL.rstrip("/"))


def _chased(title: str, rule: str) -> set[str]:
    training = Training.objects.get(title=title)
    return set(
        reminder_recipients(training=training, rule=ReminderRule.objects.get(slug=rule)).values_list(
            "name", flat=True
        )
    )


def test_the_demo_prints_an_answer_link_per_player_that_answers_in_one_tap(settings: Any) -> None:
    links = {name: (rule, url) for name, rule, url in LINK.findall(_demo(settings))}
    # Each player's link is for the soonest reminder they still owe: Alice answered her pre-questionnaire
    # already, so hers is the invitation.
    assert {name: rule for name, (rule, _) in links.items()} == {
        "Alice": "invitation", "Bruno": "pre-questionnaire", "Chloe": "pre-questionnaire",
        "Dan": "pre-questionnaire",
    }  # fmt: skip
    browser = Client()
    for _, url in links.values():
        page = browser.get(_path(url, settings))
        assert page.status_code == 200 and b'<form method="post"' in page.content

    assert "Demo Bruno" in _chased("Demo pre-training", "pre-questionnaire")
    answered = browser.post(_path(links["Bruno"][1], settings), {**WELLNESS_FORM, "q-notes": "slept well"})
    assert answered.status_code == 200 and "✓" in answered.content.decode()
    assert "Demo Bruno" not in _chased("Demo pre-training", "pre-questionnaire")
    assert "Demo Chloe" in _chased("Demo pre-training", "pre-questionnaire")

    accepted = browser.post(_path(links["Alice"][1], settings), {"response": "accepted"})
    assert accepted.status_code == 200
    invitation = Invitation.objects.get(training__title="Demo invitation", player__name="Demo Alice")
    assert invitation.status == InvitationStatus.ACCEPTED
    assert "Demo Alice" not in _chased("Demo invitation", "invitation")


def _push_line(settings: Any, caplog: Any, *, debug: bool) -> str:
    _demo(settings)
    settings.DEBUG = debug
    training = Training.objects.get(title="Demo pre-training")
    chloe = Player.objects.get(name="Demo Chloe")
    sender = PushSender(providers_from_settings())
    try:
        with caplog.at_level("INFO", logger="trainings.push"):
            [handled] = sender.handle([message("demo.pre.chloe", chloe.pk, training=str(training.pk))])
    finally:
        sender.close()
    assert handled.outcome == Outcome.DELIVERED
    [line] = [line for line in caplog.text.splitlines() if "PUSH player=" in line]
    return line


def test_in_development_the_push_line_carries_the_answer_page_and_it_works(
    settings: Any, caplog: Any
) -> None:
    line = _push_line(settings, caplog, debug=True)
    [url] = re.findall(r" answer=(http\S+)", line)
    browser = Client()
    assert browser.get(_path(url, settings)).status_code == 200
    assert browser.post(_path(url, settings), {**WELLNESS_FORM, "q-notes": "legs heavy"}).status_code == 200
    assert "Demo Chloe" not in _chased("Demo pre-training", "pre-questionnaire")
    training = Training.objects.get(title="Demo pre-training")
    assert training.answers.filter(player__name="Demo Chloe", phase=kinds.PRE.code).exists()


def test_outside_development_the_push_line_carries_no_link(settings: Any, caplog: Any) -> None:
    line = _push_line(settings, caplog, debug=False)
    assert "answer=" not in line and "/answer/" not in line  # a link is a credential: never logged
