"""Pushes travel many to a message on the push queue (delivery/gateway/queue.py): the worker publishes a fired
reminder's pushes in batches, the gateway sends, records, retries and dead-letters each push of a batch on
its own and acks the batch's message once every push in it is settled. A redelivered batch sends only what
was not recorded (the kill -9 case: tests/trainings_faults/test_push_gateway_crash.py)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from django.utils import timezone

from common.compact_json import json_compact
from delivery.channels.providers import Providers, PushMessage, SendResult, Target, Verdict
from delivery.gateway.consumer import dead_letter_queue_name, gateway_run
from delivery.gateway.queue import BATCH_SCHEMA, QueuedPush, batch_body, batch_key, queue_publisher_at
from delivery.models import PushSend
from tests.conftest import drain_queue
from tests.factories import PlayerFactory, training_made
from tests.trainings.push_fixtures import left_on, recorded_keys
from tests.trainings.test_gateway import Recorder, _message
from tests.trainings.test_storm_fairness import START, _storm, _team


def _publish_batch(url: str, queue: str, *pushes: dict[str, Any]) -> None:
    body = batch_body([json_compact(p) for p in pushes])
    message = QueuedPush(batch_key(pushes[0]["idempotency_key"]), "job", timezone.now(), 1, queue, None, body)
    publisher = queue_publisher_at(url)
    try:
        assert publisher.deliver([message]) == {}
    finally:
        publisher.close()


class _RefusesOne(Recorder):
    """Accepts every push but one, which it answers with a retry, always."""

    def __init__(self, refused: str) -> None:
        super().__init__()
        self.refused = refused

    async def send(self, push: PushMessage, device: Target) -> SendResult:
        self.sent.append((push, device))
        if push.idempotency_key == self.refused:
            return SendResult(Verdict.RETRY, error="told to")
        return SendResult(Verdict.ACCEPTED)


@pytest.fixture
def players(db: None) -> list[Any]:
    return [PlayerFactory(id=7, name="Seven"), PlayerFactory(id=8, name="Eight")]


@pytest.mark.rabbitmq
@pytest.mark.django_db(transaction=True)
def test_a_redelivered_batch_sends_only_what_was_not_recorded(
    push_queue: str, settings: Any, players: list[Any]
) -> None:
    PushSend.objects.create(push_key="a.7", device=players[0].devices.get(), player_id=7, provider="fcm",
                            status="accepted", recorded_at=timezone.now())  # done before  # fmt: skip
    _publish_batch(
        settings.CELERY_BROKER_URL,
        push_queue,
        _message("a.7"),
        _message("b.8", player=8),
        _message("c.x", player="x"),
    )
    provider = Recorder()
    stats = gateway_run(providers=Providers(standin=provider), max_messages=3, idle_seconds=5)
    assert stats.counts == {"duplicate": 1, "delivered": 1, "rejected": 1}
    assert [p.idempotency_key for p, _ in provider.sent] == ["b.8"]
    assert recorded_keys() == {"a.7", "b.8"}
    assert drain_queue(push_queue, as_sent=True) == []  # acked, the malformed push with it


@pytest.mark.rabbitmq
@pytest.mark.django_db(transaction=True)
def test_one_push_of_a_batch_is_dead_lettered_alone(
    push_queue: str, settings: Any, players: list[Any]
) -> None:
    settings.TRAININGS_GATEWAY_RETRY_SECONDS = 0
    settings.TRAININGS_GATEWAY_MAX_ATTEMPTS = 2
    _publish_batch(settings.CELERY_BROKER_URL, push_queue, _message("a.7"), _message("r.8", player=8))
    provider = _RefusesOne("r.8")
    # Three outcomes: delivered, a retry, then dead-lettered.
    stats = gateway_run(providers=Providers(standin=provider), max_messages=3, idle_seconds=5)
    assert stats.counts == {"delivered": 1, "retry": 1, "dead_lettered": 1}
    assert [p.idempotency_key for p, _ in provider.sent] == ["a.7", "r.8", "r.8"]
    assert recorded_keys() == {"a.7", "r.8"}  # each finished
    assert set(PushSend.objects.filter(push_key="r.8").values_list("status", flat=True)) == {
        "failed",
        "given_up",
    }
    assert drain_queue(push_queue, as_sent=True) == []  # the batch is acked once both are settled
    letters = drain_queue(dead_letter_queue_name(), expect=1)
    assert [json.loads(m.body)["push"]["idempotency_key"] for m in letters] == ["r.8"]


@pytest.mark.rabbitmq
@pytest.mark.django_db
def test_a_fired_reminder_publishes_its_pushes_in_batches_in_round_robin_order(
    push_queue: str, settings: Any
) -> None:
    settings.TRAININGS_PUSH_MESSAGE_PUSHES = 100
    big = _team(200, "big")
    small = [_team(15, f"small{i}") for i in range(20)]
    assert _storm([training_made(team, START) for team in [big, *small]]) == 21

    sent = drain_queue(push_queue, expect=5, as_sent=True)
    bodies = [json.loads(m.body) for m in sent]
    assert [b["schema"] for b in bodies] == [BATCH_SCHEMA] * 5
    assert [len(b["pushes"]) for b in bodies] == [100] * 5
    pushes = [p for b in bodies for p in b["pushes"]]
    assert [m.properties["message_id"] for m in sent] == [batch_key(b["pushes"][0]["idempotency_key"])
                                                          for b in bodies]  # fmt: skip
    assert len({p["idempotency_key"] for p in pushes}) == 500
    # The first batch holds the first push of each of the 21 trainings, then their second ones...
    assert len({p["training"] for p in pushes[:21]}) == 21


@pytest.mark.django_db(transaction=True)  # committed rows: the gateway records from a thread of its own
def test_the_gateway_sends_a_batch_on_the_file_broker(
    file_broker: str, settings: Any, players: list[Any]
) -> None:
    settings.PUSH_APNS_KEY_FILE = settings.PUSH_FCM_CREDENTIALS_FILE = ""  # the logging provider serves all
    queue = settings.TRAININGS_PUSH_QUEUE
    _publish_batch(file_broker, queue, _message("a.7"), _message("b.8", player=8), _message("a.7"))
    stats = gateway_run(max_messages=3, idle_seconds=3)
    assert stats.counts == {"delivered": 2, "duplicate": 1}
    assert recorded_keys() == {"a.7", "b.8"}
    assert left_on(file_broker, queue) == []  # the batch's message acked


class _CountsInFlight(Recorder):
    """Accepts every push after a moment, counting how many sends it holds at once."""

    def __init__(self) -> None:
        super().__init__()
        self.now = self.most = 0

    async def send(self, push: PushMessage, device: Target) -> SendResult:
        self.now += 1
        self.most = max(self.most, self.now)
        await asyncio.sleep(0.002)
        self.now -= 1
        return await super().send(push, device)


@pytest.mark.rabbitmq
@pytest.mark.django_db(transaction=True)
def test_the_gateway_takes_more_single_pushes_ahead_once_it_has_seen_they_come_one_to_a_message(
    push_queue: str, settings: Any
) -> None:
    """It starts by taking 30 pushes' worth of batches ahead (3 messages); single pushes raise that to 30
    messages. RabbitMQ applies a consumer's own limit only to consumers started after it: the raise must be
    the channel's, or the gateway stays at 3 pushes a round (a seventh of its rate)."""
    settings.TRAININGS_GATEWAY_PREFETCH, settings.TRAININGS_PUSH_MESSAGE_PUSHES = 30, 10
    PlayerFactory(id=7, name="Seven")
    publisher = queue_publisher_at(settings.CELERY_BROKER_URL)
    try:
        messages = [
            QueuedPush(f"p.{n}", "job", timezone.now(), 1, push_queue, None, json_compact(_message(f"p.{n}")))
            for n in range(200)
        ]
        assert publisher.deliver(messages) == {}
    finally:
        publisher.close()
    provider = _CountsInFlight()
    stats = gateway_run(providers=Providers(standin=provider), max_messages=200, idle_seconds=5)
    assert stats.counts == {"delivered": 200}
    assert provider.most > 3, provider.most
