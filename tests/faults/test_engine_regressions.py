"""Engine bugs the fault suite found, each pinned by the smallest test that fails without its fix."""

from __future__ import annotations

import pytest

from reminders.dispatch import occurrences_dispatch_batch
from reminders.models import Occurrence, OccurrenceStatus
from tests.conftest import drain_queue
from tests.factories import JobFactory, OccurrenceFactory

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.rabbitmq]


def test_it_delivers_with_the_shortest_allowed_lease(settings: pytest.FixtureRequest, queue_name: str) -> None:
    """REMINDERS_LEASE_SECONDS=5 is allowed; the scan used to release every claim untried because its
    fixed 5 s safety margin swallowed the whole lease, so nothing was ever delivered."""
    settings.REMINDERS_LEASE_SECONDS = 5  # type: ignore[attr-defined]
    job = JobFactory(target=queue_name)
    OccurrenceFactory.create_batch(3, job=job)

    result = occurrences_dispatch_batch()

    assert result.delivered == 3
    assert result.released == 0
    assert set(Occurrence.objects.values_list("status", flat=True)) == {OccurrenceStatus.DELIVERED}
    assert len(drain_queue(queue_name, expect=3)) == 3
