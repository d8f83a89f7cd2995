"""Two workers finishing occurrences of the same fire point at once materialise the next point once."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from django.db import connection

from reminders.engine.claiming import occurrences_claim_due, occurrences_mark_delivered
from reminders.models import Occurrence, OccurrenceStatus
from tests.factories import schedule_create


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_marks_of_one_fire_point_materialise_the_next_point_once() -> None:
    schedule = schedule_create(key="race", expression="@every 1h", batch_size=8)
    head = schedule.next_fire_at
    assert head is not None
    claim = occurrences_claim_due(now=head, limit=100, lease_seconds=60)
    assert len(claim.occurrences) == 8
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def finish(occurrence_id: int) -> None:
        try:
            barrier.wait(timeout=10)
            occurrences_mark_delivered(token=claim.token, ids=[occurrence_id], now=head)
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=finish, args=(o.id,)) for o in claim.occurrences]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == []
    pending = Occurrence.objects.filter(job=schedule.job, status=OccurrenceStatus.SCHEDULED)
    assert sorted(pending.values_list("batch_index", flat=True)) == list(range(8))
    assert {o.fire_at for o in pending} == {head + dt.timedelta(hours=1)}
    assert Occurrence.objects.filter(job=schedule.job, status=OccurrenceStatus.DELIVERED).count() == 8
