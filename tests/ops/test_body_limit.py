"""One request body limit, answered with a JSON 413 on the API, and high enough for the documented bulk
maximum (200,000 instants in one call)."""

from __future__ import annotations

import datetime as dt
import json
import time

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from reminders.models import Occurrence

pytestmark = [pytest.mark.django_db]


def _bulk_body(jobs: int, instants_per_job: int, queue: str = "test.reminders.bulk") -> bytes:
    start = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    body = {
        "jobs": [
            {
                "key": f"bulk-{j}",
                "schedules": [
                    (start + dt.timedelta(minutes=j * instants_per_job + i)).strftime("%Y-%m-%dT%H:%M:%SZ")
                    for i in range(instants_per_job)
                ],
                "callback": {"type": "rabbitmq", "data": {"queue": queue, "payload": {"n": j}}},
            }
            for j in range(jobs)
        ]
    }
    return json.dumps(body).encode()


def _padded(size: int) -> bytes:
    """A valid job body of exactly `size` bytes (the payload string takes the slack)."""
    body = {
        "key": "padded",
        "schedules": ["2030-01-01T00:00:00Z"],
        "callback": {"type": "rabbitmq", "data": {"queue": "test.reminders.padded", "payload": {"pad": ""}}},
    }
    bare = len(json.dumps(body).encode())
    body["callback"]["data"]["payload"]["pad"] = "x" * (size - bare)
    encoded = json.dumps(body).encode()
    assert len(encoded) == size
    return encoded


def test_a_body_at_the_limit_is_read_and_one_byte_more_gets_a_json_413(
    api: APIClient, settings: pytest.FixtureRequest
) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 20_000
    settings.REMINDERS_MAX_PAYLOAD_BYTES = 65536

    at_limit = api.post("/api/jobs/", _padded(20_000), content_type="application/json")
    over = api.post("/api/jobs/", _padded(20_001), content_type="application/json")

    assert at_limit.status_code == 201, at_limit.content[:300]
    assert over.status_code == 413
    assert over["Content-Type"] == "application/json"
    assert over.json() == {"detail": "20,001 bytes is over the limit of 20,000 bytes", "limit_bytes": 20_000}
    assert Occurrence.objects.count() == 1  # the refused one stored nothing


def test_a_5_mb_body_gets_json_not_an_html_page(api: APIClient) -> None:
    body = b'{"jobs": [' + b" " * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1) + b"]}"
    response = api.post("/api/jobs/bulk/", body, content_type="application/json")
    assert response.status_code == 413
    assert response.json()["limit_bytes"] == settings.DATA_UPLOAD_MAX_MEMORY_SIZE


@pytest.mark.postgres
def test_the_documented_bulk_maximum_of_200000_instants_fits_in_one_call(api: APIClient) -> None:
    body = _bulk_body(jobs=200, instants_per_job=1000)
    assert len(body) > 2.5 * 1024 * 1024  # over Django's default limit, which refused it before
    assert len(body) <= settings.DATA_UPLOAD_MAX_MEMORY_SIZE

    started = time.monotonic()
    response = api.post("/api/jobs/bulk/", body, content_type="application/json")

    assert response.status_code == 200, response.content[:500]
    assert response.json() == {"created": 200, "replaced": 0, "instants": 200_000}
    assert Occurrence.objects.count() == 200_000
    print(f"200,000 instants, {len(body):,} bytes: {time.monotonic() - started:.1f} s")
