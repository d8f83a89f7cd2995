"""One check for a questionnaire's answers, whichever way they come in: an answer link's API, the email
answer page, the coaches' and operators' `POST /api/trainings/<id>/answers/` and the service call behind
it. What one refuses (not an object, more than 100 keys, more than 20,000 characters of JSON) none
stores; each also meets the team's questions (tests/trainings/test_questionnaires.py)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from django.test import Client

from tests.clients import api_as
from tests.factories import WELLNESS, UserFactory, training_made
from trainings.answers.links import answer_token
from trainings.answers.values import MAX_ANSWER_CHARS, MAX_ANSWER_KEYS
from trainings.models import Player, QuestionnaireAnswer, Team, Training
from trainings.planning.writes import answer_record

pytestmark = [pytest.mark.django_db]

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)
REFUSED = {
    "a list": [1, 2, 3],
    "a string": "8 hours",
    "200 keys": {f"q{n}": n for n in range(200)},
    "101 keys": {f"q{n}": n for n in range(MAX_ANSWER_KEYS + 1)},
    "too long": {"notes": "x" * MAX_ANSWER_CHARS},
}


@pytest.fixture
def training(team: Team) -> Training:
    return training_made(team, START)


@pytest.fixture
def alice() -> Player:
    return Player.objects.get(name="Alice")


def _operator_post(training: Training, player: Player, answers: Any) -> Any:
    operator = api_as(UserFactory(is_staff=True, is_superuser=True))
    body = {"player": player.pk, "phase": "PRE", "answers": answers}
    return operator.post(f"/api/trainings/{training.pk}/answers/", body, format="json")


def _link_post(training: Training, player: Player, answers: Any) -> Any:
    token = answer_token(player_id=player.pk, training_id=training.pk, kind="PRE")
    body = json.dumps({"answers": answers})
    return Client().post(f"/api/answer-links/{token}/", data=body, content_type="application/json")


WAYS_IN = {"operator endpoint": _operator_post, "answer link API": _link_post}


@pytest.mark.parametrize("way", WAYS_IN)
@pytest.mark.parametrize("what", REFUSED)
def test_every_api_way_in_refuses_the_same_answers_and_stores_nothing(
    training: Training, alice: Player, way: str, what: str
) -> None:
    response = WAYS_IN[way](training, alice, REFUSED[what])

    assert response.status_code == 400, response.content
    assert "answers" in response.json()
    assert not QuestionnaireAnswer.objects.exists()


@pytest.mark.parametrize("way", WAYS_IN)
def test_every_api_way_in_takes_an_answer_to_the_teams_questions(
    training: Training, alice: Player, way: str
) -> None:
    response = WAYS_IN[way](training, alice, WELLNESS)

    assert response.status_code in (200, 201), response.content
    assert QuestionnaireAnswer.objects.get(player=alice).answers == WELLNESS


@pytest.mark.parametrize("what", REFUSED)
def test_the_service_refuses_them_too(training: Training, alice: Player, what: str) -> None:
    with pytest.raises(ValueError):
        answer_record(training=training, player=alice, phase="PRE", answers=REFUSED[what])
    assert not QuestionnaireAnswer.objects.exists()


def test_the_email_page_stores_what_the_same_check_takes(training: Training, alice: Player) -> None:
    """The page's form carries one field per question; a note over 2,000 characters is refused (400, the
    page saying why) and nothing is stored; within it, the answers are stored as the API would."""
    token = answer_token(player_id=alice.pk, training_id=training.pk, kind="PRE", channel="email")
    form = {f"q-{key}": str(value) for key, value in WELLNESS.items()}

    refused = Client().post(f"/answer/{token}/", {**form, "q-notes": "n" * 2001})
    assert refused.status_code == 400
    assert "at most 2000 characters" in refused.content.decode()
    assert not QuestionnaireAnswer.objects.exists()

    response = Client().post(f"/answer/{token}/", {**form, "q-notes": "n" * 2000})
    assert response.status_code == 200
    assert QuestionnaireAnswer.objects.get(player=alice).answers == {**WELLNESS, "notes": "n" * 2000}


def test_the_schema_says_what_is_taken() -> None:
    schema = api_as(UserFactory(is_superuser=True)).get("/api/schema/", {"format": "json"}).json()
    components = schema["components"]["schemas"]
    for name in ("AnswerInput", "AnswerLinkInput"):
        answers = components[name]["properties"]["answers"]
        assert (answers["type"], answers["maxProperties"]) == ("object", MAX_ANSWER_KEYS), name
