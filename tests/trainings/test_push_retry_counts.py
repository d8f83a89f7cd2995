"""Retries count requests that went out, throttling pauses what the service throttled, and a refused
cached FCM token is refreshed once before the gateway gives up. Real APNs and FCM peers on loopback; the
gateway test runs on the embedded file broker (no service needed)."""

from __future__ import annotations

from typing import Any

import pytest

from delivery.channels.providers import AuthFailure, providers_from_settings
from delivery.gateway.consumer import Outcome, PushSender, dead_letter_queue_name, gateway_run
from delivery.models import PushSend, SendStatus
from tests.factories import DeviceFactory, PlayerFactory
from tests.peers.apns_fcm import Answer, ApnsPeer, FcmPeer
from tests.trainings.push_fixtures import left_on, message, publish_to

pytestmark = pytest.mark.django_db

APNS_BUSY, APNS_OTHER = "a" * 64, "b" * 64


def _player_with(provider: str, platform: str, token: str) -> Any:
    player = PlayerFactory(devices=[])
    DeviceFactory(player=player, provider=provider, platform=platform, token=token)
    return player


def test_an_apns_429_pauses_that_device_token_not_apns(apns: ApnsPeer, sender: PushSender) -> None:
    busy, other = _player_with("apns", "ios", APNS_BUSY), _player_with("apns", "ios", APNS_OTHER)
    apns.script(APNS_BUSY, [Answer(429, "TooManyRequests", retry_after=30)])

    [throttled] = sender.handle([message("occ.busy", busy.pk)])
    [unrelated] = sender.handle([message("occ.other", other.pk)])
    [again] = sender.handle([message("occ.busy", busy.pk)], sends=[throttled.sends])

    assert throttled.outcome == Outcome.RETRY and throttled.retry_after == 30
    assert unrelated.outcome == Outcome.DELIVERED  # another device of the same app goes out at once
    assert again.outcome == Outcome.RETRY and again.retry_after > 25  # that token waits its Retry-After
    assert [(r.token, r.status) for r in apns.received] == [(APNS_BUSY, 429), (APNS_OTHER, 200)]


def test_an_fcm_401_on_a_cached_token_refreshes_it_once_before_it_stops(
    fcm: FcmPeer, sender: PushSender
) -> None:
    player = _player_with("fcm", "android", "phone")
    assert sender.handle([message("occ.1", player.pk)])[0].outcome == Outcome.DELIVERED

    fcm.issued.clear()  # FCM stops taking the access token google-auth still calls valid
    [refused] = sender.handle([message("occ.2", player.pk)])
    assert refused.outcome == Outcome.RETRY  # not an operator error yet
    [retried] = sender.handle([message("occ.2", player.pk)])
    assert retried.outcome == Outcome.DELIVERED
    assert fcm.grants == 2  # refreshed once

    fcm.issued.clear()  # the token that refresh got is refused too: the credentials are the problem
    with pytest.raises(AuthFailure, match="401"):
        sender.handle([message("occ.3", player.pk)])
    assert [r.status for r in fcm.received] == [200, 401, 200, 401]
    assert fcm.grants == 2


def test_a_device_is_dead_lettered_after_its_own_sends_not_rounds_it_waited(
    fcm: FcmPeer, file_broker: str, settings: Any, caplog: Any
) -> None:
    """One device's 429 pauses FCM while another device's 5xx are retried: the paused rounds send nothing
    and count nothing."""
    settings.TRAININGS_GATEWAY_MAX_ATTEMPTS = 3
    settings.TRAININGS_GATEWAY_RETRY_SECONDS = 0
    throttled, failing = (
        _player_with("fcm", "android", "throttled"),
        _player_with("fcm", "android", "failing"),
    )
    fcm.script("throttled", [Answer(429, retry_after=2)])
    fcm.script("failing", [Answer(503)] * 3)
    publish_to(file_broker, settings.TRAININGS_PUSH_QUEUE, message("occ.t", throttled.pk),
             message("occ.f", failing.pk))  # fmt: skip

    with caplog.at_level("ERROR", logger="trainings.push"):
        stats = gateway_run(url=file_broker, providers=providers_from_settings(), idle_seconds=4)

    statuses = {t: [r.status for r in fcm.received if r.token == t] for t in ("throttled", "failing")}
    assert statuses == {"throttled": [429, 200], "failing": [503, 503, 503]}
    assert stats.counts["dead_lettered"] == 1 and stats.counts["delivered"] == 1
    assert "occ.f dead-lettered after 3 attempts" in caplog.text
    sends = {s.device.token if s.device else s.push_key: (s.status, s.attempts)
             for s in PushSend.objects.select_related("device")}  # fmt: skip
    assert sends == {"throttled": (SendStatus.ACCEPTED, 2), "failing": (SendStatus.FAILED, 3),
                     "occ.f": (SendStatus.GIVEN_UP, 3)}  # the push's own row: given up, finished  # fmt: skip
    assert [m["push"]["idempotency_key"] for m in left_on(file_broker, dead_letter_queue_name())] == ["occ.f"]
