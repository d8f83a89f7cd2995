"""/health/ready tells strangers whether the service is ready and nothing else, within a per-address limit;
loopback callers (as /metrics decides) and operators read which check failed and its detail."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from reminders.models import WorkerHeartbeat
from reminders.ops import health
from tests.factories import UserFactory

pytestmark = [pytest.mark.django_db]

STRANGER = "203.0.113.5"


@pytest.fixture(autouse=True)
def _fresh_heartbeat(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(health, "_last_write", 0.0)


def _ready(client: Client | None = None, **extra: Any) -> Any:
    return (client or Client()).get("/health/ready", **extra)


def test_a_stranger_reads_the_status_alone_whether_ready_or_not(settings: Any) -> None:
    settings.CELERY_BROKER_URL = "amqp://guest:secret@broker.internal:5672/reminders-vhost"
    settings.REMINDERS_CALLBACK_BROKER_URL = settings.CELERY_BROKER_URL
    refused = _ready(REMOTE_ADDR=STRANGER)
    assert (refused.status_code, refused.json()) == (503, {"status": "fail"})

    health.scan_finished(worker="worker@db-host-7:4242")
    settings.CELERY_BROKER_URL = settings.REMINDERS_CALLBACK_BROKER_URL = "memory://"
    ready = _ready(REMOTE_ADDR=STRANGER)
    assert (ready.status_code, ready.json()) == (200, {"status": "ok"})
    assert WorkerHeartbeat.objects.exists()


def test_a_request_through_the_proxy_is_a_strangers_even_from_loopback(settings: Any) -> None:
    settings.API_NUM_PROXIES = 1
    settings.CELERY_BROKER_URL = settings.REMINDERS_CALLBACK_BROKER_URL = "memory://"
    health.scan_finished(worker="worker@db-host-7:4242")
    response = _ready(REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR=STRANGER)
    assert response.json() == {"status": "ok"}
    assert "db-host-7" not in response.content.decode()


def test_loopback_reads_each_check_and_its_detail() -> None:
    health.scan_finished(worker="worker@db-host-7:4242")
    body = _ready(REMOTE_ADDR="127.0.0.1").json()
    assert {"database", "schema", "broker", "scan"} <= body["checks"].keys()
    assert "worker@db-host-7:4242" in body["checks"]["scan"]["detail"]
    assert body["failing"] == []


@pytest.mark.parametrize(
    ("staff", "permission", "superuser", "detail"),
    [(True, True, False, True), (False, False, True, True), (True, False, False, False),
     (False, True, False, False)],
    ids=["operator", "superuser", "staff-without-the-permission", "permission-without-staff"],
)  # fmt: skip
def test_an_operator_signed_in_reads_the_detail_from_anywhere(
    staff: bool, permission: bool, superuser: bool, detail: bool
) -> None:
    user = UserFactory(is_staff=staff or superuser, is_superuser=superuser)
    if permission:
        user.user_permissions.add(Permission.objects.get(codename="manage_all_teams"))
    client = Client()
    client.force_login(user)
    body = _ready(client, REMOTE_ADDR=STRANGER).json()
    assert ("checks" in body) is detail, body
    assert body["status"] == "fail"  # no worker has scanned


def test_a_stranger_past_the_rate_gets_429_and_loopback_is_not_counted(settings: Any) -> None:
    settings.REMINDERS_HEALTH_READY_RATE = "3/m"
    settings.CELERY_BROKER_URL = settings.REMINDERS_CALLBACK_BROKER_URL = "memory://"
    answers = [_ready(REMOTE_ADDR=STRANGER) for _ in range(4)]
    assert [a.status_code for a in answers] == [503, 503, 503, 429]
    assert 0 < int(answers[-1]["Retry-After"]) <= 60
    assert "throttled" in json.loads(answers[-1].content)["detail"].lower()
    assert _ready(REMOTE_ADDR="198.51.100.9").status_code == 503  # another address has its own count
    assert {_ready(REMOTE_ADDR="127.0.0.1").status_code for _ in range(10)} == {503}
