"""The gateway keeps two rounds open (one sending while the other is recorded and acked): what one round
learns must hold for the other. A device a provider called dead in one round is not sent to by a round
that read it as enabled before the disabling was committed; a push already open in one round is not sent
again by the next; the rounds share one pool of in-flight sends. Real APNs and FCM peers on loopback, the
real PostgreSQL and RabbitMQ."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest
from django.utils import timezone

from delivery.channels.providers import providers_from_settings
from delivery.gateway.consumer import Outcome, PushSender, gateway_run
from delivery.gateway.queue import queue_publisher_at
from delivery.models import Device, PushSend, SendStatus
from reminders.transports import Delivery
from tests.conftest import drain_queue
from tests.factories import DeviceFactory, PlayerFactory
from tests.peers.apns_fcm import Answer, ApnsPeer, FcmPeer
from tests.trainings.push_fixtures import message

pytestmark = pytest.mark.django_db


def test_a_device_found_dead_in_one_round_is_not_sent_by_the_round_that_read_it_before(
    apns: ApnsPeer, sender: PushSender
) -> None:
    player = PlayerFactory(devices=[])
    DeviceFactory(player=player, provider="apns", platform="ios", token="gone")
    DeviceFactory(player=player, provider="apns", platform="ios", token="fine")
    apns.script("gone", [Answer(410, "Unregistered")])

    first = sender.begin([message("occ.1", player.pk)])
    assert first.finished.wait(10)  # APNs has answered 410, and nothing is recorded yet
    second = sender.begin([message("occ.2", player.pk)])  # reads both devices as enabled
    assert second.finished.wait(10)
    assert [h.outcome for h in sender.end(first)] == [Outcome.DELIVERED]
    assert [h.outcome for h in sender.end(second)] == [Outcome.DELIVERED]

    assert Counter(apns.tokens()) == {"gone": 1, "fine": 2}  # the dead token once, by the first round
    rows = {
        (s.push_key, s.device.token): (s.status, s.error) for s in PushSend.objects.select_related("device")
    }
    assert rows[("occ.1", "gone")][0] == SendStatus.TOKEN_DEAD
    assert rows[("occ.2", "gone")] == (
        SendStatus.TOKEN_DEAD,
        "the device was disabled while this push waited",
    )
    assert rows[("occ.2", "fine")][0] == SendStatus.ACCEPTED
    assert Device.objects.get(token="gone").disabled_reason == "APNs 410 Unregistered"

    # A round begun after the disabling was committed reads the device as disabled; the sender forgot it.
    assert sender._dead == {}
    assert [h.outcome for h in sender.handle([message("occ.3", player.pk)])] == [Outcome.DELIVERED]
    assert Counter(apns.tokens()) == {"gone": 1, "fine": 3}


def test_a_push_open_in_one_round_is_a_duplicate_in_the_next(apns: ApnsPeer, sender: PushSender) -> None:
    player = PlayerFactory(devices=[])
    DeviceFactory(player=player, provider="apns", platform="ios", token="one")
    first = sender.begin([message("occ.1", player.pk)])
    second = sender.begin([message("occ.1", player.pk), message("occ.2", player.pk)])
    assert [h.outcome for h in sender.end(first)] == [Outcome.DELIVERED]
    assert [h.outcome for h in sender.end(second)] == [Outcome.DUPLICATE, Outcome.DELIVERED]
    assert Counter(apns.tokens()) == {"one": 2}  # occ.1 once, occ.2 once
    assert set(PushSend.objects.values_list("push_key", flat=True)) == {"occ.1", "occ.2"}


def test_open_rounds_share_one_bound_on_sends_in_flight(apns: ApnsPeer, fcm: FcmPeer) -> None:
    sender = PushSender(providers_from_settings(), in_flight=3)
    workers: list[int] = []

    def slow_answer(token: str) -> bool:  # on the peer's thread: note the sender's workers, answer late
        workers.append(sender._workers)
        time.sleep(0.01)
        return True

    fcm.on_request = slow_answer
    try:
        players = [PlayerFactory(devices=[]) for _ in range(12)]
        for n, player in enumerate(players):
            DeviceFactory(player=player, provider="fcm", platform="android", token=f"fcm-{n}")
        rounds = [sender.begin([message(f"occ.{r}.{p.pk}", p.pk) for p in players[r::2]]) for r in range(2)]
        outcomes = [h.outcome for r in rounds for h in sender.end(r)]
    finally:
        sender.close()
    assert outcomes == [Outcome.DELIVERED] * 12
    assert len(workers) == 12 and max(workers) == 3  # both rounds' sends, never more than 3 at once


@pytest.mark.rabbitmq
def test_the_gateway_overlaps_rounds_and_acks_every_push_once(
    apns: ApnsPeer, fcm: FcmPeer, push_queue: str, settings: Any
) -> None:
    settings.TRAININGS_GATEWAY_BATCH = 10  # 60 pushes: six rounds, two open at a time
    players = [PlayerFactory(devices=[]) for _ in range(60)]
    expected = Counter[str]()
    for n, player in enumerate(players):
        token = f"{n:064x}" if n % 2 == 0 else f"fcm-{n}"
        provider, platform = ("apns", "ios") if n % 2 == 0 else ("fcm", "android")
        DeviceFactory(player=player, provider=provider, platform=platform, token=token)
        expected[token] = 1
    transport = queue_publisher_at(settings.REMINDERS_CALLBACK_BROKER_URL)
    refused = transport.deliver(
        [Delivery(i, f"occ.{p.pk}", "job", timezone.now(), 1, push_queue, message(f"occ.{p.pk}", p.pk))
         for i, p in enumerate(players)]
    )  # fmt: skip
    transport.close()
    assert not refused

    stats = gateway_run(providers=providers_from_settings(), max_messages=60, idle_seconds=5)

    assert stats.counts == {"delivered": 60}
    assert Counter(apns.tokens() + fcm.tokens()) == expected  # every device once
    assert PushSend.objects.values("push_key").distinct().count() == 60
    assert drain_queue(push_queue) == []  # every message acked
