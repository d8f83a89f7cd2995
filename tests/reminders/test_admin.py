from __future__ import annotations

import pytest
from django.test import Client

from reminders.models import Occurrence, OccurrenceStatus
from tests.factories import OccurrenceFactory

pytestmark = pytest.mark.django_db


def test_the_changelists_filter_by_status_and_show_the_last_error(operator: Client) -> None:
    OccurrenceFactory(status=OccurrenceStatus.FAILED, last_error="HTTP 500: upstream exploded")
    OccurrenceFactory(job__key="searchable-key")
    response = operator.get("/admin/reminders/occurrence/", {"status__exact": "failed"})
    assert response.status_code == 200
    assert b"HTTP 500: upstream exploded" in response.content
    jobs = operator.get("/admin/reminders/job/", {"q": "searchable"})
    assert b"searchable-key" in jobs.content


def test_retry_now_makes_a_failed_occurrence_due_and_cancel_cancels_pending(operator: Client) -> None:
    failed = OccurrenceFactory(status=OccurrenceStatus.FAILED, last_error="boom")
    pending = OccurrenceFactory()
    delivered = OccurrenceFactory(status=OccurrenceStatus.DELIVERED)

    operator.post(
        "/admin/reminders/occurrence/", {"action": "retry_now", "_selected_action": [failed.pk, delivered.pk]}
    )
    operator.post(
        "/admin/reminders/occurrence/", {"action": "cancel", "_selected_action": [pending.pk, delivered.pk]}
    )

    statuses = dict(Occurrence.objects.values_list("pk", "status"))
    assert statuses == {failed.pk: "scheduled", pending.pk: "cancelled", delivered.pk: "delivered"}


def test_occurrence_detail_is_read_only(operator: Client) -> None:
    occurrence = OccurrenceFactory()
    response = operator.get(f"/admin/reminders/occurrence/{occurrence.pk}/change/")
    assert response.status_code == 200
    assert b'name="status"' not in response.content
