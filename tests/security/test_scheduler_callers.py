"""Who may push what through the scheduler API (issue 40, item 1).

A player's token once scheduled "URGENT from your coach ..." onto the push queue and the gateway delivered
it to another team's phones: any signed-in account could call the jobs API and name any queue. Now the
jobs, bulk, schedules, occurrences and throttle-policy routes need `reminders.use_scheduler_api` (403
without it); a `rabbitmq` callback names a queue one of the caller's grants matches; and the service's
own queues (the push queue, its dead letters, Celery's) are refused to every caller, superusers included,
under whatever names they are configured. Each refusal stores nothing and nothing reaches any queue,
checked on the real RabbitMQ after a scan that would have delivered anything due.
"""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.utils import timezone
from kombu import Connection
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from reminders.engine.dispatch import occurrences_dispatch_batch
from reminders.jobs import Callback, job_upsert
from reminders.models import (
    CallbackType,
    Job,
    Occurrence,
    OccurrenceStatus,
    QueueGrant,
    Schedule,
    ThrottlePolicy,
)
from tests.clients import logged_in
from tests.conftest import delete_queue, drain_queue
from tests.factories import GuardianFactory, PlayerFactory, UserFactory
from trainings.access import coach_group_ensure

pytestmark = pytest.mark.django_db


def _token_client(user: Any) -> APIClient:
    """A client with the user's real API token, as a phone app or a backend sends it."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def _job(key: str, queue: str) -> dict[str, Any]:
    payload = {"title": "URGENT from your coach", "url": "https://evil.example/login"}
    callback = {"type": "rabbitmq", "data": {"queue": queue, "payload": payload}}
    return {"key": key, "schedules": [timezone.now().isoformat()], "callback": callback}


def _stored() -> tuple[int, ...]:
    models = (Job, Occurrence, Schedule, ThrottlePolicy)
    return tuple(model.objects.count() for model in models)


def _error_at(body: Any, path: str) -> str:
    for part in path.split("."):
        assert isinstance(body, dict) and part in body, f"no error at {path!r}: {body}"
        body = body[part]
    assert isinstance(body, list) and body, body
    return str(body[0])


# --- the permission: players', guardians' and coaches' logins are not integration callers ----------------


def _player_user() -> Any:
    user = UserFactory(username="player-login")
    PlayerFactory(name="Alice", user=user)
    return user


def _guardian_user() -> Any:
    user = UserFactory(username="guardian-login")
    GuardianFactory(name="Alice's mother", player=PlayerFactory(name="Alice"), user=user)
    return user


def _coach_user() -> Any:
    user = UserFactory(username="coach-login", is_staff=True)
    user.groups.add(coach_group_ensure())
    return user


SCHEDULER_ROUTES = [
    ("get", "/api/jobs/", None),
    ("post", "/api/jobs/", lambda: _job("from-a-phone", "billing.notices")),
    ("post", "/api/jobs/bulk/", lambda: {"jobs": [_job("from-a-phone", "billing.notices")]}),
    ("get", "/api/jobs/someones-job/", None),
    ("delete", "/api/jobs/someones-job/", None),
    ("get", "/api/schedules/", None),
    ("post", "/api/schedules/", lambda: {**_job("every", "billing.notices"), "expression": "@every 1m"}),
    ("get", "/api/occurrences/", None),
    ("get", "/api/throttle-policies/", None),
    ("post", "/api/throttle-policies/", lambda: {"name": "mine", "max_per_second": 1}),
]


@pytest.mark.parametrize("who", ["player", "guardian", "coach", "plain account"])
@pytest.mark.parametrize(
    ("method", "path", "body"), SCHEDULER_ROUTES, ids=[f"{m}-{p}" for m, p, _ in SCHEDULER_ROUTES]
)
def test_it_refuses_the_scheduler_api_to_callers_without_its_permission(
    who: str, method: str, path: str, body: Any
) -> None:
    user = {"player": _player_user, "guardian": _guardian_user, "coach": _coach_user}.get(who, UserFactory)()
    QueueGrant.objects.create(user=user, pattern="*")  # a grant alone opens nothing
    before = _stored()
    response = getattr(_token_client(user), method)(path, body() if body else None, format="json")
    assert response.status_code == 403, response.content
    assert "reminders.use_scheduler_api" in response.json()["detail"]
    assert _stored() == before


def test_anonymous_callers_are_still_asked_to_authenticate() -> None:
    response = APIClient().post("/api/jobs/", _job("anon", "billing.notices"), format="json")
    assert response.status_code == 401 and response.headers["WWW-Authenticate"].startswith("Token")


# --- queues: only the granted ones, never the service's own ----------------------------------------------


def _service_queues() -> dict[str, str]:
    """The service's own queues under their configured names, and Celery's unnamed ones."""
    return {
        "push queue": settings.TRAININGS_PUSH_QUEUE,
        "push dead letters": f"{settings.TRAININGS_PUSH_QUEUE}.dead",
        "celery's task queue": settings.CELERY_TASK_DEFAULT_QUEUE,
        # A worker's own mailbox (`celery@host.celery.pidbox`) has an '@', which no callback queue may.
        "a control reply queue": f"{uuid.uuid4()}.reply.celery.pidbox",
        "celery's events": f"celeryev.{uuid.uuid4()}",
    }


def _requests(queue: str) -> dict[str, tuple[str, str, dict[str, Any], str]]:
    """(method, path, body, the field the 400 names) for each way a callback comes in."""
    schedule = {**_job("every-minute", queue), "expression": "@every 1m"}
    schedule.pop("schedules")
    return {
        "job": ("post", "/api/jobs/", _job("attack-1", queue), "callback.data.queue"),
        "bulk": (
            "post",
            "/api/jobs/bulk/",
            {"jobs": [_job("fine", "billing.notices"), _job("attack-2", queue)]},
            "jobs.1.callback.data.queue",
        ),
        "schedule": ("post", "/api/schedules/", schedule, "callback.data.queue"),
        "schedule change": (
            "patch",
            "/api/schedules/existing/",
            {"callback": _job("x", queue)["callback"]},
            "callback.data.queue",
        ),
    }


class Broker:
    """Each named queue's depth on the real RabbitMQ (None: the queue does not exist)."""

    def __init__(self, names: list[str]) -> None:
        self.names = names

    def depths(self) -> dict[str, int | None]:
        found: dict[str, int | None] = {}
        with Connection(settings.REMINDERS_CALLBACK_BROKER_URL, connect_timeout=3) as conn:
            for name in self.names:
                channel = conn.channel()
                try:
                    _, found[name], _ = channel.queue_declare(name, passive=True)
                except Exception:  # NOT_FOUND closes the channel
                    found[name] = None
                finally:
                    with contextlib.suppress(Exception):  # already closed by the broker's refusal
                        channel.close()
        return found


@pytest.fixture
def callers() -> dict[str, Any]:
    """An integration caller granted `billing.*`, an operator granted everything, and a superuser."""
    integration = UserFactory(username="billing-backend", queues=["billing.*"])
    operator = UserFactory(username="operator", is_staff=True, queues=["*"])
    root = UserFactory(username="root", is_staff=True, is_superuser=True, queues=["*"])
    return {"integration": integration, "operator": operator, "superuser": root}


def _existing_schedule(client: APIClient) -> None:
    callback = {"type": "rabbitmq", "data": {"queue": "billing.existing", "payload": {}}}
    body = {"key": "existing", "expression": "@every 1m", "callback": callback}
    assert client.post("/api/schedules/", body, format="json").status_code == 201


@pytest.fixture
def _no_test_queues_left() -> Iterator[None]:
    yield
    for name in ("billing.notices", "billing.existing", "billing.granted"):
        delete_queue(name)


def _assert_refused_and_nothing_published(
    client: APIClient, request: tuple[str, str, dict[str, Any], str], reason: str, watched: list[str]
) -> None:
    method, path, body, field = request
    broker = Broker(watched)
    stored, depths = _stored(), broker.depths()
    response = getattr(client, method)(path, body, format="json")
    assert response.status_code == 400, response.content
    assert reason in _error_at(response.json(), field)
    assert _stored() == stored
    # A scan delivers whatever is due: had anything been stored, it would be published now.
    occurrences_dispatch_batch()
    assert broker.depths() == depths


@pytest.mark.rabbitmq
@pytest.mark.usefixtures("_no_test_queues_left")
@pytest.mark.parametrize("caller", ["integration", "operator", "superuser"])
@pytest.mark.parametrize("route", ["job", "bulk", "schedule", "schedule change"])
@pytest.mark.parametrize("queue", list(_service_queues()))
def test_no_caller_publishes_to_the_services_own_queues(
    callers: dict[str, Any], queue: str, route: str, caller: str
) -> None:
    client = _token_client(callers[caller])
    _existing_schedule(client)
    name = _service_queues()[queue]
    watched = [*(_service_queues().values()), "billing.notices", "billing.existing"]
    _assert_refused_and_nothing_published(client, _requests(name)[route], "this service's own queue", watched)


@pytest.mark.rabbitmq
@pytest.mark.usefixtures("_no_test_queues_left")
@pytest.mark.parametrize("route", ["job", "bulk", "schedule", "schedule change"])
def test_a_caller_publishes_only_to_the_queues_it_was_granted(callers: dict[str, Any], route: str) -> None:
    client = _token_client(callers["integration"])
    _existing_schedule(client)
    watched = ["payroll.run", "billing.notices", "billing.existing"]
    request = _requests("payroll.run")[route]
    _assert_refused_and_nothing_published(client, request, "no queue grant matching 'payroll.run'", watched)


@pytest.mark.rabbitmq
@pytest.mark.usefixtures("_no_test_queues_left")
def test_a_granted_queue_gets_its_message(callers: dict[str, Any]) -> None:
    """The check above would see a message: a granted queue receives one from the same scan."""
    client = _token_client(callers["integration"])
    response = client.post("/api/jobs/", _job("allowed", "billing.granted"), format="json")
    assert response.status_code == 201, response.content
    assert occurrences_dispatch_batch().delivered == 1
    (message,) = drain_queue("billing.granted", expect=1)
    assert json.loads(message.body)["title"] == "URGENT from your coach"


def test_a_renamed_service_queue_stays_refused(callers: dict[str, Any], settings: Any) -> None:
    settings.TRAININGS_PUSH_QUEUE = "club.phones"
    settings.CELERY_TASK_DEFAULT_QUEUE = "club.tasks"
    client = _token_client(callers["operator"])
    for name in ("club.phones", "club.phones.dead", "club.tasks"):
        response = client.post("/api/jobs/", _job(f"to-{name}", name), format="json")
        assert response.status_code == 400, name
        assert "this service's own queue" in _error_at(response.json(), "callback.data.queue")
    # The old names are ordinary queues now, for a caller granted them.
    assert client.post("/api/jobs/", _job("old", "trainings.push"), format="json").status_code == 201


def test_grant_patterns_match_whole_names_with_a_star_for_any_run(callers: dict[str, Any]) -> None:
    client = _token_client(callers["integration"])  # billing.*
    cases = [("billing.eu", True), ("billing.", True), ("billing", False), ("xbilling.eu", False)]
    for queue, allowed in cases:
        response = client.post("/api/jobs/", _job(f"k-{queue}x", queue), format="json")
        assert (response.status_code == 201) is allowed, (queue, response.content)


def test_the_admin_refuses_a_schedule_to_the_push_queue_even_for_a_superuser(callers: dict[str, Any]) -> None:
    admin = logged_in(callers["superuser"])
    form = {"key": "admin-push", "expression": "@every 1m", "timezone": "UTC", "callback_type": "rabbitmq",
            "target": settings.TRAININGS_PUSH_QUEUE, "payload": "{}", "priority": 5, "batch_size": 1,
            "misfire_policy": "fire_once"}  # fmt: skip
    page = admin.post("/admin/reminders/schedule/add/", form)
    assert page.status_code == 200 and "this service&#x27;s own queue" in page.content.decode()
    assert not Schedule.objects.exists()


# --- the README's example keeps working on the embedded defaults ------------------------------------------


def test_the_readmes_curl_example_works_with_the_token_dev_admin_prints(settings: Any) -> None:
    readme = (Path(settings.BASE_DIR) / "README.md").read_text()
    example = re.search(r"/api/jobs/ -d '(.*?)'\n", readme, re.DOTALL)
    assert example is not None, "the README shows a curl example"
    body = json.loads(example.group(1))
    settings.DEBUG = True
    out = StringIO()
    call_command("dev_admin", stdout=out)
    token = re.search(r"API token: (\w+)", out.getvalue())
    assert token is not None
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.group(1)}")
    response = client.post("/api/jobs/", body, format="json")
    assert response.status_code == 201, response.content
    assert Job.objects.get(key=body["key"]).target == "training.invitations.notifications"


@pytest.mark.rabbitmq
@pytest.mark.parametrize("queue", list(_service_queues()))
def test_a_job_stored_before_the_check_never_publishes_to_a_service_queue(queue: str) -> None:
    """A job written to a service queue before the API refused it (or before the queue was renamed to
    its name) fails for good at its delivery, with its reason, and the queue gets nothing."""
    name = _service_queues()[queue]
    job, _ = job_upsert(
        key=f"planted-{queue}",
        schedules=[timezone.now()],
        callback=Callback(CallbackType.RABBITMQ, name, {"title": "URGENT from your coach"}),
    )
    broker = Broker([name])
    depths = broker.depths()
    occurrences_dispatch_batch()
    occurrence = Occurrence.objects.get(job=job)
    assert occurrence.status == OccurrenceStatus.FAILED
    assert "this service's own queue" in occurrence.last_error
    assert broker.depths() == depths
