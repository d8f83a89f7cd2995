"""Hypothesis fuzzing of the job payload parser (POST /api/jobs/): random JSON, near-valid jobs with random
parts, and raw bytes. Whatever arrives, the view answers 2xx or 4xx (never an exception), a 4xx names
what was wrong, and a 4xx stores nothing.
"""

from __future__ import annotations

import json
import string
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from reminders.http.serializers import JobInputSerializer
from reminders.models import Job, Occurrence
from tests.security.strategies import callbacks, instants, json_values, keys, url_text

pytestmark = pytest.mark.django_db

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
FIELDS = set(JobInputSerializer().fields)  # what a 400 may name, besides detail/non_field_errors

near_valid_jobs = st.fixed_dictionaries(
    {},
    optional={
        "key": keys,
        "schedules": st.lists(instants, max_size=5) | json_values,
        "callback": callbacks,
        "priority": st.integers(min_value=-3, max_value=12) | json_values,
        "deadline_seconds": st.integers(min_value=-3, max_value=10**12) | json_values,
    },
)


@pytest.fixture
def client(api: APIClient) -> APIClient:
    return api


def _snapshot() -> tuple[Any, ...]:
    return (
        tuple(Job.objects.order_by("id").values_list("id", "key", "version", "target")),
        tuple(Occurrence.objects.order_by("id").values_list("id", "status", "fire_at")),
    )


def _unknown_keys_of(body: bytes) -> set[str]:
    """The top-level keys of a JSON object body that are no field of a job."""
    try:
        document = json.loads(body)
    except ValueError:
        return set()
    return set(document) - FIELDS if isinstance(document, dict) else set()


def _post_and_check(client: APIClient, body: bytes) -> None:
    before = _snapshot()
    response = client.generic("POST", "/api/jobs/", body, content_type="application/json")
    assert response.status_code in (200, 201, 400, 403), (response.status_code, body[:300])
    if response.status_code >= 400:
        assert _snapshot() == before, f"a {response.status_code} stored something: {body[:300]!r}"
        errors = response.json()
        assert isinstance(errors, dict) and errors
        named = set(errors) - _unknown_keys_of(body)  # a key of the body that is no field is named too
        assert named <= FIELDS | {"detail", "non_field_errors"}, errors
    else:
        key = response.json()["key"]
        assert Job.objects.filter(key=key).exists()


@FUZZ
@given(document=json_values)
def test_it_refuses_random_json_without_storing_anything(client: APIClient, document: Any) -> None:
    _post_and_check(client, json.dumps(document).encode())


@FUZZ
@given(job=near_valid_jobs)
def test_it_answers_near_valid_jobs_with_2xx_or_a_4xx_that_stores_nothing(
    client: APIClient, job: Any
) -> None:
    _post_and_check(client, json.dumps(job).encode("utf-8", "surrogatepass"))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=200) | st.text(alphabet=string.printable, max_size=200).map(str.encode))
def test_it_refuses_malformed_bodies(client: APIClient, raw: bytes) -> None:
    _post_and_check(client, raw)


@FUZZ
@given(
    params=st.dictionaries(st.sampled_from(["job", "status", "page_size", "cursor"]), url_text, max_size=4)
)
def test_it_answers_random_occurrence_filters_with_200_or_a_4xx(
    client: APIClient, params: dict[str, str]
) -> None:
    """The list's query string is parsed by hand; `?job=%00` was a 500 (PostgreSQL text cannot hold NUL)."""
    response = client.get("/api/occurrences/", params)
    assert response.status_code in (200, 400, 404), (response.status_code, params)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (
            '{"key":"k","schedules":["9999-12-31T23:59:59-23:59"],"callback":{"type":"rabbitmq","data":'
            '{"queue":"q","payload":{}}}}',
            "schedules",
        ),
        (
            '{"key":"k","schedules":["%(now)s"],"callback":{"type":"rabbitmq","data":'
            '{"queue":"q","payload":{"a":"x\\u0000y"}}}}',
            "callback",
        ),
        (
            '{"key":"k","schedules":["%(now)s"],"callback":{"type":"rabbitmq","data":'
            '{"queue":"q","payload":{"\\u0000":1}}}}',
            "callback",
        ),
        (
            '{"key":"k","schedules":["%(now)s"],"callback":{"type":"rabbitmq","data":'
            '{"queue":"q","payload":"\\ud800"}}}',
            "detail",
        ),
        (
            '{"key":"k","schedules":["%(now)s"],"callback":{"type":"http","data":'
            '{"url":"http://hooks.example.com/","secret":"\\udfff","payload":{}}}}',
            "detail",
        ),
        ("[" * 5000 + "]" * 5000, "detail"),
    ],
    ids=["year-10000-in-utc", "nul-in-string", "nul-in-key", "lone-surrogate", "surrogate-in-secret", "deep"],
)
def test_it_refuses_what_postgres_or_python_cannot_take_with_a_400(
    client: APIClient, body: str, field: str
) -> None:
    """Each of these was a 500 (DataError, OverflowError, RecursionError, UnicodeEncodeError) before."""
    raw = (body % {"now": datetime.now(UTC).isoformat()} if "%(now)s" in body else body).encode()
    before = _snapshot()
    response = client.generic("POST", "/api/jobs/", raw, content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    assert field in response.json()
    assert _snapshot() == before
