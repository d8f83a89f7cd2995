"""The production wiring: a real `celery beat` kicks a real `celery worker`, which delivers to RabbitMQ."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from reminders.models import Occurrence, OccurrenceStatus
from tests.conftest import delete_queue, drain_queue

ROOT = Path(__file__).resolve().parents[2]


def _database_url() -> str:
    db = settings.DATABASES["default"]
    return f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture
def service(tmp_path: Path) -> Iterator[None]:
    """Worker and beat processes on the test database, with a Celery queue of their own."""
    call_command("ensure_beat")  # transactional tests flush the rows the migration created
    kicks = f"test.kicks.{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "CELERY_TASK_DEFAULT_QUEUE": kicks,
        "REMINDERS_SCAN_SECONDS": "1",
    }
    celery = [sys.executable, "-m", "celery", "-A", "config"]
    logs = [open(tmp_path / name, "w") for name in ("worker.log", "beat.log")]  # noqa: SIM115
    processes = [
        subprocess.Popen([*celery, "worker", "-c", "1", "--loglevel=INFO", "--without-heartbeat",
                          "--without-gossip", "--without-mingle", "-n", f"test-{uuid.uuid4().hex[:6]}@%h"],
                         cwd=ROOT, env=env, stdout=logs[0], stderr=subprocess.STDOUT),
        subprocess.Popen([*celery, "beat", "--loglevel=INFO", "--pidfile=",
                          "-S", "django_celery_beat.schedulers:DatabaseScheduler"],
                         cwd=ROOT, env=env, stdout=logs[1], stderr=subprocess.STDOUT),
    ]  # fmt: skip
    try:
        yield
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
        for log in logs:
            log.close()
        delete_queue(kicks)
        for name in ("worker.log", "beat.log"):
            print(f"--- {name}\n" + (tmp_path / name).read_text()[-3000:])


@pytest.mark.postgres
@pytest.mark.rabbitmq
@pytest.mark.django_db(transaction=True)
def test_beat_and_worker_processes_deliver_a_job_posted_through_the_api(
    service: None, api: APIClient, queue_name: str
) -> None:
    fire_at = timezone.now() + dt.timedelta(seconds=3)
    response = api.post(
        "/api/jobs/",
        {
            "key": "process-test",
            "schedules": [fire_at.isoformat()],
            "callback": {"type": "rabbitmq", "data": {"queue": queue_name, "payload": {"ok": True}}},
        },
        format="json",
    )
    assert response.status_code == 201

    messages = drain_queue(queue_name, expect=1, timeout=45)

    assert [json.loads(m.body) for m in messages] == [{"ok": True}]
    # The broker hands the message on at commit; the worker marks the row right after reading commit-ok,
    # so the consumer can get there a few milliseconds before the mark does.
    deadline = time.monotonic() + 10
    while (occurrence := Occurrence.objects.get()).status == OccurrenceStatus.CLAIMED:
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert occurrence.status == OccurrenceStatus.DELIVERED
    assert messages[0].properties["message_id"] == occurrence.idempotency_key
    assert occurrence.delivered_at is not None and occurrence.delivered_at >= fire_at
