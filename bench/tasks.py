"""The task the competitors run: publish one reminder to its queue, the way this project's scan does.

It goes through the project's own RabbitMQ transport (durable queue, persistent message, one AMQP
transaction), so all three systems give the reminder the same guarantee and the same headers.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from celery import shared_task

from bench.harness import PAYLOAD
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


def publish_reminders_eta(fires: Iterable[datetime], *, queue: str, key: str, task_queue: str = "") -> float:
    """Schedule reminders the Celery ETA way, one `apply_async(eta=fire_at)` each, to be published to
    `queue` when due (the task message goes to `task_queue`, else the default). Returns the seconds taken."""
    options: dict[str, Any] = {"queue": task_queue} if task_queue else {}
    start = time.perf_counter()
    for i, fire_at in enumerate(fires):
        publish_reminder.apply_async(
            kwargs={"queue": queue, "key": f"{key}-{i}", "fire_at": fire_at.isoformat(), "payload": PAYLOAD},
            eta=fire_at,
            **options,
        )
    return time.perf_counter() - start
