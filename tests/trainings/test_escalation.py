"""Escalation (issue 46, item 3): a rule's `escalate` offsets send the reminder on every channel of a player
who still owes the answer, push and email; earlier offsets stay push-only. End to end: the rule changed
through the API, the reminders fired by the engine, published to RabbitMQ, sent by the gateway to the
loopback FCM peer and the SMTP peer; the answer given from the email counts for the email channel in the
analytics."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from delivery.gateway.consumer import Outcome, PushSender
from delivery.models import Device, PushSend
from reminders.models import Occurrence
from tests.clients import api_as
from tests.conftest import drain_queue
from tests.factories import UserFactory, training_made
from tests.peers.apns_fcm import FcmPeer
from tests.trainings.conftest import fire
from tests.trainings.smtp_peer import Inbox
from trainings.answers.following import answer_link_record
from trainings.answers.reading import answer_link_open
from trainings.models import InvitationStatus, Player, Push, ReminderPreference, ReminderRule, Team, Training
from trainings.planning.writes import invitation_respond
from trainings.selectors import job_key

pytestmark = pytest.mark.django_db

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)  # 18:00 in Paris


def _occurrence(training: Training, rule: ReminderRule, before: dt.timedelta) -> Occurrence:
    return Occurrence.objects.get(
        job__key=job_key(training_id=training.pk, rule=rule), fire_at=START - before
    )


def _emails(team: Team) -> None:
    for player in Player.objects.filter(memberships__team=team, memberships__active=True):
        Device.objects.create(player=player, provider="email", platform="email",
                              token=f"{player.name.lower()}@example.com")  # fmt: skip


def _operator() -> Any:
    return api_as(UserFactory(username="root", is_staff=True, is_superuser=True))


def test_an_operator_sets_escalation_offsets_through_the_api() -> None:
    api = _operator()
    response = api.patch("/api/reminder-rules/invitation/", {"escalate": ["6h"]}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["escalate"] == ["6h"]
    assert ReminderRule.objects.get(slug="invitation").escalate == ["6h"]
    assert api.get("/api/reminder-rules/invitation/").json()["escalate"] == ["6h"]
    # An offset the rule does not remind at, or no offset at all: a 400 naming the field, nothing written.
    for bad in (["5h"], ["6 hours"], "6h"):
        response = api.patch("/api/reminder-rules/invitation/", {"escalate": bad}, format="json")
        assert response.status_code == 400, bad
        assert set(response.json()) == {"escalate"}
    assert ReminderRule.objects.get(slug="invitation").escalate == ["6h"]
    assert api.patch("/api/reminder-rules/invitation/", {"escalate": []}, format="json").status_code == 200


@pytest.mark.rabbitmq
def test_the_escalation_offset_reaches_the_pending_players_by_push_and_email(
    team: Team, rules: dict[str, ReminderRule], push_queue: str, fcm: FcmPeer, smtp: Inbox,
    sender: PushSender,
) -> None:  # fmt: skip
    _emails(team)
    assert _operator().patch("/api/reminder-rules/invitation/", {"escalate": ["6h"]},
                             format="json").status_code == 200  # fmt: skip
    training = training_made(team, START)
    alice, bruno, chloe = (Player.objects.get(name=name) for name in ("Alice", "Bruno", "Chloe"))
    # Chloe chose "push only, never email": her own choice stands at the escalation too.
    ReminderPreference.objects.create(player=chloe, kind="INVITATION", channels="push")

    # 1 day before: push only, to the three pending players' phones; no email (their phones accepted it).
    assert fire(_occurrence(training, rules["invitation"], dt.timedelta(days=1))).delivered == 1
    bodies = [json.loads(m.body) for m in drain_queue(push_queue, expect=3)]
    assert not any(body.get("escalate") for body in bodies)
    assert {h.outcome for h in sender.handle(bodies)} == {Outcome.DELIVERED}
    assert sorted(fcm.tokens()) == ["fcm-alice", "fcm-bruno", "fcm-chloe"]
    assert smtp.messages == []

    # Alice answers; at 6 h before, Bruno and Chloe still owe it: escalated, on every channel they have.
    invitation_respond(invitation=training.invitations.get(player=alice), status=InvitationStatus.ACCEPTED)
    assert fire(_occurrence(training, rules["invitation"], dt.timedelta(hours=6))).delivered == 1
    bodies = [json.loads(m.body) for m in drain_queue(push_queue, expect=2)]
    assert sorted((b["player"], b.get("escalate")) for b in bodies) == [(bruno.pk, True), (chloe.pk, True)]
    assert {h.outcome for h in sender.handle(bodies)} == {Outcome.DELIVERED}
    assert sorted(fcm.tokens()) == ["fcm-alice", "fcm-bruno", "fcm-bruno", "fcm-chloe", "fcm-chloe"]
    (mail,) = smtp.messages  # Bruno's: his phone accepted it too; Chloe never wanted email
    assert mail["To"] == "bruno@example.com"
    sends = set(PushSend.objects.filter(push_key=Push.objects.get(player=bruno, offset="6h").key).values_list(
        "provider", "status"))  # fmt: skip
    assert sends == {("fcm", "accepted"), ("email", "accepted")}

    # Bruno answers from the email: the analytics count it for the email channel.
    body = mail.get_body(preferencelist=("plain",))
    assert body is not None
    page = next(word for word in str(body.get_content()).split() if "/answer/" in word)
    token = page.split("?")[0].rstrip("/").rsplit("/", 1)[1]
    answer_link_record(target=answer_link_open(token), response="denied")
    coach = UserFactory(is_staff=True)
    team.coaches.add(coach)
    day = START.date().isoformat()
    response = api_as(coach).get("/api/analytics/offsets/", {"since": day, "until": day})
    assert response.status_code == 200, response.content
    channels = {(row["kind"], row["channel"]): row["answers"] for row in response.json()["channels"]}
    assert channels == {("INVITATION", "admin"): 1, ("INVITATION", "email_link"): 1}
