"""Questionnaires with questions as people see them in Chromium (issue 43, item 6), on either database: a
player answers the wellness check on the email page (each question with its labelled ends) and the
session RPE with Borg's words, a tap on an invitation says which answer was recorded, a coach starts their
team's own questionnaire from the built-in questions in the admin, and reads the team's answers per
question and player on the effectiveness page. Screenshots: var/artifacts/browser/questionnaire-*.png."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from tests.browser.conftest import fits_without_sideways_scroll, log_in, shot
from tests.factories import MembershipFactory, PlayerFactory, TeamFactory, UserFactory, training_made
from trainings.access import coach_group_ensure
from trainings.answers.links import answer_token
from trainings.models import (
    InvitationStatus,
    Player,
    Question,
    QuestionnaireAnswer,
    ReminderRule,
    ReminderTemplate,
    Team,
)
from trainings.planning.defaults import rules_seed
from trainings.planning.writes import answer_record

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture
def squad() -> Team:
    rules_seed(ReminderRule, ReminderTemplate)  # a transactional test starts from empty tables
    team = TeamFactory(name="U17 Girls", time_zone="Europe/Paris")
    for name in ("Alice", "Chloe", "Emma", "Ines"):
        MembershipFactory(team=team, player=PlayerFactory(name=name, language="en"))
    return team


def _page_of(live_server: Any, team: Team, kind: str, start: dt.datetime, player: str = "Alice") -> str:
    training = training_made(team, start, title="Speed session")
    alice = Player.objects.get(name=player)
    token = answer_token(player_id=alice.pk, training_id=training.pk, kind=kind, channel="email")
    return f"{live_server.url}/answer/{token}/"


def test_a_player_answers_the_wellness_check_and_the_session_rpe_by_email(
    page: Any, live_server: Any, squad: Team
) -> None:
    page.set_viewport_size({"width": 420, "height": 900})  # a phone's mail app
    page.goto(_page_of(live_server, squad, "PRE", timezone.now() + dt.timedelta(hours=2)))
    legends = page.locator("legend").all_inner_texts()
    assert legends[:4] == ["How well did you sleep last night?", "How tired do you feel?",
                           "How stressed do you feel?", "How sore are your muscles?"]  # fmt: skip
    sleep = page.locator("#question-sleep_quality")
    assert sleep.locator("label").all_inner_texts() == ["1", "2", "3", "4", "5", "6", "7"]
    assert sleep.locator(".ends span").all_inner_texts() == ["1: Very badly", "7: Very well"]
    shot(page, "questionnaire-email-wellness")
    page.click("button[type=submit]")  # nothing chosen: the browser asks for the first required question
    assert not QuestionnaireAnswer.objects.exists()
    for question, value in (("sleep_quality", 6), ("fatigue", 3), ("stress", 2), ("soreness", 5)):
        page.check(f"input[name=q-{question}][value='{value}']")
    page.fill("textarea[name=q-notes]", "Calves tight after Sunday's match")
    page.click("button[type=submit]")
    page.wait_for_selector("p.done")
    assert "Your answers are saved" in page.inner_text("p.done")
    assert page.is_checked("input[name=q-fatigue][value='3']")  # the stored answer, shown back
    shot(page, "questionnaire-email-wellness-saved")
    assert QuestionnaireAnswer.objects.get().answers == {
        "sleep_quality": 6,
        "fatigue": 3,
        "stress": 2,
        "soreness": 5,
        "notes": "Calves tight after Sunday's match",
    }

    page.goto(_page_of(live_server, squad, "POST", timezone.now() - dt.timedelta(hours=2)))
    words = [text.strip() for text in page.locator("#question-rpe label small").all_inner_texts()]
    assert words == ["Rest", "Very, very easy", "Easy", "Moderate", "Somewhat hard", "Hard", "", "Very hard",
                     "", "", "Maximal"]  # fmt: skip
    page.check("input[name=q-rpe][value='7']")
    shot(page, "questionnaire-email-rpe")
    page.click("button[type=submit]")
    page.wait_for_selector("p.done")
    assert QuestionnaireAnswer.objects.get(phase="POST").answers == {"rpe": 7}


def test_an_invitation_tap_says_which_answer_was_recorded(page: Any, live_server: Any, squad: Team) -> None:
    page.goto(_page_of(live_server, squad, "INVITATION", timezone.now() + dt.timedelta(days=2)))
    assert page.locator("p.recorded").count() == 0
    page.locator("form:has(input[value=accepted]) button").click()
    page.wait_for_selector("p.recorded")
    assert page.inner_text("p.recorded") == "✓ You're in: your coach sees that you will come."
    shot(page, "questionnaire-invitation-accepted")
    page.locator("form:has(input[value=denied]) button").click()
    page.wait_for_selector("text=You've declined")
    assert squad.trainings.get().invitations.get(player__name="Alice").status == InvitationStatus.DENIED


def test_a_coach_makes_the_teams_questionnaire_and_reads_the_answers_per_question(
    page: Any, live_server: Any, squad: Team
) -> None:
    coach = UserFactory(username="coach", is_staff=True)
    coach.groups.add(coach_group_ensure())
    squad.coaches.add(coach)
    for back, rpes in ((9, (3, 4, 6, 5)), (6, (5, 7, 7, 4)), (3, (4, 8, 6, 6)), (1, (6, 9, 5, 7))):
        training = training_made(squad, timezone.now() - dt.timedelta(days=back, hours=3))
        for name, rpe in zip(("Alice", "Chloe", "Emma", "Ines"), rpes, strict=True):
            player = Player.objects.get(name=name)
            answer_record(training=training, player=player, phase="POST", answers={"rpe": rpe})
            answer_record(training=training, player=player, phase="PRE",
                          answers={"sleep_quality": 8 - rpe // 2, "fatigue": 1 + rpe // 2, "stress": 3,
                                   "soreness": min(7, rpe - 2)})  # fmt: skip

    log_in(page, live_server.url, "coach")
    page.goto(f"{live_server.url}/admin/trainings/questionnaire/add/?phase=POST")
    assert page.input_value("#id_questions-0-key") == "rpe"
    assert page.input_value("#id_questions-1-key") == "notes"
    page.select_option("#id_team", label="U17 Girls")
    page.fill("#id_questions-2-position", "3")
    page.fill("#id_questions-2-key", "legs")
    page.fill("#id_questions-2-text", "How heavy are your legs?")
    page.fill("#id_questions-2-minimum", "1")
    page.fill("#id_questions-2-maximum", "5")
    page.fill("#id_questions-2-minimum_label", "Light")
    page.fill("#id_questions-2-maximum_label", "Like lead")
    assert fits_without_sideways_scroll(page)
    shot(page, "questionnaire-admin-add")
    page.click("input[name=_save]")
    page.wait_for_selector(".messagelist .success")
    assert list(Question.objects.values_list("key", flat=True)) == ["rpe", "notes", "legs"]

    today = timezone.localdate()
    page.goto(f"{live_server.url}/admin/analytics/?team={squad.pk}&since={today - dt.timedelta(days=14)}"
              f"&until={today}")  # fmt: skip
    rpe = page.locator('figure[data-question="POST-rpe"]')
    rpe.locator("svg.answers").wait_for()
    assert rpe.locator("circle").count() == 16  # four players, four trainings
    assert rpe.locator(".answers-legend").inner_text().split() == ["Alice", "Chloe", "Emma", "Ines"]
    assert page.locator('figure[data-question="PRE-fatigue"] circle').count() == 16
    assert "No answer in this period." in page.inner_text('figure[data-question="POST-legs"]')
    assert fits_without_sideways_scroll(page)
    page.locator("#answers").scroll_into_view_if_needed()
    shot(page, "questionnaire-analytics")
