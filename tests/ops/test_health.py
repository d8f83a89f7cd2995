"""/health/live, /health/ready and `manage.py healthcheck`: each failing check is named, and the exit code
of the command follows the HTTP status."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder
from django.test import Client

from reminders.models import RequestCount, WorkerHeartbeat
from reminders.ops import health
from tests.ops.processes import ROOT, database_url

pytestmark = [pytest.mark.django_db]


@pytest.fixture(autouse=True)
def _fresh_heartbeat(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(health, "_last_write", 0.0)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again when the block ends: nothing listens there


def test_live_answers_without_touching_anything() -> None:
    response = Client().get("/health/live")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})


def test_ready_is_200_after_a_scan_and_names_the_scan_when_none_happened() -> None:
    client = Client()
    response = client.get("/health/ready")
    assert response.status_code == 503
    assert response.json()["failing"] == ["scan"]
    assert response.json()["checks"]["scan"]["detail"] == "no worker has ever finished a scan"

    health.scan_finished(worker="worker@test")

    response = client.get("/health/ready")
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "ok"
    assert "by worker@test" in response.json()["checks"]["scan"]["detail"]


def test_ready_names_the_broker_when_it_refuses_connections(settings: pytest.FixtureRequest) -> None:
    health.scan_finished(worker="worker@test")
    port = _closed_port()
    settings.CELERY_BROKER_URL = f"amqp://guest:secret@127.0.0.1:{port}//"
    settings.REMINDERS_CALLBACK_BROKER_URL = settings.CELERY_BROKER_URL

    response = Client().get("/health/ready")

    assert response.status_code == 503
    body = response.json()
    assert body["failing"] == ["broker"]
    assert f"127.0.0.1:{port}" in body["checks"]["broker"]["detail"]
    assert "secret" not in json.dumps(body)  # the password is not shown


def test_the_scan_heartbeat_is_written_at_most_once_a_second_per_process() -> None:
    health.scan_finished(worker="worker@test")
    first = WorkerHeartbeat.objects.get().scan_finished_at
    health.scan_finished(worker="worker@test")
    assert WorkerHeartbeat.objects.get().scan_finished_at == first


def test_the_command_exits_1_naming_the_failing_check_and_0_when_ready() -> None:
    with pytest.raises(CommandError, match="not ready: scan") as raised:
        call_command("healthcheck")
    assert raised.value.returncode == 1

    health.scan_finished(worker="worker@test")
    call_command("healthcheck")  # no error: exit status 0


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_command_as_a_probe_runs_it_exits_with_the_readiness() -> None:
    env = {**os.environ, "DATABASE_URL": database_url()}
    probe = [sys.executable, "manage.py", "healthcheck", "--json"]
    failed = subprocess.run(probe, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert failed.returncode == 1, failed.stderr
    assert json.loads(failed.stdout.strip().splitlines()[-1])["failing"] == ["scan"]

    health.scan_finished(worker="worker@test")
    ready = subprocess.run(probe, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert ready.returncode == 0, ready.stdout + ready.stderr


def test_ready_fails_naming_the_schema_when_a_table_the_service_needs_is_missing() -> None:
    """A deploy that did not create a table (the runbook's first deploy once missed the throttle cache's)
    answered 500 on every API request while readiness said ready."""
    health.scan_finished(worker="worker@test")
    assert Client().get("/health/ready").status_code == 200
    table = RequestCount._meta.db_table
    with connection.cursor() as cursor:  # inside the test's transaction: rolled back after it
        cursor.execute(f"DROP TABLE {connection.ops.quote_name(table)}")

    response = Client().get("/health/ready")

    assert response.status_code == 503
    assert response.json()["failing"] == ["schema"]
    assert table in response.json()["checks"]["schema"]["detail"]


def test_ready_fails_naming_a_migration_not_applied() -> None:
    health.scan_finished(worker="worker@test")
    [(app, latest)] = [node for node in MigrationLoader(None).graph.leaf_nodes() if node[0] == "reminders"]
    MigrationRecorder(connection).record_unapplied(app, latest)

    response = Client().get("/health/ready")

    assert response.status_code == 503
    assert response.json()["failing"] == ["schema"]
    assert f"reminders.{latest}" in response.json()["checks"]["schema"]["detail"]
    with pytest.raises(CommandError, match="not ready: schema"):
        call_command("healthcheck")
