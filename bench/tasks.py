"""The task the competitors run: publish one reminder to its queue, the way this project's scan does.

It goes through the project's own RabbitMQ transport (durable queue, persistent message, one AMQP
transaction), so all three systems give the reminder the same guarantee and the same headers.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from celery import shared_task

from reminders.transports import Delivery, get_transport


@shared_task(name="bench.publish_reminder", ignore_result=True)
def publish_reminder(*, queue: str, key: str, fire_at: str, payload: Any) -> None:
    delivery = Delivery(
        occurrence_id=0,
        idempotency_key=key,
        job_key=key,
        fire_at=datetime.fromisoformat(fire_at),
        attempt=1,
        target=queue,
        payload=payload,
    )
    errors = get_transport("rabbitmq").deliver([delivery])
    if errors:
        raise RuntimeError(str(errors[0]))
