"""An answer by the player or any of their guardians counts for the player and stops the reminders for
all of them; the coach sees who answered. A guardian's link names the guardian and the player and never
works for another player."""

from __future__ import annotations

import datetime as dt
import json
import urllib.request
from typing import Any

import pytest
from django.core import signing
from django.test import Client

from reminders.models import Occurrence
from tests.factories import WELLNESS, GuardianFactory, training_made
from tests.trainings.conftest import fire
from trainings.answers.links import SALT, answer_document, answer_token, answer_url
from trainings.models import (
    AnswerSource,
    Guardian,
    Invitation,
    InvitationStatus,
    Player,
    Push,
    PushStatus,
    QuestionnaireAnswer,
    ReminderRule,
    Team,
    Training,
)
from trainings.selectors import job_key, training_player_grid

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)  # 18:00 in Paris


@pytest.fixture(autouse=True)
def _pushes_to_a_test_queue(push_queue: str) -> None:
    pass


@pytest.fixture
def youth(team: Team) -> Team:
    Team.objects.filter(pk=team.pk).update(reminds="both")
    team.refresh_from_db()
    return team


@pytest.fixture
def maria(team: Team) -> Guardian:
    return GuardianFactory(name="Maria", language="fr", player=Player.objects.get(name="Alice"))


def _occurrence(training: Training, rule: ReminderRule, before: dt.timedelta) -> Occurrence:
    return Occurrence.objects.get(
        job__key=job_key(training_id=training.pk, rule=rule), fire_at=START - before
    )


def _pushed(occurrence: Occurrence) -> list[str]:
    rows = Push.objects.filter(occurrence_key=occurrence.idempotency_key, status=PushStatus.SENT)
    return sorted(
        f"{player} via {guardian}" if guardian else player
        for player, guardian in rows.values_list("player__name", "guardian__name")
    )


def _path(player: Player, training: Training, kind: str, guardian: Guardian | None = None) -> str:
    token = answer_token(
        player_id=player.pk, training_id=training.pk, kind=kind, guardian_id=guardian.pk if guardian else None
    )
    return f"/api/answer-links/{token}/"


def _post(client: Client, path: str, body: dict[str, Any]) -> Any:
    return client.post(path, data=json.dumps(body), content_type="application/json")


@pytest.mark.django_db(transaction=True)
def test_a_guardian_answering_via_the_link_stops_the_next_reminder_for_the_player_and_guardian(
    live_server: Any, settings: Any, youth: Team, maria: Guardian, rules: dict[str, ReminderRule]
) -> None:
    settings.TRAININGS_PUBLIC_URL = live_server.url
    from trainings.answers.links import _url_parts

    _url_parts.cache_clear()
    training = training_made(youth, START)
    invitation = rules["invitation"]
    first = _occurrence(training, invitation, dt.timedelta(days=3))
    assert fire(first).delivered == 1
    assert _pushed(first) == ["Alice", "Alice via Maria", "Bruno", "Chloe"]

    alice = Player.objects.get(name="Alice")
    # The link Maria's push carries (what publishing signs into its document), followed over HTTP.
    fields = answer_document(player_id=alice.pk, training_id=str(training.pk), kind="INVITATION",
                             guardian_id=maria.pk)["push"]  # fmt: skip
    accept = next(a for a in fields["actions"] if a["id"] == "accept")
    request = urllib.request.Request(  # noqa: S310 (the test's own server)
        accept["url"], data=b'{"response": "accepted"}', headers={"Content-Type": "application/json"},
        method="POST",
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 (the test's own server)
        body = json.loads(response.read())
    assert body["answer"]["by"] == {"guardian": maria.pk, "name": "Maria", "relation": "mother"}
    assert body["guardian"]["name"] == "Maria" and body["player"]["name"] == "Alice"

    row = Invitation.objects.get(training=training, player=alice)
    assert (row.status, row.response_source, row.responded_by) == (
        InvitationStatus.ACCEPTED, AnswerSource.PUSH_ACTION, maria,
    )  # fmt: skip
    second = _occurrence(training, invitation, dt.timedelta(days=2))
    assert fire(second).delivered == 1
    assert _pushed(second) == ["Bruno", "Chloe"]  # neither Alice nor her mother again
    grid = {r.player: r for r in training_player_grid(training=training)}
    assert grid["Alice"].invitation_how.startswith("from the notification")
    assert grid["Alice"].invitation_how.endswith("answered by Alice's mother (Maria)")
    _url_parts.cache_clear()


@pytest.mark.django_db
def test_the_players_own_answer_stops_their_guardians_reminders_too(
    client: Client, youth: Team, maria: Guardian, rules: dict[str, ReminderRule]
) -> None:
    training = training_made(youth, START)
    alice = Player.objects.get(name="Alice")
    response = _post(client, _path(alice, training, "PRE"), {"answers": WELLNESS})
    assert response.status_code == 200 and response.json()["answer"]["by"] is None
    first = _occurrence(training, rules["pre-questionnaire"], dt.timedelta(minutes=90))
    assert fire(first).delivered == 1
    assert _pushed(first) == ["Bruno", "Chloe"]


@pytest.mark.django_db
def test_a_guardians_questionnaire_answer_by_email_counts_for_the_player(
    client: Client, youth: Team, maria: Guardian, rules: dict[str, ReminderRule]
) -> None:
    training = training_made(youth, START)
    alice = Player.objects.get(name="Alice")
    token = answer_token(player_id=alice.pk, training_id=training.pk, kind="PRE", channel="email",
                         guardian_id=maria.pk)  # fmt: skip
    got = client.get(f"/api/answer-links/{token}/").json()
    assert got["language"] == "fr" and got["question"].startswith("Questionnaire de Alice avant")
    assert _post(client, f"/api/answer-links/{token}/", {"answers": WELLNESS}).status_code == 200
    answer = QuestionnaireAnswer.objects.get(training=training, player=alice, phase="PRE")
    assert (answer.source, answer.answered_by) == (AnswerSource.EMAIL_LINK, maria)
    grid = {r.player: r for r in training_player_grid(training=training)}
    assert grid["Alice"].answers["PRE"].how == "from the email, answered by Alice's mother (Maria)"
    first = _occurrence(training, rules["pre-questionnaire"], dt.timedelta(minutes=90))
    assert fire(first).delivered == 1
    assert "Alice" not in " ".join(_pushed(first))


@pytest.mark.django_db
def test_a_guardians_link_never_works_for_another_player(
    client: Client, youth: Team, maria: Guardian
) -> None:
    training = training_made(youth, START)
    alice, bruno = Player.objects.get(name="Alice"), Player.objects.get(name="Bruno")
    # Signed for Bruno with Maria's id (as if the site minted it): she is not Bruno's guardian.
    response = _post(client, _path(bruno, training, "INVITATION", maria), {"response": "denied"})
    assert (response.status_code, response.json()["code"]) == (410, "not_guardian")
    assert Invitation.objects.get(training=training, player=bruno).status == InvitationStatus.PENDING

    # Her own link, its player changed: the signature no longer holds.
    token = answer_token(player_id=alice.pk, training_id=training.pk, kind="INVITATION", guardian_id=maria.pk)
    value = signing.loads(token, salt=SALT)
    value[0] = bruno.pk
    forged = signing.dumps(value, salt=SALT + "x", compress=False)
    response = _post(client, f"/api/answer-links/{forged}/", {"response": "denied"})
    assert response.status_code == 400 and response.json() == {"detail": "This is not a valid answer link."}

    # No longer Alice's guardian: her link stops working.
    path = _path(alice, training, "INVITATION", maria)
    assert client.get(path).status_code == 200
    maria.guardianships.all().delete()
    response = _post(client, path, {"response": "accepted"})
    assert (response.status_code, response.json()["code"]) == (410, "not_guardian")
    assert Invitation.objects.get(training=training, player=alice).status == InvitationStatus.PENDING
    assert answer_url("x").endswith("/api/answer-links/x/")
