"""A guardian with an email address and no device gets the reminder by email (a real SMTP server on
loopback), with answer links minted for them and a one-click unsubscribe that changes their preference,
never the player's."""

from __future__ import annotations

import pytest
from django.test import Client

from delivery.gateway.consumer import Outcome, PushSender
from delivery.models import PushSend, SendStatus
from tests.factories import GuardianFactory, PlayerFactory
from tests.trainings.push_fixtures import message
from tests.trainings.smtp_peer import Inbox
from trainings.answers.links import answer_link_read
from trainings.models import ReminderPreference

pytestmark = pytest.mark.django_db


def test_a_guardians_reminder_goes_to_their_email_with_their_own_links(
    smtp: Inbox, sender: PushSender, client: Client
) -> None:
    anna = PlayerFactory(name="Anna")  # an Android phone of her own
    maria = GuardianFactory(name="Maria", player=anna, devices=[
        {"provider": "email", "platform": "email", "token": "maria@example.com"}
    ])  # fmt: skip
    push = message(f"occ.1.{anna.pk}.g{maria.pk}", anna.pk, kind="PRE", guardian=maria.pk)
    assert sender.handle([push])[0].outcome == Outcome.DELIVERED

    (mail,) = smtp.messages  # Maria's address only: Anna's phone is not the guardian's push's
    assert mail["To"] == "maria@example.com"
    body = mail.get_body(preferencelist=("plain",))
    assert body is not None
    answer = next(word for word in str(body.get_content()).split() if "/answer/" in word)
    link = answer_link_read(answer.rstrip("/").rsplit("/", 1)[1])
    assert (link.player_id, link.guardian_id, link.source) == (anna.pk, maria.pk, "email_link")
    send = PushSend.objects.get()
    assert (send.status, send.player_id, send.guardian_id) == (SendStatus.ACCEPTED, anna.pk, maria.pk)

    unsubscribe = str(mail["List-Unsubscribe"]).strip().strip("<>").removeprefix("https://coach.example.com")
    response = client.post(unsubscribe, data="List-Unsubscribe=One-Click",
                           content_type="application/x-www-form-urlencoded")  # fmt: skip
    assert response.status_code == 200
    assert ReminderPreference.objects.get(guardian=maria, kind="PRE").channels == "push"
    assert not ReminderPreference.objects.filter(player=anna).exists()
    again = message(f"occ.2.{anna.pk}.g{maria.pk}", anna.pk, kind="PRE", guardian=maria.pk)
    assert sender.handle([again])[0].outcome == Outcome.NO_DEVICE  # no more email; no phone of hers
    assert len(smtp.messages) == 1
