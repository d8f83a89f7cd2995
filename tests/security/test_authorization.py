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

from reminders.jobs import Callback, job_upsert
from reminders.models import CallbackType, Job, Occurrence, OccurrenceStatus
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
    alice, bob = UserFactory(username="alice", queues=["*"]), UserFactory(username="bob", queues=["*"])
    staff = UserFactory(username="operator", is_staff=True, queues=["*"])
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


# --- internal handlers and reserved keys (issue 19) -------------------------------------------------------

INTERNAL_HANDLER = "trainings.reminder"  # pushes to any training's players: registered without api=True
TRAINING_KEY = "training-6f1c1d52-2c1e-4a44-9d55-0c8f6f2b1a10-pre-questionnaire"


def _handler_callback(name: str) -> dict[str, Any]:
    payload = {"training": "6f1c1d52-2c1e-4a44-9d55-0c8f6f2b1a10", "rule": 1}
    return {"type": "handler", "data": {"name": name, "payload": payload}}


def _schedule_body(key: str, callback: dict[str, Any]) -> dict[str, Any]:
    return {"key": key, "expression": "@every 1m", "callback": callback}


def _error_at(body: Any, path: str) -> list[str]:
    """The messages a 400 holds at a dotted field path (`jobs.0.callback.data.name`)."""
    for part in path.split("."):
        assert isinstance(body, dict) and part in body, f"no error at {path!r}: {body}"
        body = body[part]
    assert isinstance(body, list) and body, body
    return body


def _everything() -> tuple[Any, ...]:
    from reminders.models import Schedule

    return (
        *_state(),
        tuple(Schedule.objects.order_by("key").values_list("key", "job__version", "job__target")),
    )


INTERNAL_HANDLER_REQUESTS = {
    "job": (
        "/api/jobs/",
        {**_job_body("replay-1"), "callback": _handler_callback(INTERNAL_HANDLER)},
        "callback.data.name",
    ),
    "bulk": (
        "/api/jobs/bulk/",
        {
            "jobs": [
                _job_body("fine-1"),
                {**_job_body("replay-2"), "callback": _handler_callback(INTERNAL_HANDLER)},
            ]
        },
        "jobs.1.callback.data.name",
    ),
    "schedule": (
        "/api/schedules/",
        _schedule_body("replay-3", _handler_callback(INTERNAL_HANDLER)),
        "callback.data.name",
    ),
}


def _assert_refused_storing_nothing(
    world: dict[str, Any], actor: str, request: tuple[str, dict[str, Any], str], reason: str
) -> None:
    """`actor` (a superuser when not one of the world's users) posts the request: 400 with `reason` at
    the request's field, and nothing stored."""
    user = world.get(actor) or UserFactory(username="root", is_staff=True, is_superuser=True, queues=["*"])
    path, body, field = request
    before = _everything()
    response = _client(user).post(path, body, format="json")
    assert response.status_code == 400, response.content
    assert reason in _error_at(response.json(), field)[0]
    assert _everything() == before


@pytest.mark.parametrize("actor", ["alice", "staff", "superuser"])
@pytest.mark.parametrize("route", list(INTERNAL_HANDLER_REQUESTS))
def test_it_refuses_an_internal_handler_as_a_callback_with_400(
    world: dict[str, Any], route: str, actor: str
) -> None:
    """A handler runs with the project's rights: naming one an app keeps to itself is refused to every API
    caller, superusers included, and nothing is stored."""
    _assert_refused_storing_nothing(world, actor, INTERNAL_HANDLER_REQUESTS[route], "internal")


def test_it_refuses_switching_a_schedule_to_an_internal_handler(world: dict[str, Any]) -> None:
    alice = _client(world["alice"])
    fine = _schedule_body("alice-every", {"type": "rabbitmq", "data": {"queue": "q.a", "payload": {}}})
    assert alice.post("/api/schedules/", fine, format="json").status_code == 201
    before = _everything()
    switched = {**fine, "callback": _handler_callback(INTERNAL_HANDLER)}
    replace = alice.post("/api/schedules/", switched, format="json")
    change = alice.patch("/api/schedules/alice-every/", {"callback": switched["callback"]}, format="json")
    for response in (replace, change):
        assert response.status_code == 400, response.content
        _error_at(response.json(), "callback.data.name")
    assert _everything() == before


def test_a_handler_registered_for_the_api_stays_usable(world: dict[str, Any]) -> None:
    from reminders.engine import handler_registry
    from tests.reminders import handlers_for_tests  # noqa: F401 - registers tests.record with api=True

    assert handler_registry.api_allowed("tests.record") and not handler_registry.api_allowed(INTERNAL_HANDLER)
    body = {**_job_body("alice-handler"), "callback": _handler_callback("tests.record")}
    assert _client(world["alice"]).post("/api/jobs/", body, format="json").status_code == 201


def test_a_handler_is_internal_unless_registered_for_the_api() -> None:
    from reminders.engine import handler_registry

    handler_registry.register("tests.authz.internal")(lambda delivery: None)
    handler_registry.register_batch("tests.authz.public", api=True)(lambda deliveries: {})
    assert handler_registry.exists("tests.authz.internal") and not handler_registry.api_allowed(
        "tests.authz.internal"
    )
    assert handler_registry.api_allowed("tests.authz.public")
    assert "tests.authz.internal" not in handler_registry.api_names()


RESERVED_KEY_REQUESTS = {
    "job": ("/api/jobs/", _job_body(TRAINING_KEY), "key"),
    "job, upper case": ("/api/jobs/", _job_body(TRAINING_KEY.upper().replace("TRAINING", "training")), "key"),
    "job, suffixed": ("/api/jobs/", _job_body(f"{TRAINING_KEY}.0a1b2c3d"), "key"),
    "bulk": ("/api/jobs/bulk/", {"jobs": [_job_body("fine-1"), _job_body(TRAINING_KEY)]}, "jobs.1.key"),
}


@pytest.mark.parametrize("actor", ["alice", "staff", "superuser"])
@pytest.mark.parametrize("route", list(RESERVED_KEY_REQUESTS))
def test_it_refuses_a_key_in_the_trainings_namespace_with_400(
    world: dict[str, Any], route: str, actor: str
) -> None:
    """`training-<uuid>-...` keys belong to the trainings app: a caller who took one first could read and
    cancel the training's reminders once the app scheduled them there."""
    _assert_refused_storing_nothing(world, actor, RESERVED_KEY_REQUESTS[route], "reserved")


def test_keys_outside_the_namespace_stay_free(world: dict[str, Any]) -> None:
    """Seed 000's own example key looks like a training's, but names no training id."""
    alice = _client(world["alice"])
    for key in ("training-invitations-42", "training-42-reminder", "my-training-6f1c1d52"):
        assert alice.post("/api/jobs/", _job_body(key), format="json").status_code == 201, key
