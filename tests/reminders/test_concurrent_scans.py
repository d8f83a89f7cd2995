"""Two beats (or a beat and a re-kick) scanning at the same moment never deliver one occurrence twice."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from reminders.engine.dispatch import occurrences_dispatch_batch
from reminders.models import Occurrence, OccurrenceStatus, new_idempotency_key
from tests.concurrency import run_together
from tests.conftest import drain_queue
from tests.factories import JobFactory


@pytest.mark.postgres
@pytest.mark.rabbitmq
@pytest.mark.django_db(transaction=True)
def test_two_scans_at_once_deliver_every_occurrence_exactly_once(queue_name: str) -> None:
    job = JobFactory(target=queue_name)
    due = timezone.now() - dt.timedelta(seconds=1)
    Occurrence.objects.bulk_create(
        Occurrence(job=job, fire_at=due, next_attempt_at=due, idempotency_key=new_idempotency_key())
        for _ in range(2000)
    )

    def scan(_: int) -> int:
        delivered = 0
        while (result := occurrences_dispatch_batch(batch_size=100)).claimed:
            delivered += result.delivered
        return delivered

    delivered = run_together(scan)

    assert delivered[0] > 0 and delivered[1] > 0
    assert sum(delivered) == 2000
    assert Occurrence.objects.filter(status=OccurrenceStatus.DELIVERED, attempts=1).count() == 2000
    messages = drain_queue(queue_name, expect=2000)
    ids = [m.properties["message_id"] for m in messages]
    assert len(ids) == 2000
    assert len(set(ids)) == 2000
