"""Input is refused, never silently changed: a queue name, URL or handler name with whitespace at its ends,
and a callback URL with a raw CR or LF (urlsplit drops them, so the stored URL was not the one used)."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from reminders.models import Job, Schedule

pytestmark = pytest.mark.django_db

JOB_INSTANT = "2030-12-24T14:00:00Z"


def _job(callback: dict[str, Any]) -> dict[str, Any]:
    return {"key": "silent-1", "schedules": [JOB_INSTANT], "callback": callback}


def _schedule(callback: dict[str, Any]) -> dict[str, Any]:
    return {"key": "silent-1", "expression": "@hourly", "callback": callback}


CALLBACKS = [
    ({"type": "rabbitmq", "data": {"queue": " q", "payload": {}}}, "queue"),
    ({"type": "rabbitmq", "data": {"queue": "q\n", "payload": {}}}, "queue"),
    ({"type": "http", "data": {"url": "https://hooks.example.com/a\r\nX-Injected: 1", "payload": {}}}, "url"),
    ({"type": "http", "data": {"url": "https://hooks.example.com/a\nb", "payload": {}}}, "url"),
    ({"type": "http", "data": {"url": "https://hooks.example.\rcom/", "payload": {}}}, "url"),
    ({"type": "http", "data": {"url": " https://hooks.example.com/", "payload": {}}}, "url"),
    ({"type": "http", "data": {"url": "https://hooks.example.com/a\tb", "payload": {}}}, "url"),
]


@pytest.mark.parametrize(("callback", "field"), CALLBACKS)
@pytest.mark.parametrize(("path", "body"), [("/api/jobs/", _job), ("/api/schedules/", _schedule)])
def test_it_refuses_a_target_it_would_otherwise_change(
    api: APIClient, path: str, body: Any, callback: dict[str, Any], field: str
) -> None:
    response = api.post(path, body(callback), format="json")

    assert response.status_code == 400, response.json()
    assert field in response.json()["callback"]["data"], response.json()
    assert not Job.objects.exists() and not Schedule.objects.exists()


def test_it_refuses_a_queue_with_spaces_in_bulk_under_its_index(api: APIClient) -> None:
    job = _job({"type": "rabbitmq", "data": {"queue": "q ", "payload": {}}})
    response = api.post("/api/jobs/bulk/", {"jobs": [job]}, format="json")

    assert response.status_code == 400
    assert "queue" in str(response.json()["jobs"])
    assert not Job.objects.exists()


def test_a_clean_queue_and_url_are_stored_as_sent(api: APIClient) -> None:
    assert (
        api.post(
            "/api/jobs/", _job({"type": "rabbitmq", "data": {"queue": "q", "payload": {}}}), format="json"
        ).status_code
        == 201
    )
    url = "https://hooks.example.com/a%0D%0Ab?x=1"
    response = api.post(
        "/api/jobs/",
        {**_job({"type": "http", "data": {"url": url, "payload": {}}}), "key": "silent-2"},
        format="json",
    )
    assert response.status_code == 201, response.json()
    assert response.json()["callback"]["data"]["url"] == url
