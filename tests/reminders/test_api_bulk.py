"""Bulk scheduling: many jobs in one request, all or nothing."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from reminders.models import Job, Occurrence, OccurrenceStatus
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def _job(key: str, hours: list[int]) -> dict[str, Any]:
    base = timezone.now() + dt.timedelta(minutes=30)
    return {
        "key": key,
        "schedules": [(base + dt.timedelta(hours=h)).isoformat() for h in hours],
        "callback": {"type": "rabbitmq", "data": {"queue": "q", "payload": {"key": key}}},
    }


def test_it_creates_new_jobs_and_replaces_existing_ones_in_one_request(api: APIClient) -> None:
    api.post("/api/jobs/", _job("existing", [1, 2]), format="json")

    jobs = [_job(f"new-{i}", [1, 2, 3]) for i in range(50)] + [_job("existing", [5])]
    response = api.post("/api/jobs/bulk/", {"jobs": jobs}, format="json")

    assert response.status_code == 200, response.content
    assert response.json() == {"created": 50, "replaced": 1, "instants": 151}
    assert Occurrence.objects.filter(status=OccurrenceStatus.SCHEDULED).count() == 151
    assert Occurrence.objects.filter(job__key="existing", status=OccurrenceStatus.CANCELLED).count() == 2
    new = Job.objects.get(key="new-7")
    assert new.payload == {"key": "new-7"}
    assert new.occurrences.count() == 3
    assert len(set(Occurrence.objects.values_list("idempotency_key", flat=True))) == 153


def test_one_bad_job_stores_nothing_and_names_its_index(api: APIClient) -> None:
    bad = _job("bad", [1])
    bad["schedules"] = ["2030-01-01T10:00:00"]
    response = api.post("/api/jobs/bulk/", {"jobs": [_job("good", [1]), bad]}, format="json")
    assert response.status_code == 400
    assert "schedules" in response.json()["jobs"]["1"]
    assert Job.objects.count() == 0 and Occurrence.objects.count() == 0


def test_duplicate_keys_and_oversized_requests_are_refused(api: APIClient, settings: Any) -> None:
    response = api.post("/api/jobs/bulk/", {"jobs": [_job("same", [1]), _job("same", [2])]}, format="json")
    assert response.status_code == 400
    assert "same" in str(response.json()["jobs"])
    settings.REMINDERS_MAX_BULK_INSTANTS = 3
    response = api.post("/api/jobs/bulk/", {"jobs": [_job("a", [1, 2]), _job("b", [1, 2])]}, format="json")
    assert response.status_code == 400
    assert "at most 3 instants" in str(response.json()["jobs"])
    assert Job.objects.count() == 0


def test_a_key_owned_by_someone_else_rolls_the_whole_request_back(api: APIClient) -> None:
    other = APIClient()
    other.force_authenticate(UserFactory(queues=["*"]))
    other.post("/api/jobs/", _job("theirs", [1]), format="json")

    response = api.post("/api/jobs/bulk/", {"jobs": [_job("mine", [1]), _job("theirs", [2])]}, format="json")

    assert response.status_code == 403
    assert not Job.objects.filter(key="mine").exists()
    assert Occurrence.objects.count() == 1
