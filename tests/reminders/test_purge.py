from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from reminders.engine.occurrences import occurrences_purge_old
from reminders.models import Occurrence, OccurrenceStatus
from tests.factories import OccurrenceFactory

pytestmark = pytest.mark.django_db


def test_it_purges_finished_occurrences_past_retention_in_batches_and_keeps_the_rest(settings: Any) -> None:
    settings.REMINDERS_RETENTION_DAYS = 7
    settings.REMINDERS_PURGE_BATCH = 2
    old = timezone.now() - dt.timedelta(days=8)
    recent = timezone.now() - dt.timedelta(days=1)
    for status in ("delivered", "cancelled", "skipped", "delivered", "delivered"):
        OccurrenceFactory(status=status, finished_at=old)
    kept = [
        OccurrenceFactory(status=OccurrenceStatus.DELIVERED, finished_at=recent),
        OccurrenceFactory(status=OccurrenceStatus.FAILED, finished_at=old),  # operators decide about failures
        OccurrenceFactory(status=OccurrenceStatus.SCHEDULED),
    ]

    assert occurrences_purge_old(max_batches=2) == 4  # bounded: two batches of two
    assert occurrences_purge_old() == 1
    assert sorted(Occurrence.objects.values_list("id", flat=True)) == sorted(o.id for o in kept)
