"""Hypothesis fuzzing of recurring schedules (POST/PATCH /api/schedules/, then its preview): near-valid
bodies whose expression, zone and start/end come from the edges (odd DST zones, years 1 and 9999, @at
far away). Whatever arrives, the API answers 2xx or 4xx, a 4xx stores nothing and names the field, and a
schedule that was stored can always be previewed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from reminders.http.schedule_serializers import ScheduleInputSerializer
from reminders.models import Job, Occurrence, Schedule
from tests.security.strategies import callbacks, instants, json_values, nasty_text

pytestmark = pytest.mark.django_db

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
FIELDS = set(ScheduleInputSerializer().fields)  # what a 400 may name, besides detail/non_field_errors
ZONES = [
    "UTC",
    "Europe/Paris",
    "Pacific/Chatham",
    "Australia/Lord_Howe",
    "America/Havana",
    "Pacific/Kiritimati",  # +14:00: the first zone into year 10000
    "Etc/GMT+12",  # -12:00: the last one out of year 1
]
valid_crontabs = st.builds(
    lambda *fields: " ".join(fields),
    st.sampled_from(["*", "*/15", "0", "45", "0-59/7"]),
    st.sampled_from(["*", "2", "3", "*/2", "23"]),
    st.sampled_from(["*", "1", "29", "31", "L"]),
    st.sampled_from(["*", "2", "*/3"]),
    st.sampled_from(["*", "0", "1-5", "7"]),
)
valid_expressions = st.one_of(
    valid_crontabs,
    st.sampled_from(["@hourly", "@daily", "@weekly", "@monthly", "@yearly"]),
    st.integers(min_value=10, max_value=366 * 86400).map(lambda s: f"@every {s}s"),
    # Unix seconds from now to the last second of year 9999 (the API refuses those long past).
    st.integers(min_value=1_800_000_000, max_value=253_402_300_799).map(lambda s: f"@at {s}"),
)
valid_bodies = st.fixed_dictionaries(
    {
        "key": st.just("fuzz"),
        "expression": valid_expressions,
        "timezone": st.sampled_from(ZONES),
        "callback": st.just({"type": "rabbitmq", "data": {"queue": "q.fuzz", "payload": {}}}),
    },
    optional={
        "start_at": st.none() | instants,
        "end_at": st.none() | instants,
        "misfire_policy": st.sampled_from(["fire_once", "skip"]),
        "paused": st.booleans(),
    },
)
# What replaces one field of a valid body, or makes up a PATCH.
wrong = {
    "expression": st.one_of(
        st.sampled_from(["61 * * * *", "* 24 * * *", "0 0 30 2 *", "@reboot", "@every 9s", "@at -1", ""]),
        nasty_text,
        json_values,
    ),
    "timezone": st.sampled_from(["Mars/Olympus", "/etc/passwd", "localtime", ""]) | nasty_text,
    "callback": callbacks,
    "start_at": instants,
    "end_at": instants,
    "misfire_policy": nasty_text,
    "batch_size": st.integers(min_value=-1, max_value=10**6) | json_values,
    "paused": json_values,
}


@st.composite
def near_valid_bodies(draw: st.DrawFn) -> dict[str, Any]:
    """A valid schedule, or one with a single field made wrong (or odd, since `instants` has both)."""
    body = draw(valid_bodies)
    if draw(st.booleans()):
        name = draw(st.sampled_from(sorted(wrong)))
        body[name] = draw(wrong[name])
    return body


changes = st.fixed_dictionaries(
    {}, optional={"expression": valid_expressions | wrong["expression"], **{k: v for k, v in wrong.items()}}
)


def _snapshot() -> tuple[Any, ...]:
    return (
        tuple(Schedule.objects.order_by("id").values_list("id", "expression", "timezone", "next_fire_at")),
        tuple(Job.objects.order_by("id").values_list("id", "key", "version")),
        tuple(Occurrence.objects.order_by("id").values_list("id", "status", "fire_at")),
    )


def _send(api: APIClient, method: str, path: str, body: dict[str, Any]) -> int:
    """Send `body`; a 4xx must name known fields and leave the tables as they were."""
    before = _snapshot()
    raw = json.dumps(body).encode("utf-8", "surrogatepass")
    response = api.generic(method, path, raw, content_type="application/json")
    assert response.status_code in (200, 201, 400), (response.status_code, body)
    if response.status_code == 400:
        assert _snapshot() == before, f"a 400 stored something: {body}"
        errors = response.json()
        assert isinstance(errors, dict) and errors
        assert set(errors) <= FIELDS | {"detail", "non_field_errors"}, errors
    return int(response.status_code)


def _preview_works(api: APIClient) -> None:
    preview = api.get("/api/schedules/fuzz/preview/?count=3")
    assert preview.status_code == 200, preview.content[:300]
    assert len(preview.json()["fires"]) <= 3


@FUZZ
@given(body=near_valid_bodies(), patch=changes)
def test_it_answers_near_valid_schedules_with_2xx_or_a_4xx_and_previews_what_it_stored(
    api: APIClient, body: dict[str, Any], patch: dict[str, Any]
) -> None:
    created = _send(api, "POST", "/api/schedules/", body) != 400
    event(f"created: {created}")
    if created:
        _preview_works(api)
        event(f"patched: {_send(api, 'PATCH', '/api/schedules/fuzz/', patch) != 400}")
        _preview_works(api)
