"""A link answers only for a current invitee who is a current active member of the training's team. A
player whose membership ended (made inactive, or deleted) keeps their invitation row and their old links,
and those links answer 410 `not_member`, GET and POST, through the API and the email answer page, the
player's own and their guardians' alike, saying nothing of the training and recording nothing."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from django.test import Client

from tests.factories import WELLNESS, GuardianFactory, training_made
from trainings.answers.links import answer_token
from trainings.models import (
    Invitation,
    InvitationStatus,
    Membership,
    Player,
    QuestionnaireAnswer,
    Team,
    Training,
)

pytestmark = [pytest.mark.django_db]

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)  # 18:00 in Paris
TITLE, PLACE = "Secret session", "Hidden Stadium"
BODIES = {"INVITATION": {"response": "accepted"}, "PRE": {"answers": WELLNESS}}


@pytest.fixture
def training(team: Team) -> Training:
    return training_made(team, START, title=TITLE, location=PLACE)


@pytest.fixture
def alice() -> Player:
    return Player.objects.get(name="Alice")


def _end_membership(player: Player, how: str) -> None:
    """As a coach ends it in the admin: made inactive first, then perhaps deleted."""
    Membership.objects.filter(player=player).update(active=False)
    if how == "deleted":
        Membership.objects.filter(player=player).delete()


def _token(player: Player, training: Training, kind: str, *, channel: str, guardian: Any = None) -> str:
    return answer_token(player_id=player.pk, training_id=training.pk, kind=kind, channel=channel,
                        guardian_id=guardian.pk if guardian else None)  # fmt: skip


def _api(method: str, token: str, kind: str) -> Any:
    path, client = f"/api/answer-links/{token}/", Client()
    if method == "GET":
        return client.get(path)
    if method == "POST json":  # a plain body: opened and answered in one statement on PostgreSQL
        return client.post(path, data=json.dumps(BODIES[kind]), content_type="application/json")
    # Not a plain body: the link is opened first (refused here), then the body validated.
    other = {"response": "maybe"} if kind == "INVITATION" else {"answers": {}}
    return client.post(path, data=json.dumps(other), content_type="application/json")


def _email(method: str, token: str, kind: str) -> Any:
    path, client = f"/answer/{token}/", Client()
    if method == "GET":
        return client.get(path)
    return client.post(
        path,
        {"response": "accepted"} if kind == "INVITATION" else {f"q-{k}": str(v) for k, v in WELLNESS.items()},
    )


def _nothing_said_or_recorded(response: Any, training: Training, player: Player) -> None:
    page = response.content.decode()
    assert TITLE not in page and PLACE not in page and "18:00" not in page and training.team.name not in page
    invitation = Invitation.objects.get(training=training, player=player)
    assert (invitation.status, invitation.responded_at) == (InvitationStatus.PENDING, None)
    assert not QuestionnaireAnswer.objects.filter(training=training, player=player).exists()


@pytest.mark.parametrize("how", ["inactive", "deleted"])
@pytest.mark.parametrize("kind", ["INVITATION", "PRE"])
@pytest.mark.parametrize("method", ["GET", "POST json", "POST other"])
def test_an_ex_members_api_link_answers_410_not_member(
    training: Training, alice: Player, how: str, kind: str, method: str
) -> None:
    token = _token(alice, training, kind, channel="push")
    assert _api("GET", token, kind).status_code == 200  # a member's link works
    _end_membership(alice, how)

    response = _api(method, token, kind)

    assert response.status_code == 410, response.content
    assert response.json() == {"detail": "You are no longer a member of this team.", "code": "not_member"}
    _nothing_said_or_recorded(response, training, alice)


@pytest.mark.parametrize("how", ["inactive", "deleted"])
@pytest.mark.parametrize("kind", ["INVITATION", "PRE"])
@pytest.mark.parametrize("method", ["GET", "POST"])
def test_an_ex_members_email_page_answers_410(
    training: Training, alice: Player, how: str, kind: str, method: str
) -> None:
    token = _token(alice, training, kind, channel="email")
    _end_membership(alice, how)

    response = _email(method, token, kind)

    assert response.status_code == 410
    assert "You are no longer a member of this team." in response.content.decode()
    _nothing_said_or_recorded(response, training, alice)


@pytest.mark.parametrize("how", ["inactive", "deleted"])
@pytest.mark.parametrize("way", ["API GET", "API POST", "email GET", "email POST"])
def test_a_guardians_link_for_an_ex_member_answers_410(
    training: Training, alice: Player, how: str, way: str
) -> None:
    maria = GuardianFactory(name="Maria", player=alice)
    channel = "email" if way.startswith("email") else "push"
    token = _token(alice, training, "INVITATION", channel=channel, guardian=maria)
    _end_membership(alice, how)

    method = way.split()[1]
    if way.startswith("API"):
        response = _api("POST json" if method == "POST" else "GET", token, "INVITATION")
        assert (response.status_code, response.json()["code"]) == (410, "not_member")
    else:
        response = _email(method, token, "INVITATION")
        assert response.status_code == 410
    _nothing_said_or_recorded(response, training, alice)


def test_a_player_back_on_the_team_answers_again(training: Training, alice: Player) -> None:
    token = _token(alice, training, "INVITATION", channel="push")
    _end_membership(alice, "inactive")
    Membership.objects.filter(player=alice).update(active=True)

    response = _api("POST json", token, "INVITATION")

    assert response.status_code == 200 and response.json()["changed"] is True
