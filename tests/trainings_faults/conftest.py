"""Fixtures for the trainings fault scenarios: seeded rules, a team, and real subprocesses on the test
database (a Celery worker, the push gateway) that a test may kill -9."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from bench.processes import amqp_connection, declared_counts, start_process, stop_process
from delivery.models import PushSend
from tests.conftest import drain_queue
from tests.factories import MembershipFactory, PlayerFactory, TeamFactory
from tests.fault_table import record
from tests.trainings.seeded import rules  # noqa: F401 - autouse: Seed 000's rules in every test
from trainings.models import Team


@pytest.fixture
def push_queue(settings: Any, queue_name: str) -> str:
    """Pushes go to a unique durable queue (declared now, so it can be counted), deleted afterwards."""
    settings.TRAININGS_PUSH_QUEUE = queue_name
    with contextlib.closing(amqp_connection(settings.CELERY_BROKER_URL)) as broker:
        broker.channel().queue_declare(queue=queue_name, durable=True, auto_delete=False)
    return queue_name


@pytest.fixture
def team(coach: Any) -> Team:
    """Coach A's team: Alice, Bruno, Chloe and Dan, all active."""
    team = TeamFactory(name="U15", coaches=[coach])
    for name in ("Alice", "Bruno", "Chloe", "Dan"):
        MembershipFactory(team=team, player=PlayerFactory(name=name))
    return team


def training_via_api(client: APIClient, team: Team, start: dt.datetime) -> str:
    """Create a one-hour training of `team` through the API (committed with its reminders); its id."""
    body = {
        "team": team.pk,
        "title": "Speed session",
        "start": start.isoformat(),
        "end": (start + dt.timedelta(hours=1)).isoformat(),
        "time_zone": "Europe/Paris",
    }
    created = client.post("/api/trainings/", body, format="json")
    assert created.status_code == 201, created.json()
    return str(created.json()["id"])


def record_with_the_queue_empty(
    push_queue: str, keys: list[str], *, scenario: str, fault: str, result: str
) -> None:
    """Every push key delivered, each of its devices once (a PushSend row a (push, device): the unique key
    says once) and nothing left on the queue; then the scenario's row of the fault table."""
    assert sorted(set(PushSend.objects.values_list("push_key", flat=True))) == sorted(keys)
    assert drain_queue(push_queue) == []
    record(scenario=scenario, fault=fault, result=result)


def database_url() -> str:
    """The test database (pytest-django has renamed it by now) as a URL for a subprocess."""
    db = settings.DATABASES["default"]
    return f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def ready_count(queue: str) -> int:
    """Messages ready on the queue (not counting unacked ones), asked of RabbitMQ by a passive declare."""
    with contextlib.closing(amqp_connection(settings.CELERY_BROKER_URL)) as broker:
        return declared_counts(broker.channel(), queue)[0]


def wait_for(condition: Callable[[], Any], *, timeout: float, what: str, every: float = 0.05) -> Any:
    """Poll until `condition()` is truthy; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)
    return value


class Processes:
    """Starts real project processes on the test database and this test's queues; stops the leftovers.

    Each gets its own log file; `log(name)` returns it for assertion messages.
    """

    def __init__(self, tmp_path: Path, env: dict[str, str]) -> None:
        self.tmp_path = tmp_path
        self.env = env
        self.started: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(self, name: str, argv: list[str], **env: str) -> subprocess.Popen[bytes]:
        process = start_process(argv, env={**self.env, **env}, log_path=self.tmp_path / f"{name}.log")
        self.started.append((name, process))
        return process

    def worker(self, name: str, **env: str) -> subprocess.Popen[bytes]:
        """A real `celery worker` (solo pool: the task runs in this very process, so kill -9 hits it)."""
        return self.start(
            name,
            [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool=solo", "--loglevel=INFO",
             "--without-mingle", "--without-gossip", "--without-heartbeat", "--hostname", f"{name}@%h"],
            **env,
        )  # fmt: skip

    def gateway(self, name: str, *args: str, **env: str) -> subprocess.Popen[bytes]:
        """The real `manage.py push_gateway`."""
        return self.start(name, [sys.executable, "manage.py", "push_gateway", *args], **env)

    def log(self, name: str) -> str:
        path = self.tmp_path / f"{name}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def stop_all(self) -> None:
        """Kill what is left: the test has asserted what it needed, and a warm shutdown of a worker in
        the middle of its scan loop would only make the teardown wait for the loop."""
        for _, process in self.started:
            stop_process(process)


@pytest.fixture
def processes(tmp_path: Path, push_queue: str) -> Iterator[Processes]:
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "REMINDERS_CALLBACK_BROKER_URL": settings.CELERY_BROKER_URL,
        "TRAININGS_PUSH_QUEUE": push_queue,
        "PYTHONUNBUFFERED": "1",
    }
    running = Processes(tmp_path, env)
    try:
        yield running
    finally:
        running.stop_all()
