"""Questionnaires with questions (issue 43, item 6): a definition per team and phase (the built-in
wellness check before training and the session RPE after it, or a coach's own), returned by the answer
link's GET, checked on every way an answer comes in (the link's POST, the email page, a coach's API call,
the service), with a 400 naming the question and the reason; an empty answer is refused. A coach edits
only their teams' questionnaires; the grid and the effectiveness page show the answers per question."""

from __future__ import annotations

import datetime as dt
import html
import json
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from tests.clients import api_as, logged_in
from tests.factories import RPE, WELLNESS, TeamFactory, UserFactory, training_made
from trainings.access import coach_group_ensure
from trainings.answers.links import answer_token
from trainings.models import Player, Question, Questionnaire, QuestionnaireAnswer, Team, Training
from trainings.planning.writes import answer_record

pytestmark = [pytest.mark.django_db]

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)


@pytest.fixture(autouse=True)
def _pushes_to_a_test_queue(push_queue: str) -> None:
    pass


@pytest.fixture
def training(team: Team) -> Training:
    return training_made(team, START)


@pytest.fixture
def alice() -> Player:
    return Player.objects.get(name="Alice")


def _link(player: Player, training: Training, kind: str, channel: str = "push") -> str:
    return answer_token(player_id=player.pk, training_id=training.pk, kind=kind, channel=channel)


def _link_post(training: Training, player: Player, phase: str, answers: Any) -> Any:
    path = f"/api/answer-links/{_link(player, training, phase)}/"
    return Client().post(path, data=json.dumps({"answers": answers}), content_type="application/json")


def _link_post_warm(training: Training, player: Player, phase: str, answers: Any) -> Any:
    """After a GET: the process checks the POST against the questions it read (one statement)."""
    Client().get(f"/api/answer-links/{_link(player, training, phase)}/")
    return _link_post(training, player, phase, answers)


def _form_post(training: Training, player: Player, phase: str, answers: Any) -> Any:
    """The email page: one form field per question (`q-<id>`), as a browser sends it."""
    form = {f"q-{key}": str(value) for key, value in answers.items()}
    return Client().post(f"/answer/{_link(player, training, phase, 'email')}/", form)


def _api_post(training: Training, player: Player, phase: str, answers: Any) -> Any:
    operator = api_as(UserFactory(is_staff=True, is_superuser=True))
    body = {"player": player.pk, "phase": phase, "answers": answers}
    return operator.post(f"/api/trainings/{training.pk}/answers/", body, format="json")


WAYS_IN = {"link": _link_post, "link after GET": _link_post_warm, "email page": _form_post, "API": _api_post}
# (phase, answers, the question the 400 names, words of its reason)
REFUSED = [
    ("PRE", {}, None, "empty answer is refused"),
    ("POST", {}, None, "empty answer is refused"),
    ("PRE", {**WELLNESS, "fatigue": 8}, "fatigue", "8 is out of range: from 1 to 7"),
    ("PRE", {**WELLNESS, "stress": 0}, "stress", "out of range"),
    ("POST", {"rpe": 11}, "rpe", "11 is out of range: from 0 to 10"),
    ("POST", {"rpe": -1}, "rpe", "out of range"),
    ("PRE", {k: v for k, v in WELLNESS.items() if k != "soreness"}, "soreness", "an answer is required"),
    ("PRE", {**WELLNESS, "mood": 3}, "mood", "not a question of this questionnaire"),
    ("POST", {"rpe": "hard"}, "rpe", "whole number from 0 to 10"),
]


def _reason(response: Any, question: str | None) -> str:
    if response["Content-Type"].startswith("text/html"):  # the email page says it beside the question
        return response.content.decode()
    errors = response.json()["answers"]
    return " ".join(errors) if question is None else " ".join(errors[question])


# Every way in with every refusal, but an unknown question on the email page: its form has no field for it.
REFUSALS = [
    (way, *refused) for way in WAYS_IN for refused in REFUSED if (way, refused[2]) != ("email page", "mood")
]


@pytest.mark.parametrize(("way", "phase", "answers", "question", "reason"), REFUSALS)
def test_every_way_in_refuses_what_the_questions_do_not_take_and_says_which_and_why(
    training: Training, alice: Player, way: str, phase: str, answers: Any, question: str | None, reason: str
) -> None:
    response = WAYS_IN[way](training, alice, phase, answers)

    assert response.status_code == 400, response.content
    assert reason in _reason(response, question)
    assert not QuestionnaireAnswer.objects.exists()  # nothing half-written, nothing "answered"


@pytest.mark.parametrize("way", WAYS_IN)
@pytest.mark.parametrize(
    ("phase", "answers"), [("PRE", WELLNESS), ("POST", RPE), ("POST", {**RPE, "notes": "knee"})]
)
def test_every_way_in_stores_an_answer_to_the_questions(
    training: Training, alice: Player, way: str, phase: str, answers: dict[str, Any]
) -> None:
    response = WAYS_IN[way](training, alice, phase, answers)

    assert response.status_code in (200, 201), response.content
    assert QuestionnaireAnswer.objects.get(player=alice, phase=phase).answers == answers


def test_the_service_refuses_an_empty_answer_naming_why(training: Training, alice: Player) -> None:
    with pytest.raises(ValueError, match="empty answer is refused"):
        answer_record(training=training, player=alice, phase="PRE", answers={})
    assert not QuestionnaireAnswer.objects.exists()


def test_the_links_get_gives_the_built_in_questions_with_their_labels(
    training: Training, alice: Player
) -> None:
    pre = Client().get(f"/api/answer-links/{_link(alice, training, 'PRE')}/").json()
    assert [q["id"] for q in pre["questions"]] == ["sleep_quality", "fatigue", "stress", "soreness", "notes"]
    sleep = pre["questions"][0]
    assert sleep == {
        "id": "sleep_quality", "text": "How well did you sleep last night?", "short": "Sleep quality",
        "type": "scale", "minimum": 1, "maximum": 7,
        "labels": [{"value": 1, "label": "Very badly"}, {"value": 7, "label": "Very well"}], "required": True,
    }  # fmt: skip
    assert pre["questions"][-1]["type"] == "text" and pre["questions"][-1]["required"] is False

    post = Client().get(f"/api/answer-links/{_link(alice, training, 'POST')}/").json()
    [rpe, _] = post["questions"]
    assert (rpe["id"], rpe["minimum"], rpe["maximum"]) == ("rpe", 0, 10)
    assert {label["value"]: label["label"] for label in rpe["labels"]} == {
        0: "Rest", 1: "Very, very easy", 2: "Easy", 3: "Moderate", 4: "Somewhat hard", 5: "Hard",
        7: "Very hard", 10: "Maximal",
    }  # fmt: skip
    invitation = Client().get(f"/api/answer-links/{_link(alice, training, 'INVITATION')}/").json()
    assert "questions" not in invitation


def _own_questionnaire(team: Team) -> Questionnaire:
    questionnaire = Questionnaire.objects.create(team=team, phase="POST")
    Question.objects.create(questionnaire=questionnaire, position=1, key="rpe", preset="rpe")
    Question.objects.create(questionnaire=questionnaire, position=2, key="pain", text="Où avez-vous mal ?",
                            type="scale", minimum=0, maximum=3, minimum_label="Nulle part",
                            maximum_label="Partout")  # fmt: skip
    return questionnaire


def test_a_teams_own_questionnaire_is_asked_and_checked_its_own_text_as_typed(
    training: Training, alice: Player
) -> None:
    path = f"/api/answer-links/{_link(alice, training, 'POST')}/"
    assert Client().get(path).json()["questions"][0]["id"] == "rpe"  # the process guesses the built-in ones
    _own_questionnaire(training.team)  # then a coach adds a question of their own

    questions = Client().get(path).json()["questions"]
    assert [(q["id"], q["text"]) for q in questions] == [
        ("rpe", "How hard was this session for you?"),
        ("pain", "Où avez-vous mal ?"),
    ]
    assert questions[1]["labels"] == [{"value": 0, "label": "Nulle part"}, {"value": 3, "label": "Partout"}]
    refused = _link_post(training, alice, "POST", RPE)
    assert refused.status_code == 400 and refused.json() == {"answers": {"pain": ["an answer is required."]}}
    assert _link_post(training, alice, "POST", {**RPE, "pain": 2}).status_code == 200


def test_an_answer_checked_against_questions_changed_since_is_checked_again_before_it_is_written(
    training: Training, alice: Player
) -> None:
    """A process keeps the questions it read per training; a coach's edit gives the questionnaire a new
    revision, so the one-statement POST writes nothing against the old ones and checks again."""
    assert _link_post_warm(training, alice, "POST", RPE).status_code == 200  # guessed: built-in questions
    _own_questionnaire(training.team)
    response = _link_post(training, alice, "POST", {"rpe": 3})
    assert response.status_code == 400 and "pain" in response.json()["answers"]
    assert QuestionnaireAnswer.objects.get(player=alice).answers == RPE  # the first answer, untouched


def test_an_empty_note_is_no_answer_and_text_is_trimmed(training: Training, alice: Player) -> None:
    assert _link_post(training, alice, "POST", {"rpe": 4, "notes": "   "}).status_code == 200
    assert QuestionnaireAnswer.objects.get(player=alice).answers == {"rpe": 4}
    assert _link_post(training, alice, "POST", {"notes": "  tired  "}).json()["answers"]["rpe"] == [
        "an answer is required."
    ]


# --- The email page ---------------------------------------------------------------------------------------


def test_the_email_page_asks_each_question_with_its_labels(training: Training, alice: Player) -> None:
    page = Client().get(f"/answer/{_link(alice, training, 'POST', 'email')}/").content.decode()
    assert "How hard was this session for you?" in page
    assert page.count('name="q-rpe"') == 11  # 0 to 10
    for label in ("Rest", "Very, very easy", "Moderate", "Very hard", "Maximal"):
        assert f"<small>{label}</small>" in page
    assert "Anything to tell your coach?" in page and "(optional)" in page
    pre = Client().get(f"/answer/{_link(alice, training, 'PRE', 'email')}/").content.decode()
    assert pre.count('name="q-fatigue"') == 7
    assert '<div class="ends"><span>1: Very fresh</span><span>7: Exhausted</span></div>' in pre


def test_the_email_page_says_why_a_question_is_refused_and_keeps_what_was_typed(
    training: Training, alice: Player
) -> None:
    path = f"/answer/{_link(alice, training, 'PRE', 'email')}/"
    response = Client().post(path, {"q-sleep_quality": "6", "q-notes": "late bus"})
    page = response.content.decode()
    assert response.status_code == 400
    assert page.count("an answer is required.") == 3  # fatigue, stress, soreness
    assert 'value="6" checked' in page and "late bus</textarea>" in page
    assert not QuestionnaireAnswer.objects.exists()


@pytest.mark.parametrize(("response", "words"), [("accepted", "You're in"), ("denied", "You've declined")])
def test_after_an_invitation_tap_the_page_says_which_answer_was_recorded(
    training: Training, alice: Player, response: str, words: str
) -> None:
    path = f"/answer/{_link(alice, training, 'INVITATION', 'email')}/"
    assert words not in _text(Client().get(path))  # nothing recorded yet: nothing said
    assert words in _text(Client().post(path, {"response": response}))
    assert words in _text(Client().get(path))  # from the stored response, on any later visit


def _text(response: Any) -> str:
    return html.unescape(response.content.decode())


# --- The admin ------------------------------------------------------------------------------------------


def _coach(team: Team) -> Any:
    coach = UserFactory(username=f"coach-of-{team.pk}", is_staff=True)
    coach.groups.add(coach_group_ensure())
    team.coaches.add(coach)
    return coach


def _inline(rows: list[dict[str, Any]], initial: int = 0) -> dict[str, Any]:
    form = {"questions-TOTAL_FORMS": str(len(rows)), "questions-INITIAL_FORMS": str(initial),
            "questions-MIN_NUM_FORMS": "1", "questions-MAX_NUM_FORMS": "1000"}  # fmt: skip
    for i, row in enumerate(rows):
        form.update({f"questions-{i}-{k}": v for k, v in row.items()})
    return form


def test_a_coach_makes_their_teams_questionnaire_in_the_admin_and_it_is_asked(
    training: Training, alice: Player
) -> None:
    browser = logged_in(_coach(training.team))
    start = browser.get("/admin/trainings/questionnaire/add/?phase=POST").content.decode()
    assert 'value="rpe"' in start and 'value="notes"' in start  # it starts from the built-in questions

    rows = [{"position": "1", "key": "rpe", "preset": "rpe", "type": "scale", "required": "on"},
            {"position": "2", "key": "legs", "text": "Legs?", "type": "scale", "minimum": "1", "maximum": "5",
             "minimum_label": "fresh", "maximum_label": "dead", "required": "on"}]  # fmt: skip
    saved = browser.post("/admin/trainings/questionnaire/add/",
                         {"team": training.team.pk, "phase": "POST", **_inline(rows)})  # fmt: skip
    assert saved.status_code == 302, saved.content.decode()[:3000]
    questions = Client().get(f"/api/answer-links/{_link(alice, training, 'POST')}/").json()["questions"]
    assert [q["id"] for q in questions] == ["rpe", "legs"]
    assert _link_post(training, alice, "POST", {"rpe": 5, "legs": 6}).json() == {
        "answers": {"legs": ["6 is out of range: from 1 to 5."]}
    }


def test_a_scale_without_its_ends_or_a_questionnaire_without_questions_is_refused_in_the_admin(
    team: Team,
) -> None:
    browser = logged_in(_coach(team))
    no_range = [{"position": "1", "key": "legs", "text": "Legs?", "type": "scale", "required": "on"}]
    page = browser.post(
        "/admin/trainings/questionnaire/add/", {"team": team.pk, "phase": "PRE", **_inline(no_range)}
    )
    assert page.status_code == 200 and "A scale needs its lowest and highest value." in page.content.decode()
    empty = browser.post(
        "/admin/trainings/questionnaire/add/", {"team": team.pk, "phase": "PRE", **_inline([])}
    )
    assert empty.status_code == 200 and "asks at least one question" in empty.content.decode()
    assert not Questionnaire.objects.exists()


def test_a_coach_edits_only_their_teams_questionnaires(team: Team) -> None:
    other = TeamFactory(name="Rivals")
    theirs = _own_questionnaire(other)
    browser = logged_in(_coach(team))

    assert "Rivals" not in browser.get("/admin/trainings/questionnaire/").content.decode()
    assert browser.get(f"/admin/trainings/questionnaire/{theirs.pk}/change/").status_code == 302  # "no such"
    form = browser.get("/admin/trainings/questionnaire/add/").content.decode()
    assert "Rivals" not in form and team.name in form
    rows = [{"position": "1", "key": "rpe", "preset": "rpe", "required": "on"}]
    refused = browser.post(
        "/admin/trainings/questionnaire/add/", {"team": other.pk, "phase": "PRE", **_inline(rows)}
    )
    assert refused.status_code == 200 and "Select a valid choice" in refused.content.decode()
    assert Questionnaire.objects.filter(team=other).count() == 1


def test_the_training_page_shows_each_answer_per_question(
    training: Training, alice: Player, coach: Any
) -> None:
    coach.is_staff = True
    coach.save()
    coach.groups.add(coach_group_ensure())
    answer_record(training=training, player=alice, phase="PRE", answers={**WELLNESS, "notes": "bus late"})
    answer_record(
        training=training, player=Player.objects.get(name="Bruno"), phase="POST", answers={"rpe": 7}
    )
    page = logged_in(coach).get(f"/admin/trainings/training/{training.pk}/change/").content.decode()
    grid = page.split('class="player-grid"', 1)[1].split("</table>", 1)[0]
    assert "Sleep quality 5 (" not in grid  # a wellness value has words only at its ends
    assert "Sleep quality 5 · Fatigue 3 · Stress 2 · Muscle soreness 4 · Notes bus late" in grid
    assert "Session RPE (CR-10) 7 (Very hard)" in grid
    assert "<dt>Muscle soreness</dt><dd>4</dd>" in page  # the answers inline, by question too


def test_the_effectiveness_page_charts_a_teams_answers_per_question_and_player(
    team: Team, coach: Any
) -> None:
    coach.is_staff = True
    coach.save()
    coach.groups.add(coach_group_ensure())
    today = timezone.localdate()
    for back, (alice_rpe, bruno_rpe) in zip((6, 4, 2), ((3, 5), (6, 8), (4, 9)), strict=True):
        training = training_made(team, timezone.now() - dt.timedelta(days=back))
        for name, rpe in (("Alice", alice_rpe), ("Bruno", bruno_rpe)):
            answer_record(
                training=training, player=Player.objects.get(name=name), phase="POST", answers={"rpe": rpe}
            )
    since = (today - dt.timedelta(days=10)).isoformat()
    page = logged_in(coach).get(
        "/admin/analytics/", {"team": team.pk, "since": since, "until": today.isoformat()}
    )
    html = page.content.decode()
    chart = html.split('data-question="POST-rpe"', 1)[1].split("</figure>", 1)[0]
    assert chart.count("<circle") == 6 and 'data-player="Alice"' in chart and 'data-player="Bruno"' in chart
    assert "Bruno, " in chart and ": 9</title>" in chart
    assert chart.count("answers-mean") == 1
    assert (
        "No answer in this period."
        in html.split('data-question="PRE-fatigue"', 1)[1].split("</figure>", 1)[0]
    )


def test_a_coach_records_an_answer_on_the_training_page_checked_like_every_other_way_in(
    training: Training, alice: Player
) -> None:
    browser = logged_in(_coach(training.team))
    page = f"/admin/trainings/training/{training.pk}/answer/"
    assert (
        "Record an answer" in browser.get(f"/admin/trainings/training/{training.pk}/change/").content.decode()
    )
    form = browser.get(page, {"phase": "POST"}).content.decode()
    assert form.count('name="q-rpe"') == 11 and "<small>Maximal</small>" in form

    refused = browser.post(page, {"phase": "POST", "player": alice.pk, "q-rpe": "12"})
    assert refused.status_code == 400 and "12 is out of range: from 0 to 10." in refused.content.decode()
    empty = browser.post(page, {"phase": "POST", "player": alice.pk})
    assert empty.status_code == 400 and "an empty answer is refused" in empty.content.decode()
    assert not QuestionnaireAnswer.objects.exists()

    done = browser.post(
        page, {"phase": "POST", "player": alice.pk, "q-rpe": "6", "q-notes": "said at the bus"}
    )
    assert done.status_code == 302
    answer = QuestionnaireAnswer.objects.get(player=alice, phase="POST")
    assert (answer.answers, answer.source) == ({"rpe": 6, "notes": "said at the bus"}, "admin")
    other = training_made(TeamFactory(name="Rivals"), START)
    assert browser.get(f"/admin/trainings/training/{other.pk}/answer/")["Location"] == "/admin/"
