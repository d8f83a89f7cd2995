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
from django.test import override_settings
from django.utils import timezone
from hypothesis import HealthCheck, Phase, settings
from rest_framework.authtoken.models import Token
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
)

from config.wsgi import application
from reminders.models import CallbackType, OccurrenceStatus
from tests.factories import JobFactory, OccurrenceFactory, UserFactory
from tests.security.schemathesis_checks import TOKEN, excluded_checks, schema_authenticated, token_of_the_test

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("wsgi_keeps_the_test_connection")]


# Loaded at collection: the schema view needs no database. (The lazy `from_fixture` loader does not run
# under pytest 9 with this schemathesis release.)
# The per-address limit counts in the database, which collection may not touch: off while the schema loads
# (the middleware reads the setting per request; the tests' own requests are counted).
with override_settings(ADDRESS_LIMITED_PATHS=[]):
    schema = schemathesis.openapi.from_wsgi("/api/schema/", application)
schema_authenticated(schema)


@pytest.fixture
def token() -> Iterator[str]:
    """Made once per operation, not per example: hashing the user's password dominates otherwise."""
    TOKEN["key"] = Token.objects.create(user=UserFactory(queues=["*"])).key
    yield TOKEN["key"]
    TOKEN.clear()


# The populated job's answers (test_it_documents_real_responses_with_data_in_every_state).
CHECKS = [not_a_server_error, response_schema_conformance, content_type_conformance]

# Random requests per operation, on top of the explicit phase (the schema's examples and schemathesis's
# coverage cases: each boundary, missing and wrongly typed field, about 80 requests per operation, the same
# every run), which takes most of this test's time. The stateful run (test_schemathesis_stateful.py) follows
# the links between operations. SCHEMATHESIS_EXAMPLES=300 digs deeper on demand.
RANDOM_EXAMPLES = int(os.environ.get("SCHEMATHESIS_EXAMPLES", "20"))


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
    token_of_the_test(case).call_and_validate(excluded_checks=excluded_checks(case))


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
