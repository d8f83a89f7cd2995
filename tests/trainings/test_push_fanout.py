"""One push reaches every enabled device of the player, through the provider of each device, against real
APNs (HTTP/2 + TLS, JWT checked) and FCM v1 (OAuth token checked) peers on loopback."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from delivery.channels.providers import providers_from_settings
from delivery.gateway.consumer import Outcome, PushSender
from delivery.gateway.stamps import SUCCESS_EVERY
from delivery.models import Device, PushSend, SendStatus
from tests.factories import DeviceFactory, PlayerFactory
from tests.peers.apns_fcm import ApnsPeer, FcmPeer
from tests.trainings.push_fixtures import TOPIC, TRAINING, message

pytestmark = pytest.mark.django_db


def test_it_sends_one_push_to_each_enabled_device(apns: ApnsPeer, fcm: FcmPeer, sender: PushSender) -> None:
    player = PlayerFactory(devices=[])
    phone = DeviceFactory(player=player, provider="apns", platform="ios", token="a" * 64)
    android = DeviceFactory(player=player, provider="fcm", platform="android", token="android-1")
    web = DeviceFactory(player=player, provider="fcm", platform="web", token="web-1")
    DeviceFactory(
        player=player, provider="fcm", token="old", disabled_at="2026-01-01T00:00Z", disabled_reason="x"
    )

    [handled] = sender.handle([message("occ.1", player.pk)])

    assert handled.outcome == Outcome.DELIVERED
    [ios] = apns.received
    assert ios.token == "a" * 64 and ios.status == 200
    assert ios.headers["apns-topic"] == TOPIC
    assert ios.headers["apns-push-type"] == "alert" and ios.headers["apns-priority"] == "10"
    assert ios.headers["apns-collapse-id"] == f"{TRAINING}:pre"  # a newer PRE reminder replaces this one
    assert int(ios.headers["apns-expiration"]) > 0
    assert ios.body["aps"]["alert"]["title"] == "Pre-training questionnaire"
    assert (ios.body["training"], ios.body["kind"], ios.body["screen"]) == (TRAINING, "PRE", "questionnaire")
    by_token = {r.token: r.body for r in fcm.received}
    assert set(by_token) == {"android-1", "web-1"}  # not the disabled device
    assert by_token["android-1"]["android"]["collapse_key"] == f"{TRAINING}:pre"
    assert by_token["android-1"]["android"]["notification"]["tag"] == f"{TRAINING}:pre"
    assert by_token["web-1"]["webpush"]["notification"]["tag"] == f"{TRAINING}:pre"
    data = dict(by_token["web-1"]["data"])
    assert data.pop("answer_url").startswith("http")  # the answer link (tests/trainings/test_answer_links.py)
    assert data == {"training": TRAINING, "kind": "PRE", "push": "occ.1", "rule": "pre-questionnaire",
                    "screen": "questionnaire", "category": "TRAINING_QUESTIONNAIRE"}  # fmt: skip

    sends = {s.device_id: s for s in PushSend.objects.all()}
    assert set(sends) == {phone.pk, android.pk, web.pk}
    assert {s.status for s in sends.values()} == {SendStatus.ACCEPTED}
    assert sends[phone.pk].provider == "apns" and sends[android.pk].provider == "fcm"
    assert sends[phone.pk].provider_message_id == ios.headers["apns-id"]
    assert sends[android.pk].provider_message_id.startswith("projects/demo-project/messages/")
    assert not any(d.last_success_at for d in Device.objects.filter(pk__in=sends))  # not on the sends' path
    sender.stamps.write()  # the sender's minute is up (delivery/gateway/stamps.py)
    assert all(d.last_success_at for d in Device.objects.filter(pk__in=sends))


def test_a_device_reached_again_within_the_hour_keeps_its_last_success(
    fcm: FcmPeer, sender: PushSender
) -> None:
    """`last_success_at` says when a push last got through to within SUCCESS_EVERY: a device reached again
    sooner is not rewritten (each rewrite is a new row version), one reached later is."""
    player = PlayerFactory(devices=[])
    recent = DeviceFactory(player=player, provider="fcm", platform="android", token="recent")
    earlier = timezone.now() - SUCCESS_EVERY + timedelta(minutes=5)
    Device.objects.filter(pk=recent.pk).update(last_success_at=earlier)
    old = DeviceFactory(player=player, provider="fcm", platform="android", token="old")
    long_ago = timezone.now() - SUCCESS_EVERY - timedelta(minutes=5)
    Device.objects.filter(pk=old.pk).update(last_success_at=long_ago)
    DeviceFactory(player=player, provider="fcm", platform="android", token="new")

    before = timezone.now()
    [handled] = sender.handle([message("occ.again", player.pk)])
    sender.stamps.write()

    assert handled.outcome == Outcome.DELIVERED
    assert {r.status for r in fcm.received} == {200} and len(fcm.received) == 3
    last = dict(Device.objects.values_list("token", "last_success_at"))
    assert last["recent"] == earlier
    assert last["old"] is not None and last["old"] >= before
    assert last["new"] is not None and last["new"] >= before


@pytest.mark.postgres  # a PostgreSQL storage parameter
def test_device_pages_keep_room_for_the_success_update() -> None:
    """Half of each page free, so `last_success_at`'s new row version fits on its page (a HOT update, no
    index entry): migration 0030."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = %s", [Device._meta.db_table])
        (options,) = cursor.fetchone()
    assert "fillfactor=50" in (options or [])


def test_a_device_deleted_while_its_push_is_in_flight_leaves_the_round_recorded(
    apns: ApnsPeer, sender: PushSender
) -> None:
    """The send row keeps the id of a device deleted meanwhile (no database constraint to lock the device
    for every send, or to fail the recorder's whole commit); reading it with its device gives none."""
    player = PlayerFactory(devices=[])
    gone = DeviceFactory(player=player, provider="apns", platform="ios", token="b" * 64)
    stays = DeviceFactory(player=player, provider="apns", platform="ios", token="c" * 64)

    round_ = sender.begin([message("occ.gone", player.pk)])
    Device.objects.filter(pk=gone.pk).delete()
    [handled] = sender.end(round_)

    assert handled.outcome == Outcome.DELIVERED
    connection.check_constraints()  # nothing for the end of the transaction to refuse
    sends = {s.device_id: s for s in PushSend.objects.select_related("device")}
    assert set(sends) == {gone.pk, stays.pk}
    assert {s.status for s in sends.values()} == {SendStatus.ACCEPTED}
    assert sends[gone.pk].device is None and sends[stays.pk].device == stays


def test_the_oauth_token_is_fetched_once_and_reused(fcm: FcmPeer, sender: PushSender) -> None:
    players = [PlayerFactory() for _ in range(3)]
    sender.handle([message(f"occ.{p.pk}", p.pk) for p in players])
    sender.handle([message("again.1", players[0].pk)])
    assert fcm.grants == 1  # cached until google-auth says it expires
    assert [r.status for r in fcm.received] == [200] * 4


def test_a_player_without_an_enabled_device_is_a_recorded_outcome(sender: PushSender) -> None:
    player = PlayerFactory(devices=[])
    [handled] = sender.handle([message("occ.9", player.pk)])
    assert handled.outcome == Outcome.NO_DEVICE
    send = PushSend.objects.get()
    assert (send.push_key, send.device, send.status) == ("occ.9", None, SendStatus.NO_DEVICE)


def test_a_push_that_sat_in_the_queue_past_the_training_start_is_dropped(
    fcm: FcmPeer, sender: PushSender
) -> None:
    player = PlayerFactory()
    [handled] = sender.handle([message("occ.late", player.pk, expires_in=-1)])
    assert handled.outcome == Outcome.STALE
    assert fcm.received == []
    assert PushSend.objects.get().status == SendStatus.STALE


def test_providers_without_credentials_leave_their_devices_to_the_logging_provider(caplog: Any) -> None:
    player = PlayerFactory(
        devices=[{"provider": "apns", "platform": "ios"}, {"provider": "fcm", "platform": "web"}]
    )
    sender = PushSender(providers_from_settings())
    try:
        with caplog.at_level("INFO", logger="trainings.push"):
            [handled] = sender.handle([message("occ.dev", player.pk)])
    finally:
        sender.close()
    assert handled.outcome == Outcome.DELIVERED
    assert set(PushSend.objects.values_list("provider", flat=True)) == {"logging"}
    assert caplog.text.count("PUSH player=") == 2
