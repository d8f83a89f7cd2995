"""A RabbitMQ delivery carries its metadata as AMQP headers the consumer can read (the benchmark found
them silently dropped: py-amqp only sends a headers table passed as `application_headers`)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from reminders.transports import Delivery
from reminders.transports.rabbitmq import RabbitMQTransport
from tests.conftest import drain_queue


@pytest.mark.rabbitmq
def test_it_sends_job_key_fire_at_and_attempt_as_headers(queue_name: str) -> None:
    fire_at = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    delivery = Delivery(
        occurrence_id=1, idempotency_key="idem-1", job_key="job-1", fire_at=fire_at, attempt=2,
        target=queue_name, payload={"a": 1},
    )  # fmt: skip
    transport = RabbitMQTransport()
    try:
        assert transport.deliver([delivery]) == {}
    finally:
        transport.close()

    [message] = drain_queue(queue_name, expect=1)
    assert message.headers == {"job_key": "job-1", "fire_at": fire_at.isoformat(), "attempt": 2}
    assert message.properties["message_id"] == "idem-1"
