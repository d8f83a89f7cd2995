"""Every reminder push carries its answer link: an invitation's two actions (APNs category
TRAINING_INVITATION; FCM data `actions`), a questionnaire's `answer_url`. Real APNs and FCM peers on
loopback receive them; the URL's token names the push's player, training and kind."""

from __future__ import annotations

import json
from typing import Any

import pytest

from delivery.gateway.consumer import Outcome, PushSender
from tests.factories import DeviceFactory, PlayerFactory
from tests.peers.apns_fcm import ApnsPeer, FcmPeer
from tests.trainings.push_fixtures import TRAINING, message
from trainings.answers.links import answer_link_read

pytestmark = pytest.mark.django_db


def _token(url: str) -> str:
    assert url.startswith("http://") and "/api/answer-links/" in url
    return url.rstrip("/").rsplit("/", 1)[1]


def _player() -> Any:
    player = PlayerFactory(devices=[])
    DeviceFactory(player=player, provider="apns", platform="ios", token="abc123")
    DeviceFactory(player=player, provider="fcm", platform="android", token="droid")
    return player


def test_an_invitation_push_carries_accept_and_decline_actions_to_both_peers(
    apns: ApnsPeer, fcm: FcmPeer, sender: PushSender
) -> None:
    player = _player()
    assert sender.handle([message("occ.1", player.pk, kind="INVITATION")])[0].outcome == Outcome.DELIVERED

    (ios,) = apns.received
    assert ios.body["aps"]["category"] == "TRAINING_INVITATION"
    actions = ios.body["actions"]
    assert [(a["id"], a["response"]) for a in actions] == [("accept", "accepted"), ("decline", "denied")]
    assert actions[0]["url"] == actions[1]["url"] == ios.body["answer_url"]
    link = answer_link_read(_token(ios.body["answer_url"]))
    assert (link.player_id, str(link.training_id), link.kind, link.source) == (
        player.pk, TRAINING, "INVITATION", "push_action",
    )  # fmt: skip

    (android,) = fcm.received
    data = android.body["data"]
    assert all(isinstance(value, str) for value in data.values())  # FCM data values are strings
    assert data["category"] == "TRAINING_INVITATION"
    assert json.loads(data["actions"]) == actions
    assert data["answer_url"] == ios.body["answer_url"]


def test_a_questionnaire_push_carries_its_answer_url(
    apns: ApnsPeer, fcm: FcmPeer, sender: PushSender
) -> None:
    player = _player()
    assert sender.handle([message("occ.1", player.pk, kind="POST")])[0].outcome == Outcome.DELIVERED
    (ios,) = apns.received
    assert ios.body["aps"]["category"] == "TRAINING_QUESTIONNAIRE"
    assert "actions" not in ios.body
    assert answer_link_read(_token(ios.body["answer_url"])).kind == "POST"
    (android,) = fcm.received
    assert "actions" not in android.body["data"]
    assert android.body["data"]["answer_url"] == ios.body["answer_url"]


def test_a_training_moved_notice_carries_no_answer_link(
    apns: ApnsPeer, fcm: FcmPeer, sender: PushSender
) -> None:
    player = _player()
    assert sender.handle([message("occ.1", player.pk, kind="MOVED")])[0].outcome == Outcome.DELIVERED
    (ios,) = apns.received
    assert "category" not in ios.body["aps"] and "answer_url" not in ios.body
    (android,) = fcm.received
    assert "answer_url" not in android.body["data"]
