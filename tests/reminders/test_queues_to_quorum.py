"""`manage.py queues_to_quorum`: a classic queue with messages in it becomes a quorum queue of the same name
holding every one of them, body, id and headers unchanged (common/amqp/quorum_move.py)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import amqp
import pytest
from django.conf import settings
from django.core.management import call_command

from bench.processes import amqp_connection, delete_queue
from common.amqp.quorum_move import staging_name

pytestmark = [pytest.mark.rabbitmq]


@pytest.fixture
def classic_queue() -> Iterator[str]:
    name = f"test.to-quorum.{uuid.uuid4().hex[:12]}"
    yield name
    delete_queue(settings.CELERY_BROKER_URL, name)
    delete_queue(settings.CELERY_BROKER_URL, staging_name(name))


def _publish(queue: str, ids: range, *, declare: dict[str, str] | None = None) -> None:
    with contextlib.closing(amqp_connection(settings.CELERY_BROKER_URL)) as conn:
        channel = conn.channel()
        channel.queue_declare(queue, durable=True, auto_delete=False, arguments=declare)
        for i in ids:
            message = amqp.Message(
                f'{{"n": {i}}}'.encode(),
                message_id=f"key-{i}",
                delivery_mode=2,
                content_type="application/json",
                application_headers={"job_key": f"job-{i}", "attempt": 1},
            )
            channel.basic_publish(message, exchange="", routing_key=queue)
        channel.queue_declare(queue, passive=True)  # a round trip: every publish above has arrived


def _queue_type(queue: str) -> str:
    """quorum when a quorum declare is accepted, classic when RabbitMQ refuses it as inequivalent."""
    with contextlib.closing(amqp_connection(settings.CELERY_BROKER_URL)) as conn:
        try:
            conn.channel().queue_declare(
                queue, durable=True, auto_delete=False, arguments={"x-queue-type": "quorum"}
            )
        except amqp.exceptions.PreconditionFailed:
            return "classic"
    return "quorum"


def _take_all(queue: str) -> list[amqp.Message]:
    taken = []
    with contextlib.closing(amqp_connection(settings.CELERY_BROKER_URL)) as conn:
        channel = conn.channel()
        while (message := channel.basic_get(queue, no_ack=True)) is not None:
            taken.append(message)
    return taken


def _exists(queue: str) -> bool:
    with contextlib.closing(amqp_connection(settings.CELERY_BROKER_URL)) as conn:
        try:
            conn.channel().queue_declare(queue, passive=True)
        except amqp.exceptions.NotFound:
            return False
    return True


def test_a_classic_queue_with_messages_becomes_a_quorum_queue_with_every_message(
    classic_queue: str, settings: object, capsys: pytest.CaptureFixture[str]
) -> None:
    _publish(classic_queue, range(1200))  # more than one batch of the move
    assert _queue_type(classic_queue) == "classic"

    call_command("queues_to_quorum", "--only", "--queue", classic_queue)

    assert f"{classic_queue}: now a quorum queue, 1200 messages moved" in capsys.readouterr().out
    assert _queue_type(classic_queue) == "quorum"
    assert not _exists(staging_name(classic_queue))
    messages = _take_all(classic_queue)
    assert sorted(m.properties["message_id"] for m in messages) == sorted(f"key-{i}" for i in range(1200))
    for message in messages:
        n = int(message.properties["message_id"].removeprefix("key-"))
        assert message.body == f'{{"n": {n}}}'.encode()
        headers = dict(message.properties["application_headers"])
        headers.pop("x-delivery-count")  # the quorum queue's own count of deliveries (0: the first)
        assert headers == {"job_key": f"job-{n}", "attempt": 1}
        assert message.properties["delivery_mode"] == 2
        assert message.properties["content_type"] == "application/json"


def test_a_move_stopped_half_way_finishes_when_run_again(classic_queue: str) -> None:
    """A crash after part of the queue reached the staging queue: the next run moves both parts."""
    _publish(classic_queue, range(0, 300))
    _publish(staging_name(classic_queue), range(300, 500), declare={"x-queue-type": "quorum"})

    call_command("queues_to_quorum", "--only", "--queue", classic_queue)

    assert _queue_type(classic_queue) == "quorum"
    assert not _exists(staging_name(classic_queue))
    ids = [m.properties["message_id"] for m in _take_all(classic_queue)]
    assert sorted(ids) == sorted(f"key-{i}" for i in range(500))


def test_a_quorum_queue_is_left_alone(classic_queue: str, capsys: pytest.CaptureFixture[str]) -> None:
    _publish(classic_queue, range(5), declare={"x-queue-type": "quorum"})

    call_command("queues_to_quorum", "--only", "--queue", classic_queue)

    assert f"{classic_queue}: already a quorum queue" in capsys.readouterr().out
    assert len(_take_all(classic_queue)) == 5


def test_with_queue_type_quorum_the_publisher_declares_quorum_queues_and_skips_a_dead_broker(
    classic_queue: str, settings: Any
) -> None:
    """REMINDERS_QUEUE_TYPE=quorum: the queue a publish declares is a quorum queue; a URL list whose first
    broker refuses connections publishes on the next one."""
    from django.utils import timezone

    from common.amqp.publisher import TxPublisher
    from delivery.gateway.queue import QueuedPush

    settings.REMINDERS_QUEUE_TYPE = "quorum"
    dead = "amqp://guest:guest@127.0.0.1:1//"  # nothing listens on port 1
    publisher = TxPublisher(f"{dead};{settings.CELERY_BROKER_URL}", connect_timeout=2)
    try:
        sent = [QueuedPush(f"key-{i}", "job", timezone.now(), 1, classic_queue, {"n": i}) for i in range(3)]
        assert publisher.deliver(sent) == {}
    finally:
        publisher.close()
    assert _queue_type(classic_queue) == "quorum"
    assert sorted(m.properties["message_id"] for m in _take_all(classic_queue)) == ["key-0", "key-1", "key-2"]
