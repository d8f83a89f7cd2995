"""Engine bugs the fault suite found, each pinned by the smallest test that fails without its fix."""

from __future__ import annotations

import pytest

from reminders.engine.dispatch import occurrences_dispatch_batch
from reminders.models import Occurrence, OccurrenceStatus
from tests.conftest import drain_queue
from tests.factories import JobFactory, OccurrenceFactory

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.rabbitmq]


def test_it_delivers_with_the_shortest_allowed_lease(
    settings: pytest.FixtureRequest, queue_name: str
) -> None:
    """REMINDERS_LEASE_SECONDS=5 is allowed; the scan used to release every claim untried because its
    fixed 5 s safety margin swallowed the whole lease, so nothing was ever delivered."""
    settings.REMINDERS_LEASE_SECONDS = 5
    job = JobFactory(target=queue_name)
    OccurrenceFactory.create_batch(3, job=job)

    result = occurrences_dispatch_batch()

    assert result.delivered == 3
    assert result.released == 0
    assert set(Occurrence.objects.values_list("status", flat=True)) == {OccurrenceStatus.DELIVERED}
    assert len(drain_queue(queue_name, expect=3)) == 3


def test_it_sends_the_occurrence_headers_with_each_amqp_message(queue_name: str) -> None:
    """py-amqp's Message takes `application_headers`; a `headers=` keyword was silently dropped, so
    consumers never saw job_key, fire_at or attempt."""
    job = JobFactory(key="headers-job", target=queue_name)
    occurrence = OccurrenceFactory(job=job)

    assert occurrences_dispatch_batch().delivered == 1

    (message,) = drain_queue(queue_name, expect=1)
    assert message.properties["message_id"] == occurrence.idempotency_key
    assert message.properties["application_headers"] == {
        "job_key": "headers-job",
        "fire_at": occurrence.fire_at.isoformat(),
        "attempt": 1,
    }
