"""Hypothesis fuzzing of the job payload parser (POST /api/jobs/): random JSON, near-valid jobs with random
parts, and raw bytes. Whatever arrives, the view answers 2xx or 4xx (never an exception), a 4xx names
what was wrong, and a 4xx stores nothing.
"""

from __future__ import annotations

import json
import string
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from reminders.models import Job, Occurrence

pytestmark = pytest.mark.django_db

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
FIELDS = {"key", "schedules", "callback", "priority", "deadline_seconds"}

# Strings that have broken parsers and databases before: NUL, lone surrogates, huge numbers, RTL marks.
nasty_text = st.one_of(
    st.text(max_size=20),
    st.sampled_from(["", "\x00", "a\x00b", "\ud800", "\u202e", "1e999", "-0", "null", "💥" * 3, " " * 3]),
)
# A URL carries UTF-8: a string with a lone surrogate cannot even be put into one.
url_text = nasty_text.filter(lambda s: not any(0xD800 <= ord(c) <= 0xDFFF for c in s))
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | nasty_text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(nasty_text, children, max_size=4),
    max_leaves=15,
)
offsets = st.integers(min_value=-(23 * 60 + 59), max_value=23 * 60 + 59).map(lambda m: timedelta(minutes=m))
instants = st.one_of(
    # Near now (valid), far past and far future, at any offset, including the edges of year 1 and 9999.
    st.integers(min_value=-86400 * 2, max_value=86400 * 400).map(
        lambda s: (timezone.now() + timedelta(seconds=s)).isoformat()
    ),
    st.builds(
        lambda dt, off: dt.replace(tzinfo=__import__("datetime").timezone(off)).isoformat(),
        st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)),
        offsets,
    ),
    st.sampled_from(["9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59", "2030-01-01T00:00:00"]),
    nasty_text,
    json_values,
)
keys = st.one_of(st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._:@-]{0,30}\Z"), nasty_text, json_values)
targets = st.one_of(
    st.from_regex(r"\Aq\.[a-z]{1,8}\Z"),
    st.sampled_from(
        ["amq.x", "a" * 256, "http://hooks.example.com/x", "http://127.0.0.1/", "file:///etc/passwd"]
    ),
    nasty_text,
    json_values,
)
callbacks = st.one_of(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["rabbitmq", "http", "handler"]) | nasty_text},
        optional={
            "data": st.one_of(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "queue": targets,
                        "url": targets,
                        "name": targets,
                        "payload": json_values,
                        "secret": nasty_text,
                    },
                ),
                json_values,
            )
        },
    ),
    json_values,
)
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


def _post_and_check(client: APIClient, body: bytes) -> None:
    before = _snapshot()
    response = client.generic("POST", "/api/jobs/", body, content_type="application/json")
    assert response.status_code in (200, 201, 400, 403), (response.status_code, body[:300])
    if response.status_code >= 400:
        assert _snapshot() == before, f"a {response.status_code} stored something: {body[:300]!r}"
        errors = response.json()
        assert isinstance(errors, dict) and errors
        assert set(errors) <= FIELDS | {"detail", "non_field_errors"}, errors
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
