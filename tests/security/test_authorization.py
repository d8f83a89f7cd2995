"""Who may do what with the reminders endpoints: anonymous callers nothing (401), a user only their own jobs
(someone else's is 404 to read or delete and 403 to overwrite), staff everything; the admin only for staff.

Each row of the matrix also checks that a refused call changed nothing.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from reminders.models import CallbackType, Job, Occurrence, OccurrenceStatus
from reminders.services import Callback, job_upsert
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def _job_body(key: str, queue: str = "q.authz") -> dict[str, Any]:
    return {
        "key": key,
        "schedules": [(timezone.now() + timedelta(hours=1)).isoformat()],
        "callback": {"type": "rabbitmq", "data": {"queue": queue, "payload": {"k": key}}},
    }


def _client(user: Any | None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


@pytest.fixture
def world() -> dict[str, Any]:
    """Users A and B with one job each, a staff operator, and a job the system made with no owner."""
    alice, bob = UserFactory(username="alice"), UserFactory(username="bob")
    staff = UserFactory(username="operator", is_staff=True)
    callback = Callback(type=CallbackType.RABBITMQ, target="q.authz", payload={})
    when = [timezone.now() + timedelta(hours=1)]
    jobs = {
        "alice": job_upsert(key="alice-job", schedules=when, callback=callback, owner=alice)[0],
        "bob": job_upsert(key="bob-job", schedules=when, callback=callback, owner=bob)[0],
        "system": job_upsert(key="system-job", schedules=when, callback=callback, owner=None)[0],
    }
    return {"alice": alice, "bob": bob, "staff": staff, "jobs": jobs}


def _state() -> tuple[Any, ...]:
    return (
        tuple(Job.objects.order_by("key").values_list("key", "owner_id", "version", "target", "payload")),
        tuple(Occurrence.objects.order_by("id").values_list("id", "status", "fire_at")),
    )


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/api/jobs/"),
        ("post", "/api/jobs/"),
        ("get", "/api/jobs/bob-job/"),
        ("delete", "/api/jobs/bob-job/"),
        ("get", "/api/occurrences/"),
        ("get", "/api/occurrences/{bob_occurrence}/"),
    ],
)
def test_it_refuses_anonymous_callers_with_401(world: dict[str, Any], method: str, path: str) -> None:
    before = _state()
    path = path.format(bob_occurrence=world["jobs"]["bob"].occurrences.get().pk)
    response = getattr(_client(None), method)(
        path, _job_body("anon-job") if method == "post" else None, format="json"
    )
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].startswith("Token")
    assert _state() == before


def test_it_hides_another_users_job_from_reading_with_404(world: dict[str, Any]) -> None:
    alice = _client(world["alice"])
    bob_occurrence = world["jobs"]["bob"].occurrences.get()

    assert alice.get("/api/jobs/bob-job/").status_code == 404
    assert alice.get(f"/api/occurrences/{bob_occurrence.pk}/").status_code == 404
    assert [job["key"] for job in alice.get("/api/jobs/").json()["results"]] == ["alice-job"]
    assert alice.get("/api/occurrences/", {"job": "bob-job"}).json()["results"] == []
    mine = alice.get("/api/occurrences/").json()["results"]
    assert {row["job"] for row in mine} == {"alice-job"}


def test_it_refuses_deleting_another_users_job_with_404(world: dict[str, Any]) -> None:
    before = _state()
    assert _client(world["alice"]).delete("/api/jobs/bob-job/").status_code == 404
    assert _state() == before
    assert world["jobs"]["bob"].occurrences.get().status == OccurrenceStatus.SCHEDULED


@pytest.mark.parametrize("key", ["bob-job", "system-job"])
def test_it_refuses_overwriting_a_job_the_caller_does_not_own_with_403(
    world: dict[str, Any], key: str
) -> None:
    """Upserting someone else's key, or a key the system created with no owner, must not take it over."""
    before = _state()
    response = _client(world["alice"]).post("/api/jobs/", _job_body(key, queue="q.stolen"), format="json")
    assert response.status_code == 403, response.content
    assert _state() == before


def test_it_lets_a_user_manage_their_own_job(world: dict[str, Any]) -> None:
    alice = _client(world["alice"])
    assert alice.get("/api/jobs/alice-job/").status_code == 200
    assert alice.post("/api/jobs/", _job_body("alice-job", queue="q.moved"), format="json").status_code == 200
    assert alice.post("/api/jobs/", _job_body("alice-new"), format="json").status_code == 201
    assert alice.delete("/api/jobs/alice-job/").json() == {"key": "alice-job", "cancelled": 1}


def test_it_shows_staff_every_job_and_lets_them_act_on_it(world: dict[str, Any]) -> None:
    staff = _client(world["staff"])
    keys = [job["key"] for job in staff.get("/api/jobs/").json()["results"]]
    assert keys == ["alice-job", "bob-job", "system-job"]
    assert staff.get("/api/jobs/bob-job/").status_code == 200
    assert len(staff.get("/api/occurrences/").json()["results"]) == 3
    assert staff.post("/api/jobs/", _job_body("bob-job", queue="q.ops"), format="json").status_code == 200
    assert Job.objects.get(key="bob-job").owner == world["bob"], "an operator's edit keeps the owner"
    assert staff.delete("/api/jobs/bob-job/").status_code == 200


@pytest.mark.parametrize(
    "path",
    ["/admin/reminders/job/", "/admin/reminders/occurrence/", "/admin/reminders/job/{bob_job}/change/"],
)
def test_it_keeps_non_staff_users_out_of_the_admin(world: dict[str, Any], path: str) -> None:
    path = path.format(bob_job=world["jobs"]["bob"].pk)
    anonymous = Client().get(path)
    assert anonymous.status_code == 302 and "/admin/login/" in anonymous.headers["Location"]
    user = Client()
    user.force_login(world["alice"])
    refused = user.get(path)
    assert refused.status_code == 302 and "/admin/login/" in refused.headers["Location"]


def test_it_shows_operators_every_job_in_the_admin(world: dict[str, Any]) -> None:
    operator = UserFactory(username="root", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(operator)
    page = client.get("/admin/reminders/job/")
    assert page.status_code == 200
    html = page.content.decode()
    assert all(key in html for key in ("alice-job", "bob-job", "system-job"))
    # Staff without model permissions see no reminders data at all.
    client.force_login(world["staff"])
    assert client.get("/admin/reminders/job/").status_code == 403
