"""Delivery to the real RabbitMQ: what arrives, and that nothing counts as delivered that did not."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import amqp
import pytest
from amqp import spec
from django.conf import settings
from django.utils import timezone
from kombu import Connection

from reminders.engine.claiming import occurrences_claim_due
from reminders.engine.dispatch import occurrences_dispatch_batch, occurrences_dispatch_for
from reminders.models import Occurrence, OccurrenceStatus
from reminders.transports import get_transport
from reminders.transports.base import Delivery
from tests.conftest import drain_queue
from tests.factories import JobFactory, OccurrenceFactory

pytestmark = [pytest.mark.rabbitmq, pytest.mark.django_db]


def _iso(instant: dt.datetime) -> str:
    return instant.isoformat().replace("+00:00", "Z")


def test_a_job_posted_through_the_api_arrives_on_its_queue_when_due(api, queue_name) -> None:
    now = timezone.now()
    response = api.post(
        "/api/jobs/",
        {
            "key": "training-invitations-42",
            "schedules": [_iso(now + dt.timedelta(seconds=2)), _iso(now + dt.timedelta(hours=1))],
            "callback": {"type": "rabbitmq", "data": {"queue": queue_name, "payload": {"id": "42"}}},
        },
        format="json",
    )
    assert response.status_code == 201, response.content

    # Not due yet: nothing is claimed and nothing is published.
    assert occurrences_dispatch_batch().claimed == 0
    assert drain_queue(queue_name, timeout=0.2) == []

    Occurrence.objects.filter(fire_at__lt=now + dt.timedelta(minutes=1)).update(
        next_attempt_at=now - dt.timedelta(seconds=1)
    )
    result = occurrences_dispatch_batch()
    assert (result.claimed, result.delivered) == (1, 1)

    (message,) = drain_queue(queue_name, expect=1)
    due = Occurrence.objects.get(status=OccurrenceStatus.DELIVERED)
    assert json.loads(message.body) == {"id": "42"}
    assert message.properties["message_id"] == due.idempotency_key
    assert message.properties["delivery_mode"] == 2
    assert message.properties["application_headers"]["job_key"] == "training-invitations-42"
    assert message.properties["application_headers"]["fire_at"] == due.fire_at.isoformat()
    assert due.delivered_at is not None
    assert Occurrence.objects.filter(status=OccurrenceStatus.SCHEDULED).count() == 1


def test_a_queue_that_does_not_exist_is_declared_durable_before_the_publish(queue_name) -> None:
    OccurrenceFactory(job=JobFactory(target=queue_name))
    assert occurrences_dispatch_batch().delivered == 1

    with Connection(settings.CELERY_BROKER_URL) as conn:
        _, count, _ = conn.default_channel.queue_declare(queue_name, passive=True)
        assert count == 1
        # Re-declaring it non-durable is refused by the broker: it is durable.
        with pytest.raises(amqp.exceptions.PreconditionFailed):
            conn.channel().queue_declare(queue_name, durable=False)


def test_a_queue_the_broker_refuses_leaves_the_occurrence_retrying_never_delivered(queue_name) -> None:
    with Connection(settings.CELERY_BROKER_URL) as conn:
        conn.default_channel.queue_declare(queue_name, durable=False, auto_delete=False)
    occurrence = OccurrenceFactory(job=JobFactory(target=queue_name))

    result = occurrences_dispatch_batch()

    assert (result.delivered, result.retried) == (0, 1)
    occurrence.refresh_from_db()
    assert occurrence.status == OccurrenceStatus.SCHEDULED
    assert occurrence.attempts == 1
    assert "PRECONDITION_FAILED" in occurrence.last_error
    assert occurrence.next_attempt_at > timezone.now()
    assert drain_queue(queue_name, timeout=0.2) == []


def test_an_unreachable_broker_leaves_the_occurrence_retrying(settings, queue_name) -> None:
    settings.REMINDERS_CALLBACK_BROKER_URL = "amqp://guest:guest@127.0.0.1:1//"
    occurrence = OccurrenceFactory(job=JobFactory(target=queue_name))

    assert occurrences_dispatch_batch().retried == 1

    occurrence.refresh_from_db()
    assert occurrence.status == OccurrenceStatus.SCHEDULED
    assert occurrence.delivered_at is None
    assert "broker error" in occurrence.last_error


def _dispatch_losing_the_connection_at_commit(
    monkeypatch: pytest.MonkeyPatch, queue: str, *, commit_sent: bool
) -> list[Occurrence]:
    """Three due rows dispatched while the socket dies at tx.commit (before the commit is written, or just
    after): none is delivered, every one is back to `scheduled` with a broker error for a retry."""
    occurrences = [OccurrenceFactory(job=JobFactory(target=queue)) for _ in range(3)]
    real_send = amqp.Channel.send_method

    def lose_connection_at_commit(channel: amqp.Channel, sig: Any, *args: Any, **kwargs: Any) -> Any:
        if sig == spec.Tx.Commit and not commit_sent:
            channel.connection.sock.close()
        sent = real_send(channel, sig, *args, **kwargs)
        if sig == spec.Tx.Commit and commit_sent:
            channel.connection.sock.close()
        return sent

    monkeypatch.setattr(amqp.Channel, "send_method", lose_connection_at_commit)
    result = occurrences_dispatch_batch()
    monkeypatch.setattr(amqp.Channel, "send_method", real_send)

    assert (result.delivered, result.retried) == (0, 3)
    for occurrence in occurrences:
        occurrence.refresh_from_db()
        assert occurrence.status == OccurrenceStatus.SCHEDULED
        assert occurrence.last_error.startswith("broker error")
    return occurrences


def test_a_connection_lost_before_the_commit_is_confirmed_is_not_delivered(monkeypatch, queue_name) -> None:
    # The socket dies after the publishes were written, as tx.commit goes out.
    _dispatch_losing_the_connection_at_commit(monkeypatch, queue_name, commit_sent=False)
    assert drain_queue(queue_name, timeout=0.3) == []  # the uncommitted transaction was rolled back

    # The transport reconnects by itself; the retry goes through.
    Occurrence.objects.update(next_attempt_at=timezone.now())
    assert occurrences_dispatch_batch().delivered == 3
    assert len(drain_queue(queue_name, expect=3)) == 3


def test_a_connection_lost_while_waiting_for_commit_ok_retries_every_message(monkeypatch, queue_name) -> None:
    """The commit went out; whether the broker took it is unknown, so every message is retried."""
    occurrences = _dispatch_losing_the_connection_at_commit(monkeypatch, queue_name, commit_sent=True)
    Occurrence.objects.update(next_attempt_at=timezone.now())
    assert occurrences_dispatch_batch().delivered == 3
    # At least once: the broker may have committed the first transaction before the socket closed.
    received = drain_queue(queue_name)
    assert {m.properties["message_id"] for m in received} == {o.idempotency_key for o in occurrences}


@pytest.mark.postgres
def test_a_crash_between_publish_and_mark_redelivers_with_the_same_message_id(queue_name) -> None:
    occurrence = OccurrenceFactory(
        job=JobFactory(target=queue_name, payload={"n": 1}), fire_at=timezone.now() - dt.timedelta(minutes=10)
    )
    job = occurrence.job

    # A worker claims (its lease is already over by now) and publishes, then dies before marking.
    claim = occurrences_claim_due(now=timezone.now() - dt.timedelta(minutes=5), limit=10, lease_seconds=60)
    (claimed,) = claim.occurrences
    delivery = Delivery(
        occurrence_id=claimed.id, idempotency_key=claimed.idempotency_key, job_key=job.key,
        fire_at=claimed.fire_at, attempt=claimed.attempts, target=job.target, payload=job.payload,
    )  # fmt: skip
    assert get_transport("rabbitmq").deliver([delivery]) == {}

    # Another worker's scan reaps the expired lease and delivers again.
    totals, _ = occurrences_dispatch_for(seconds=0)
    assert totals.delivered == 1

    messages = drain_queue(queue_name, expect=2)
    assert len(messages) == 2
    assert {m.properties["message_id"] for m in messages} == {occurrence.idempotency_key}
    occurrence.refresh_from_db()
    assert occurrence.status == OccurrenceStatus.DELIVERED
    assert occurrence.attempts == 2
