"""The production wiring: a real `celery beat` kicks a real `celery worker`, which delivers to RabbitMQ."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from reminders.models import Occurrence, OccurrenceStatus
from tests.conftest import drain_queue
from tests.ops import processes


@pytest.fixture
def service(tmp_path: Path) -> Iterator[None]:
    """Worker and beat processes on the test database, with a Celery queue of their own."""
    with processes.service(tmp_path):
        yield


@pytest.mark.postgres
@pytest.mark.rabbitmq
@pytest.mark.django_db(transaction=True)
def test_beat_and_worker_processes_deliver_a_job_posted_through_the_api(
    service: None, api: APIClient, queue_name: str
) -> None:
    fire_at = timezone.now() + dt.timedelta(seconds=3)
    response = api.post(
        "/api/jobs/",
        {
            "key": "process-test",
            "schedules": [fire_at.isoformat()],
            "callback": {"type": "rabbitmq", "data": {"queue": queue_name, "payload": {"ok": True}}},
        },
        format="json",
    )
    assert response.status_code == 201

    messages = drain_queue(queue_name, expect=1, timeout=45)

    assert [json.loads(m.body) for m in messages] == [{"ok": True}]
    # The broker hands the message on at commit; the worker marks the row right after reading commit-ok,
    # so the consumer can get there a few milliseconds before the mark does.
    deadline = time.monotonic() + 10
    while (occurrence := Occurrence.objects.get()).status == OccurrenceStatus.CLAIMED:
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert occurrence.status == OccurrenceStatus.DELIVERED
    assert messages[0].properties["message_id"] == occurrence.idempotency_key
    assert occurrence.delivered_at is not None and occurrence.delivered_at >= fire_at
