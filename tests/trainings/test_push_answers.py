"""What the services answer, and what the gateway does about it: dead tokens disable their device for good,
throttling and server errors are retried with a backoff that honours Retry-After, retries are bounded and
end in a dead-letter queue an operator replays, and refused credentials stop the gateway with the queue
intact. Real APNs and FCM peers on loopback; the real RabbitMQ."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.utils import timezone

from delivery.channels.providers import AuthFailure, providers_from_settings
from delivery.gateway.consumer import Outcome, PushSender, dead_letter_queue_name, gateway_run
from delivery.gateway.queue import queue_publisher_at
from delivery.models import Device, PushSend, SendStatus
from reminders.transports import Delivery
from tests.conftest import delete_queue, drain_queue
from tests.factories import DeviceFactory, PlayerFactory
from tests.peers.apns_fcm import Answer, ApnsPeer, FcmPeer
from tests.trainings.push_fixtures import message

pytestmark = pytest.mark.django_db


def _player_with(*devices: tuple[str, str, str]) -> Any:
    player = PlayerFactory(devices=[])
    for provider, platform, token in devices:
        DeviceFactory(player=player, provider=provider, platform=platform, token=token)
    return player


def test_a_dead_token_disables_its_device_which_is_never_sent_to_again(
    apns: ApnsPeer, fcm: FcmPeer, sender: PushSender
) -> None:
    player = _player_with(
        ("apns", "ios", "gone"), ("apns", "ios", "bad"), ("apns", "ios", "fine"),
        ("fcm", "android", "unregistered"), ("fcm", "web", "invalid"),
    )  # fmt: skip
    apns.script("gone", [Answer(410, "Unregistered")])
    apns.script("bad", [Answer(400, "BadDeviceToken")])
    fcm.script("unregistered", [Answer(404, "UNREGISTERED")])
    fcm.script("invalid", [Answer(400, "INVALID_ARGUMENT")])

    assert sender.handle([message("occ.1", player.pk)])[0].outcome == Outcome.DELIVERED

    disabled = {d.token: d.disabled_reason for d in Device.objects.exclude(disabled_at=None)}
    assert disabled == {
        "gone": "APNs 410 Unregistered",
        "bad": "APNs 400 BadDeviceToken",
        "unregistered": "FCM 404 UNREGISTERED",
        "invalid": "FCM 400 INVALID_ARGUMENT",
    }
    statuses = dict(PushSend.objects.values_list("device__token", "status"))
    assert statuses == {**dict.fromkeys(disabled, SendStatus.TOKEN_DEAD), "fine": SendStatus.ACCEPTED}

    before = Counter(apns.tokens() + fcm.tokens())
    assert sender.handle([message("occ.2", player.pk)])[0].outcome == Outcome.DELIVERED
    assert Counter(apns.tokens() + fcm.tokens()) - before == {"fine": 1}  # the dead four: never again


def test_a_payload_refused_for_another_reason_fails_that_send_and_keeps_the_device(
    apns: ApnsPeer, sender: PushSender
) -> None:
    player = _player_with(("apns", "ios", "tok"))
    apns.script("tok", [Answer(400, "PayloadTooLarge")])
    assert sender.handle([message("occ.1", player.pk)])[0].outcome == Outcome.DELIVERED
    send = PushSend.objects.get()
    assert (send.status, send.error) == (SendStatus.FAILED, "APNs 400 PayloadTooLarge")
    assert Device.objects.get().enabled


def _publish(queue: str, *bodies: dict[str, Any]) -> None:
    transport = queue_publisher_at(settings.REMINDERS_CALLBACK_BROKER_URL)
    try:
        assert not transport.deliver(
            [
                Delivery(i, b["idempotency_key"], "job", timezone.now(), 1, queue, b)
                for i, b in enumerate(bodies)
            ]
        )
    finally:
        transport.close()


@pytest.fixture
def queues(settings: Any, queue_name: str) -> Any:
    settings.TRAININGS_PUSH_QUEUE = queue_name
    settings.TRAININGS_GATEWAY_RETRY_SECONDS = 0.05
    yield queue_name
    delete_queue(f"{queue_name}.dead")


@pytest.mark.rabbitmq
@pytest.mark.parametrize("peer", ["apns", "fcm"])
def test_throttling_is_retried_no_sooner_than_retry_after(
    peer: str, apns: ApnsPeer, fcm: FcmPeer, queues: str
) -> None:
    server: ApnsPeer | FcmPeer = apns if peer == "apns" else fcm
    player = _player_with(("apns", "ios", "t1") if peer == "apns" else ("fcm", "android", "t1"))
    server.script("t1", [Answer(429, "TooManyRequests", retry_after=2), Answer(503, "ServiceUnavailable")])
    _publish(queues, message("occ.1", player.pk))

    stats = gateway_run(providers=providers_from_settings(), max_messages=3, idle_seconds=10)

    assert stats.counts == {"retry": 2, "delivered": 1}
    first, second, third = server.received
    assert [first.status, second.status, third.status] == [429, 503, 200]
    assert second.at - first.at >= 2.0  # Retry-After: 2
    assert PushSend.objects.get().status == SendStatus.ACCEPTED
    assert drain_queue(queues) == []


@pytest.mark.rabbitmq
def test_retries_are_bounded_then_dead_lettered_and_an_operator_replays_them(
    fcm: FcmPeer, queues: str, settings: Any, capsys: Any
) -> None:
    settings.TRAININGS_GATEWAY_MAX_ATTEMPTS = 3
    player = _player_with(("fcm", "android", "ok"), ("fcm", "android", "down"))
    fcm.script("down", [Answer(503)] * 3)
    _publish(queues, message("occ.1", player.pk))

    stats = gateway_run(providers=providers_from_settings(), max_messages=3, idle_seconds=10)

    assert stats.counts == {"retry": 2, "dead_lettered": 1}
    assert fcm.tokens().count("ok") == 1 and fcm.tokens().count("down") == 3
    assert dict(PushSend.objects.values_list("device__token", "status")) == {
        "ok": SendStatus.ACCEPTED, "down": SendStatus.FAILED, None: SendStatus.GIVEN_UP,
    }  # fmt: skip
    assert drain_queue(queues) == []

    call_command("push_dead_letters")  # listing changes nothing
    assert "occ.1  player=" in capsys.readouterr().out
    call_command("push_dead_letters", "--replay")
    assert "replayed 1 of 1" in capsys.readouterr().out
    stats = gateway_run(providers=providers_from_settings(), max_messages=1, idle_seconds=10)
    assert stats.counts == {"delivered": 1}
    assert fcm.tokens().count("ok") == 1  # accepted before: not sent again
    assert fcm.tokens().count("down") == 4
    assert set(PushSend.objects.values_list("status", flat=True)) == {SendStatus.ACCEPTED}
    assert drain_queue(dead_letter_queue_name()) == []


@pytest.mark.rabbitmq
def test_refused_credentials_stop_the_gateway_and_leave_the_pushes_queued(
    fcm: FcmPeer, queues: str, caplog: Any
) -> None:
    player = _player_with(("fcm", "android", "t1"))
    fcm.refuse_grants = True
    _publish(queues, message("occ.1", player.pk), message("occ.2", player.pk))

    with caplog.at_level("INFO"), pytest.raises(AuthFailure, match="invalid_grant"):
        gateway_run(providers=providers_from_settings(), idle_seconds=10)

    assert "CRITICAL" in caplog.text or any(r.levelname == "CRITICAL" for r in caplog.records)
    assert "PRIVATE KEY" not in caplog.text and "assertion" not in caplog.text
    assert not PushSend.objects.exists()
    assert sorted(json.loads(m.body)["idempotency_key"] for m in drain_queue(queues, expect=2)) == [
        "occ.1",
        "occ.2",
    ]


def test_a_provider_token_apns_refuses_is_an_operator_error(
    apns: ApnsPeer, settings: Any, tmp_path: Any
) -> None:
    from tests.peers.apns_fcm import apns_key

    other_key, _ = apns_key(tmp_path / "..")  # a key APNs does not know
    settings.PUSH_APNS_KEY_FILE = str(other_key)
    player = _player_with(("apns", "ios", "t1"))
    sender = PushSender(providers_from_settings())
    try:
        with pytest.raises(AuthFailure, match="InvalidProviderToken"):
            sender.handle([message("occ.1", player.pk)])
    finally:
        sender.close()
    assert [r.status for r in apns.received] == [403]
    assert Device.objects.get().enabled and not PushSend.objects.exists()
