"""Fixtures for the FCM and APNs tests: the loopback peers (tests/peers/apns_fcm.py) with the settings that
point the providers at them, and messages as the reminder pipeline publishes them."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from delivery.channels.providers import providers_from_settings
from delivery.gateway.consumer import PushSender, broker_connection
from delivery.gateway.queue import batch_pushes, queue_publisher_at
from delivery.models import PushSend
from reminders.transports import Delivery
from tests.peers.apns_fcm import ApnsPeer, FcmPeer, apns_key, service_account
from trainings.reminding.publishing import answered

TOPIC = "com.example.coach"
TRAINING = "7d0c0a4e-0000-4000-8000-000000000000"


def recorded_keys() -> set[str]:
    """The push keys the gateway recorded an outcome for (a device's, or the push's as a whole)."""
    return set(PushSend.objects.values_list("push_key", flat=True))


@pytest.fixture
def apns(tmp_path: Path, settings: Any) -> Iterator[ApnsPeer]:
    key_path, public_key = apns_key(tmp_path)
    peer = ApnsPeer(tmp_path, public_key=public_key, key_id="KEY1234567", team_id="TEAM123456", topic=TOPIC)
    settings.PUSH_APNS_BASE_URL = peer.url
    settings.PUSH_APNS_KEY_FILE = str(key_path)
    settings.PUSH_APNS_KEY_ID = "KEY1234567"
    settings.PUSH_APNS_TEAM_ID = "TEAM123456"
    settings.PUSH_APNS_TOPIC = TOPIC
    settings.PUSH_TLS_CA_FILE = str(peer.ca_file)  # the peer's self-signed certificate
    yield peer
    peer.stop()


@pytest.fixture
def fcm(tmp_path: Path, settings: Any) -> Iterator[FcmPeer]:
    peer = FcmPeer(tmp_path, project_id="demo-project")
    path, public_key = service_account(tmp_path, token_uri=peer.token_uri, project_id="demo-project")
    peer.trust(public_key, client_email="pusher@demo-project.iam.gserviceaccount.com")
    settings.PUSH_FCM_BASE_URL = peer.url
    settings.PUSH_FCM_CREDENTIALS_FILE = str(path)
    settings.PUSH_TLS_CA_FILE = str(peer.ca_file)  # the same self-signed certificate as the APNs peer's
    yield peer
    peer.stop()


@pytest.fixture
def sender(apns: ApnsPeer, fcm: FcmPeer) -> Iterator[PushSender]:
    """The gateway's sender, with both providers pointed at the loopback peers."""
    sender = PushSender(providers_from_settings())
    yield sender
    sender.close()


def message(
    key: str, player: int, *, kind: str = "PRE", expires_in: float = 3600, **extra: Any
) -> dict[str, Any]:
    """A player's push document as publishing makes it: its `answer` links signed for the player (or the
    `guardian=` given), unless `answer=` is given."""
    now = timezone.now()
    document: dict[str, Any] = {
        "schema": "trainings.push/2",
        "idempotency_key": key,
        "player": player,
        "title": "Pre-training questionnaire",
        "body": "Speed session starts at 6 p.m.",
        "language": "en",
        "training": TRAINING,
        "kind": kind,
        "rule": "pre-questionnaire",
        "fire_at": now.isoformat(),
        "expires_at": (now + dt.timedelta(seconds=expires_in)).isoformat(),
        **extra,
    }
    return document if "answer" in extra else dict(answered(document))


@pytest.fixture
def file_broker(tmp_path: Path, settings: Any) -> str:
    """A file broker of this test's own, as config/settings.py sets one up for `make run`."""
    folders = {name: tmp_path / name for name in ("queue", "processed", "control")}
    for folder in folders.values():
        folder.mkdir()
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(folders["queue"]),
        "data_folder_out": str(folders["queue"]),
        "processed_folder": str(folders["processed"]),
        "control_folder": str(folders["control"]),
        "store_processed": False,
    }
    settings.REMINDERS_CALLBACK_BROKER_URL = "filesystem://"
    settings.TRAININGS_PUSH_QUEUE = f"push-{uuid.uuid4().hex[:8]}"
    settings.TRAININGS_PUSH_PROVIDER = "logging"
    return "filesystem://"


def publish_to(url: str, queue: str, *bodies: dict[str, Any]) -> None:
    transport = queue_publisher_at(url)
    try:
        refused = transport.deliver(
            [
                Delivery(i, b["idempotency_key"], "job", timezone.now(), 1, queue, b)
                for i, b in enumerate(bodies)
            ]
        )
    finally:
        transport.close()
    assert not refused


def left_on(url: str, queue: str) -> list[dict[str, Any]]:
    """What is still on a queue of the file broker (read and acked)."""
    bodies = []
    with broker_connection(url) as broker:
        simple = broker.SimpleQueue(queue)
        while True:
            try:
                message = simple.get(block=False)
            except simple.Empty:
                break
            bodies += batch_pushes(message.payload) or [message.payload]
            message.ack()
        simple.close()
    return bodies
