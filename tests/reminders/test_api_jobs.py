"""The jobs API: seed 000's shape, upsert by key, strict validation, and owners' scoping."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from reminders.models import Job, Occurrence, OccurrenceStatus
from tests.factories import JobFactory, OccurrenceFactory, UserFactory

pytestmark = pytest.mark.django_db


def _iso(instant: dt.datetime) -> str:
    return instant.isoformat().replace("+00:00", "Z")


def _body(**overrides: Any) -> dict[str, Any]:
    soon = timezone.now() + dt.timedelta(hours=1)
    body: dict[str, Any] = {
        "key": "training-invitations-1",
        "schedules": [_iso(soon), _iso(soon + dt.timedelta(days=1))],
        "callback": {"type": "rabbitmq", "data": {"queue": "training.invitations", "payload": {"id": "1"}}},
    }
    body.update(overrides)
    return body


def test_it_creates_a_job_with_one_occurrence_per_instant(api: APIClient) -> None:
    response = api.post("/api/jobs/", _body(priority=7), format="json")

    assert response.status_code == 201, response.content
    data = response.json()
    assert data["key"] == "training-invitations-1"
    assert data["priority"] == 7
    assert data["callback"] == {
        "type": "rabbitmq",
        "data": {"queue": "training.invitations", "payload": {"id": "1"}},
    }
    assert [o["status"] for o in data["occurrences"]] == ["scheduled", "scheduled"]
    assert Occurrence.objects.filter(priority=7).count() == 2


def test_posting_the_same_key_replaces_pending_occurrences_and_keeps_delivered_history(
    api: APIClient,
) -> None:
    now = timezone.now()
    kept, dropped, added = (now + dt.timedelta(hours=h) for h in (1, 2, 3))
    api.post("/api/jobs/", _body(schedules=[_iso(kept), _iso(dropped)]), format="json")
    job = Job.objects.get()
    history = OccurrenceFactory(
        job=job, fire_at=now - dt.timedelta(hours=1), status=OccurrenceStatus.DELIVERED
    )
    kept_key = job.occurrences.get(fire_at=kept).idempotency_key

    response = api.post("/api/jobs/", _body(schedules=[_iso(kept), _iso(added)]), format="json")

    assert response.status_code == 200, response.content
    assert response.json()["version"] == 2
    statuses = dict(job.occurrences.values_list("fire_at", "status"))
    assert statuses == {
        history.fire_at: "delivered",
        kept: "scheduled",
        dropped: "cancelled",
        added: "scheduled",
    }
    # The instant that stayed keeps its identity (and so its idempotency key).
    assert job.occurrences.get(fire_at=kept).idempotency_key == kept_key


def test_an_instant_already_delivered_is_not_scheduled_again(api: APIClient, user: Any) -> None:
    now = timezone.now()
    job = JobFactory(key="k1", owner=user)
    past = now - dt.timedelta(minutes=5)
    OccurrenceFactory(job=job, fire_at=past, status=OccurrenceStatus.DELIVERED)
    response = api.post("/api/jobs/", _body(key="k1", schedules=[_iso(past)]), format="json")
    assert response.status_code == 200
    assert list(job.occurrences.values_list("status", flat=True)) == ["delivered"]


def test_it_shows_each_occurrence_with_status_attempts_and_last_error(api: APIClient) -> None:
    api.post("/api/jobs/", _body(), format="json")
    occurrence = Occurrence.objects.order_by("fire_at").first()
    assert occurrence is not None
    Occurrence.objects.filter(pk=occurrence.pk).update(attempts=3, last_error="broker error: boom")

    data = api.get("/api/jobs/training-invitations-1/").json()

    first = data["occurrences"][0]
    assert first["attempts"] == 3
    assert first["last_error"] == "broker error: boom"
    assert set(first) >= {
        "id",
        "fire_at",
        "status",
        "attempts",
        "delivered_at",
        "last_error",
        "idempotency_key",
    }


def test_delete_cancels_what_has_not_fired_and_leaves_the_rest(api: APIClient) -> None:
    api.post("/api/jobs/", _body(), format="json")
    job = Job.objects.get()
    delivered = OccurrenceFactory(job=job, status=OccurrenceStatus.DELIVERED)

    response = api.delete("/api/jobs/training-invitations-1/")

    assert response.status_code == 200
    assert response.json() == {"key": "training-invitations-1", "cancelled": 2}
    assert job.occurrences.filter(status=OccurrenceStatus.CANCELLED).count() == 2
    delivered.refresh_from_db()
    assert delivered.status == OccurrenceStatus.DELIVERED


def test_occurrences_are_listed_by_status_and_job(api: APIClient, user: Any) -> None:
    api.post("/api/jobs/", _body(), format="json")
    api.post("/api/jobs/", _body(key="other-job"), format="json")
    Occurrence.objects.filter(job__key="other-job").update(status=OccurrenceStatus.CANCELLED)

    scheduled = api.get("/api/occurrences/", {"status": "scheduled"}).json()["results"]
    of_job = api.get("/api/occurrences/", {"job": "other-job"}).json()["results"]

    assert {o["job"] for o in scheduled} == {"training-invitations-1"}
    assert len(of_job) == 2
    assert {o["status"] for o in of_job} == {"cancelled"}


def test_an_unknown_status_filter_is_a_400() -> None:
    client = APIClient()
    client.force_authenticate(UserFactory(queues=["*"]))
    response = client.get("/api/occurrences/", {"status": "done"})
    assert response.status_code == 400
    assert "status" in response.json()


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"schedules": ["2030-12-24T14:00:00"]}, "schedules"),  # naive
        ({"schedules": ["next tuesday"]}, "schedules"),
        ({"schedules": [12345]}, "schedules"),
        ({"schedules": []}, "schedules"),
        ({"schedules": ["2001-01-01T00:00:00Z"]}, "schedules"),  # far in the past
        ({"key": ""}, "key"),
        ({"key": "has spaces"}, "key"),
        ({"key": "x" * 201}, "key"),
        ({"priority": 10}, "priority"),
        ({"priority": -1}, "priority"),
        ({"callback": {"type": "sms", "data": {}}}, "callback"),
        ({"callback": {"type": "rabbitmq", "data": {"payload": {}}}}, "callback"),  # no queue
        ({"callback": {"type": "rabbitmq", "data": {"queue": "amq.direct", "payload": {}}}}, "callback"),
        ({"callback": {"type": "http", "data": {"payload": {}}}}, "callback"),  # no url
        ({"callback": {"type": "http", "data": {"url": "http://127.0.0.1/hook", "payload": {}}}}, "callback"),
        ({"callback": {"type": "http", "data": {"url": "ftp://example.com/x", "payload": {}}}}, "callback"),
        ({"callback": {"type": "handler", "data": {"name": "os.system"}}}, "callback"),
        (
            {"callback": {"type": "rabbitmq", "data": {"queue": "q", "payload": {"x": "y" * 70000}}}},
            "callback",
        ),
        ({"callback": "rabbitmq"}, "callback"),
    ],
)
def test_bad_input_is_a_400_naming_the_field_and_stores_nothing(
    api: APIClient, overrides: dict[str, Any], field: str
) -> None:
    response = api.post("/api/jobs/", _body(**overrides), format="json")

    assert response.status_code == 400, response.content
    assert field in response.json(), response.json()
    assert Job.objects.count() == 0
    assert Occurrence.objects.count() == 0


@pytest.mark.parametrize("key", [" padded", "padded ", "\tpadded", "padded\n", "\npadded", "pad\nded"])
def test_a_key_with_whitespace_is_refused_not_trimmed(api: APIClient, key: str) -> None:
    """Issue 18: " padded" was stored as "padded" with a 201, so a GET of the key sent was a 404."""
    response = api.post("/api/jobs/", _body(key=key), format="json")
    assert response.status_code == 400, response.content
    assert "key" in response.json(), response.json()
    bulk = api.post("/api/jobs/bulk/", {"jobs": [_body(key=key)]}, format="json")
    assert bulk.status_code == 400, bulk.content
    assert "key" in bulk.json()["jobs"]["0"], bulk.json()
    assert not Job.objects.exists()


def test_more_than_the_maximum_instants_is_a_400(api: APIClient, settings: Any) -> None:
    settings.REMINDERS_MAX_SCHEDULES = 3
    soon = timezone.now() + dt.timedelta(hours=1)
    response = api.post(
        "/api/jobs/", _body(schedules=[_iso(soon + dt.timedelta(minutes=i)) for i in range(4)]), format="json"
    )
    assert response.status_code == 400
    assert "at most 3" in str(response.json()["schedules"])
    assert Job.objects.count() == 0


def test_a_naive_instant_names_its_position(api: APIClient) -> None:
    good = _iso(timezone.now() + dt.timedelta(hours=1))
    response = api.post("/api/jobs/", _body(schedules=[good, "2030-01-01T10:00:00"]), format="json")
    assert response.json()["schedules"] == {
        "1": ["'2030-01-01T10:00:00' has no time zone; add Z or an offset such as +01:00."]
    }


def test_a_recent_past_instant_is_accepted_and_due_at_once(api: APIClient) -> None:
    recent = timezone.now() - dt.timedelta(minutes=10)
    response = api.post("/api/jobs/", _body(schedules=[_iso(recent)]), format="json")
    assert response.status_code == 201
    assert Occurrence.objects.get().next_attempt_at == recent.replace(microsecond=recent.microsecond)


def test_offsets_other_than_utc_are_stored_as_the_same_instant(api: APIClient) -> None:
    response = api.post("/api/jobs/", _body(schedules=["2030-03-30T10:00:00+02:00"]), format="json")
    assert response.status_code == 201
    assert Occurrence.objects.get().fire_at == dt.datetime(2030, 3, 30, 8, 0, tzinfo=dt.UTC)


def test_anonymous_callers_get_401() -> None:
    assert APIClient().get("/api/jobs/").status_code == 401
    assert APIClient().post("/api/jobs/", _body(), format="json").status_code == 401


def test_another_owners_job_is_404_to_read_and_delete_and_403_to_replace(api: APIClient) -> None:
    other = APIClient()
    other.force_authenticate(UserFactory(queues=["*"]))
    other.post("/api/jobs/", _body(key="theirs"), format="json")

    assert api.get("/api/jobs/theirs/").status_code == 404
    assert api.delete("/api/jobs/theirs/").status_code == 404
    assert api.get("/api/jobs/").json()["results"] == []
    assert api.get("/api/occurrences/").json()["results"] == []
    response = api.post("/api/jobs/", _body(key="theirs"), format="json")
    assert response.status_code == 403
    assert Job.objects.get(key="theirs").version == 1
    assert not Occurrence.objects.filter(status=OccurrenceStatus.CANCELLED).exists()


def test_staff_see_every_job() -> None:
    owner = APIClient()
    owner.force_authenticate(UserFactory(queues=["*"]))
    owner.post("/api/jobs/", _body(key="someones"), format="json")
    staff = APIClient()
    staff.force_authenticate(UserFactory(is_staff=True, queues=["*"]))
    assert staff.get("/api/jobs/someones/").status_code == 200
    assert [j["key"] for j in staff.get("/api/jobs/").json()["results"]] == ["someones"]


def test_the_openapi_schema_is_served_and_documents_the_jobs_api(api: APIClient) -> None:
    response = api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    paths = response.json()["paths"]
    assert {"/api/jobs/", "/api/jobs/{key}/", "/api/occurrences/"} <= set(paths)
    assert api.get("/api/docs/").status_code == 200


def test_the_schema_generates_without_warnings() -> None:
    from django.core.management import call_command

    call_command("spectacular", "--validate", "--fail-on-warn", "--file", "/dev/null")
