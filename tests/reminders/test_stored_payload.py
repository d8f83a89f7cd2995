"""RabbitMQ messages carry the job's payload as PostgreSQL stores it (`payload::text`), not re-encoded by
Python: whatever the payload holds (unicode, nesting, numbers), the consumer decodes the value the API
was given, and a schedule's envelope around it decodes to the same envelope as before."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from django.utils import timezone

from reminders.engine.dispatch import occurrences_dispatch_batch
from reminders.jobs import Callback, CallbackType
from reminders.models import Occurrence, OccurrenceStatus
from reminders.schedules.lifecycle import ScheduleSpec, schedule_upsert
from tests.conftest import drain_queue

pytestmark = [pytest.mark.rabbitmq, pytest.mark.postgres, pytest.mark.django_db]

PAYLOAD: dict[str, Any] = {
    "title": "Läufertraining ✓ 🏃 «Zürich»",
    "quote": 'say "hi"\\ / \n\t end',
    "nested": {"list": [1, 2.5, -3e-7, True, False, None, {"deep": ["ü", []]}], "empty": {}},
    "big": 12345678901234567890,
    "zero": 0,
}


def test_a_unicode_and_nested_payload_arrives_as_the_api_received_it(api, queue_name) -> None:
    response = api.post(
        "/api/jobs/",
        {
            "key": "unicode-1",
            "schedules": [(timezone.now() - dt.timedelta(seconds=1)).isoformat()],
            "callback": {"type": "rabbitmq", "data": {"queue": queue_name, "payload": PAYLOAD}},
        },
        format="json",
    )
    assert response.status_code == 201, response.content

    assert occurrences_dispatch_batch().delivered == 1

    (message,) = drain_queue(queue_name, expect=1)
    assert json.loads(message.body) == PAYLOAD  # py-amqp decoded it as UTF-8
    assert message.properties["content_type"] == "application/json"
    assert message.properties["content_encoding"] == "utf-8"
    occurrence = Occurrence.objects.get(status=OccurrenceStatus.DELIVERED)
    assert message.properties["message_id"] == occurrence.idempotency_key
    assert message.properties["application_headers"] == {
        "job_key": "unicode-1",
        "fire_at": occurrence.fire_at.isoformat(),
        "attempt": 1,
    }


def test_a_schedules_envelope_wraps_the_stored_payload(queue_name: str) -> None:
    now = timezone.now().replace(microsecond=0)
    fire = now - dt.timedelta(seconds=2)
    spec = ScheduleSpec(
        expression=f"@at {int(fire.timestamp())}",
        callback=Callback(type=CallbackType.RABBITMQ, target=queue_name, payload=PAYLOAD),
    )
    schedule_upsert(key="sched-ü", spec=spec)

    assert occurrences_dispatch_batch().delivered == 1

    (message,) = drain_queue(queue_name, expect=1)
    key = f"sched-ü-{int(fire.timestamp())}"
    assert json.loads(message.body) == {
        "id": key,
        "generated_at": int(fire.timestamp()),
        "schedule_id": "sched-ü",
        "payload": PAYLOAD,
    }
    assert message.properties["message_id"] == key
