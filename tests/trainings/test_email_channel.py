"""The email channel: an SMTP server started by the test on loopback receives the reminder with its answer
links and RFC 8058 unsubscribe headers; email goes out when no device reached the player, or when they
prefer it; a one-click unsubscribe stops it for that kind; a refused address, a hard bounce or a complaint
(Mailgun's signed tracking webhook, through django-anymail) disables the address like a dead token."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from email.message import EmailMessage
from typing import Any

import pytest
from django.test import Client

from delivery.gateway.consumer import Outcome, PushSender
from delivery.models import Device, PushSend, SendStatus
from tests.factories import DeviceFactory, MembershipFactory, PlayerFactory, TeamFactory, training_made
from tests.peers.apns_fcm import Answer, ApnsPeer, FcmPeer
from tests.trainings.push_fixtures import message
from tests.trainings.smtp_peer import Inbox
from trainings.models import Invitation, InvitationStatus, ReminderPreference

pytestmark = pytest.mark.django_db


def _person(*devices: tuple[str, str, str], language: str = "en") -> Any:
    player = PlayerFactory(devices=[], language=language)
    for provider, platform, token in devices:
        DeviceFactory(player=player, provider=provider, platform=platform, token=token)
    return player


def _text(mail: EmailMessage) -> str:
    part = mail.get_body(preferencelist=("plain",))
    assert part is not None
    return str(part.get_content())


def _html(mail: EmailMessage) -> str:
    part = mail.get_body(preferencelist=("html",))
    assert part is not None
    return str(part.get_content())


def test_a_player_without_a_device_gets_the_reminder_by_email_with_links_and_unsubscribe_headers(
    smtp: Inbox, sender: PushSender
) -> None:
    player = _person(("email", "email", "anna@example.com"))
    assert sender.handle([message("occ.1", player.pk, kind="INVITATION")])[0].outcome == Outcome.DELIVERED

    (mail,) = smtp.messages
    assert mail["To"] == "anna@example.com"
    assert mail["Subject"] == "Pre-training questionnaire"  # the push's title
    unsubscribe = str(mail["List-Unsubscribe"]).strip()  # a long header is folded
    assert unsubscribe.startswith("<https://coach.example.com/email/unsubscribe/") and unsubscribe.endswith(
        ">"
    )
    assert mail["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    text, html = _text(mail), _html(mail)
    assert "Speed session starts at 6 p.m." in text
    for response in ("accepted", "denied"):
        assert f"?response={response}" in text
        assert f"?response={response}" in html
    assert "https://coach.example.com/answer/" in text
    send = PushSend.objects.get()
    assert (send.provider, send.status, send.device.token) == (
        "email",
        SendStatus.ACCEPTED,
        "anna@example.com",
    )


def test_email_waits_while_a_device_accepts_and_goes_when_every_device_failed(
    smtp: Inbox, apns: ApnsPeer, fcm: FcmPeer, sender: PushSender
) -> None:
    reached = _person(("fcm", "android", "works"), ("email", "email", "reached@example.com"))
    failing = _person(("apns", "ios", "aa11"), ("email", "email", "failing@example.com"))
    apns.script("aa11", [Answer(410, "Unregistered")])

    first = sender.handle([message("occ.1", reached.pk), message("occ.2", failing.pk)])
    assert [h.outcome for h in first] == [Outcome.DELIVERED, Outcome.RETRY]  # the fallback next
    assert smtp.messages == []
    again = sender.handle([message("occ.2", failing.pk)])
    assert again[0].outcome == Outcome.DELIVERED
    assert [m["To"] for m in smtp.messages] == ["failing@example.com"]
    assert dict(PushSend.objects.filter(push_key="occ.2").values_list("provider", "status")) == {
        "apns": SendStatus.TOKEN_DEAD, "email": SendStatus.ACCEPTED,
    }  # fmt: skip


def test_a_player_who_prefers_email_for_a_kind_gets_email_only(
    smtp: Inbox, apns: ApnsPeer, fcm: FcmPeer, sender: PushSender
) -> None:
    player = _person(("fcm", "android", "phone"), ("email", "email", "pref@example.com"))
    ReminderPreference.objects.create(player=player, kind="PRE", channels="email")
    assert sender.handle([message("occ.1", player.pk, kind="PRE")])[0].outcome == Outcome.DELIVERED
    assert [m["To"] for m in smtp.messages] == ["pref@example.com"]
    assert fcm.received == []
    assert sender.handle([message("occ.2", player.pk, kind="INVITATION")])[0].outcome == Outcome.DELIVERED
    assert len(fcm.received) == 1 and len(smtp.messages) == 1  # another kind: push as usual


def test_one_click_unsubscribe_stops_email_for_that_kind(
    smtp: Inbox, sender: PushSender, client: Client
) -> None:
    player = _person(("email", "email", "leave@example.com"))
    sender.handle([message("occ.1", player.pk, kind="PRE")])
    url = str(smtp.messages[0]["List-Unsubscribe"]).strip().strip("<>")
    path = url.removeprefix("https://coach.example.com")
    assert client.get(path).status_code == 200  # a page with a button: a GET changes nothing
    assert not ReminderPreference.objects.exists()
    response = client.post(path, data="List-Unsubscribe=One-Click",
                           content_type="application/x-www-form-urlencoded")  # fmt: skip
    assert response.status_code == 200
    assert ReminderPreference.objects.get(player=player, kind="PRE").channels == "push"

    assert sender.handle([message("occ.2", player.pk, kind="PRE")])[0].outcome == Outcome.NO_DEVICE
    assert sender.handle([message("occ.3", player.pk, kind="POST")])[0].outcome == Outcome.DELIVERED
    assert len(smtp.messages) == 2  # PRE stopped, POST still comes
    assert client.post(path.replace("/unsubscribe/", "/unsubscribe/x")).status_code == 400


def test_an_address_the_server_refuses_is_disabled_like_a_dead_token(smtp: Inbox, sender: PushSender) -> None:
    player = _person(("email", "email", "nobody@example.com"))
    smtp.refuse.add("nobody@example.com")
    assert sender.handle([message("occ.1", player.pk)])[0].outcome == Outcome.DELIVERED
    device = Device.objects.get()
    assert device.disabled_at is not None
    assert device.disabled_reason.startswith("SMTP 550")
    assert PushSend.objects.get().status == SendStatus.TOKEN_DEAD


def _mailgun(key: str, event: dict[str, Any], *, signed_with: str | None = None) -> bytes:
    timestamp, token = str(int(time.time())), "a" * 50
    signature = hmac.new(
        (signed_with or key).encode(), f"{timestamp}{token}".encode(), hashlib.sha256
    ).hexdigest()
    return json.dumps({"signature": {"timestamp": timestamp, "token": token, "signature": signature},
                       "event-data": {"timestamp": time.time(), "id": "e1", **event}}).encode()  # fmt: skip


@pytest.mark.parametrize(
    ("event", "disabled"),
    [
        ({"event": "failed", "severity": "permanent", "reason": "bounce"}, True),
        ({"event": "complained"}, True),
        ({"event": "failed", "severity": "temporary", "reason": "generic"}, False),  # a soft bounce
        ({"event": "delivered"}, False),
    ],
)
def test_a_signed_bounce_or_complaint_from_mailgun_disables_the_address(
    client: Client, settings: Any, event: dict[str, Any], disabled: bool
) -> None:
    settings.ANYMAIL = {**settings.ANYMAIL, "MAILGUN_WEBHOOK_SIGNING_KEY": "key-signing-secret"}
    DeviceFactory(provider="email", platform="email", token="Bounce@Example.com")
    body = _mailgun("key-signing-secret", {**event, "recipient": "bounce@example.com"})
    response = client.post("/email/anymail/mailgun/tracking/", data=body, content_type="application/json")
    assert response.status_code == 200
    assert (Device.objects.get().disabled_at is not None) is disabled


def test_a_mailgun_event_with_a_bad_signature_changes_nothing(client: Client, settings: Any) -> None:
    settings.ANYMAIL = {**settings.ANYMAIL, "MAILGUN_WEBHOOK_SIGNING_KEY": "key-signing-secret"}
    DeviceFactory(provider="email", platform="email", token="bounce@example.com")
    body = _mailgun("key-signing-secret", {"event": "complained", "recipient": "bounce@example.com"},
                    signed_with="someone-else")  # fmt: skip
    response = client.post("/email/anymail/mailgun/tracking/", data=body, content_type="application/json")
    assert response.status_code == 400
    assert Device.objects.get().disabled_at is None


def test_an_email_answer_link_opens_a_page_whose_button_records_the_answer(
    smtp: Inbox, sender: PushSender, client: Client
) -> None:
    team = TeamFactory()
    player = _person(("email", "email", "anna@example.com"))
    MembershipFactory(team=team, player=player)
    import datetime as dt

    training = training_made(team, dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC))
    body = message("occ.1", player.pk, kind="INVITATION", training=str(training.pk))
    sender.handle([body])
    text = _text(smtp.messages[0])
    accept = next(line for line in text.splitlines() if "?response=accepted" in line).split(": ", 1)[1]
    path = accept.removeprefix("https://coach.example.com")
    page = client.get(path)
    assert page.status_code == 200 and b"Speed session" in page.content
    assert Invitation.objects.get(player=player).status == InvitationStatus.PENDING  # a GET records nothing
    assert client.post(path.split("?")[0], {"response": "accepted"}).status_code == 200
    invitation = Invitation.objects.get(player=player)
    assert (invitation.status, invitation.response_source) == (InvitationStatus.ACCEPTED, "email_link")
