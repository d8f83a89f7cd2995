"""Schemathesis against the project's own OpenAPI schema, in-process through the WSGI app, authenticated.

Generated requests (valid ones and deliberately malformed ones) must never get a 5xx; every documented
response must match the schema; malformed input must be refused with a 4xx.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.utils import timezone
from hypothesis import HealthCheck, Phase, settings
from rest_framework.authtoken.models import Token
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
)

from config.wsgi import application
from reminders.models import CallbackType, OccurrenceStatus
from tests.factories import JobFactory, OccurrenceFactory, UserFactory

pytestmark = pytest.mark.django_db


# Loaded at collection: the schema view needs no database. (The lazy `from_fixture` loader does not run
# under pytest 9 with this schemathesis release.)
schema = schemathesis.openapi.from_wsgi("/api/schema/", application)


@pytest.fixture(autouse=True)
def _keep_the_test_connection() -> Iterator[None]:
    """The raw WSGI app closes the database connection after each request, which would end the test's
    transaction; Django's own test client disconnects the same handlers."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def token() -> str:
    """Made once per operation, not per example: hashing the user's password dominates otherwise."""
    return Token.objects.create(user=UserFactory(queues=["*"])).key


CHECKS = [not_a_server_error, response_schema_conformance, content_type_conformance]
# Malformed bodies must be refused. Malformed query strings are not held to it: DRF's paginators read a
# bad `page`/`page_size` as the default, by design, and that is harmless.
BODY_CHECKS = [*CHECKS, negative_data_rejection]
# Random requests per operation, on top of the explicit phase (the schema's examples and schemathesis's
# coverage cases: each boundary, missing and wrongly typed field, about 80 requests per operation, the same
# every run), which takes most of this test's time: 30 instead of 60 random ones saved only 8% of it
# (416 s vs 453 s side by side on this loaded machine), so the default stays 60. SCHEMATHESIS_EXAMPLES=300
# digs deeper on demand.
FORM_MEDIA_TYPES = ("multipart/form-data", "application/x-www-form-urlencoded")
RANDOM_EXAMPLES = int(os.environ.get("SCHEMATHESIS_EXAMPLES", "60"))


@schema.parametrize()
@settings(
    max_examples=RANDOM_EXAMPLES,
    phases=[Phase.explicit, Phase.generate],
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
    ],
)
def test_it_answers_every_generated_request_as_documented(case: Any, token: str) -> None:
    checks = BODY_CHECKS if case.method in ("POST", "PUT", "PATCH") else CHECKS
    if case.media_type in FORM_MEDIA_TYPES:
        # A form has no types and no null: DRF reads an empty value of a nullable field as null, so a
        # "wrongly typed" `window_seconds=` is a valid form. Forms are still held to no 5xx and the schema.
        checks = CHECKS
    case.call_and_validate(headers={"Authorization": f"Token {token}"}, checks=checks)


def test_it_documents_real_responses_with_data_in_every_state(token: str) -> None:
    """Random keys and ids mostly miss, so the documented 200 shapes are also checked on a populated job:
    occurrences in every status, with errors, and an HTTP callback (whose secret must never come back)."""
    owner = Token.objects.get(key=token).user
    job = JobFactory(
        key="documented", owner=owner, callback_type=CallbackType.HTTP, target="http://hooks.example.com/x"
    )
    job.http_secret = "never-shown"
    job.save()
    now = timezone.now()
    for status in OccurrenceStatus.values:
        OccurrenceFactory(
            job=job,
            status=status,
            fire_at=now - timedelta(minutes=len(status)),
            attempts=2,
            last_error="HTTP 500: down" if status == OccurrenceStatus.FAILED else "",
            delivered_at=now if status == OccurrenceStatus.DELIVERED else None,
            lease_token=uuid.uuid4() if status == OccurrenceStatus.CLAIMED else None,
            claimed_until=now + timedelta(seconds=60) if status == OccurrenceStatus.CLAIMED else None,
        )
    occurrence_id = job.occurrences.first().pk
    headers = {"Authorization": f"Token {token}"}
    calls = [
        ("/api/jobs/", "GET", {}),
        ("/api/jobs/{key}/", "GET", {"key": "documented"}),
        ("/api/occurrences/", "GET", {}),
        ("/api/occurrences/{id}/", "GET", {"id": occurrence_id}),
        ("/api/jobs/{key}/", "DELETE", {"key": "documented"}),
    ]
    for path, method, parameters in calls:
        case = schema[path][method].Case(path_parameters=parameters)
        response = case.call_and_validate(headers=headers, checks=CHECKS)
        assert response.status_code == 200, (path, response.text[:300])
        assert "never-shown" not in response.text
    body = {
        "key": "documented",
        "schedules": [(now + timedelta(hours=1)).isoformat()],
        "callback": {
            "type": "http",
            "data": {"url": "http://hooks.example.com/y", "payload": {"a": [1, None]}},
        },
        "priority": 9,
        "deadline_seconds": 60,
    }
    response = (
        schema["/api/jobs/"]["POST"]
        .Case(body=body, media_type="application/json")
        .call_and_validate(headers=headers, checks=CHECKS)
    )
    assert response.status_code == 200 and "never-shown" not in response.text
