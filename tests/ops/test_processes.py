"""The production wiring, with real processes: a prefork worker's children write their samples to
PROMETHEUS_MULTIPROC_DIR and the web's /metrics sums them; /health/ready follows the worker's scans.

Readiness is tested against a real worker that is frozen (SIGSTOP to its process group, children included)
and resumed, because "the scan stopped" in production is a process that stopped, not a function not
called; the heartbeat row it writes is the only link between it and the web.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from django.test import Client
from django.utils import timezone

from reminders.models import Occurrence, OccurrenceStatus, WorkerHeartbeat
from tests.factories import JobFactory, OccurrenceFactory
from tests.ops.processes import service
from tests.ops.scrape import scrape, value

pytestmark = [pytest.mark.postgres, pytest.mark.rabbitmq, pytest.mark.django_db(transaction=True)]


def _wait(condition: Callable[[], bool], timeout: float, what: str) -> float:
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.2)
    return time.monotonic() - start


def test_the_webs_metrics_sum_what_the_workers_prefork_children_delivered(
    tmp_path: Path, queue_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    multiproc = tmp_path / "prometheus"
    multiproc.mkdir()
    job = JobFactory(target=queue_name)
    now = timezone.now()
    for i in range(40):
        OccurrenceFactory(job=job, fire_at=now + dt.timedelta(seconds=2, milliseconds=50 * i))

    env = {"PROMETHEUS_MULTIPROC_DIR": str(multiproc), "LOG_FORMAT": "json"}
    with service(tmp_path, concurrency=2, extra_env=env):
        _wait(
            lambda: Occurrence.objects.filter(status=OccurrenceStatus.DELIVERED).count() == 40,
            timeout=60,
            what="40 deliveries",
        )
        _wait(WorkerHeartbeat.objects.exists, timeout=10, what="the end of the worker's scan")
        monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(multiproc))
        samples = scrape()

    assert value(samples, "reminders_occurrences_total", outcome="delivered", callback="rabbitmq") == 40
    assert value(samples, "reminders_fire_lateness_seconds_count", callback="rabbitmq") == 40
    assert value(samples, "reminders_fire_lateness_seconds_bucket", callback="rabbitmq", le="600.0") == 40
    assert value(samples, "reminders_claim_seconds_count") > 0
    # Written by the worker processes, not this one (whose samples are in memory, not in the directory).
    assert any(name.startswith("counter_") for name in os.listdir(multiproc))
    (worker_timestamp,) = [
        v for (name, _), v in samples.items() if name == "reminders_scan_last_success_timestamp_seconds"
    ]
    assert abs(worker_timestamp - time.time()) < 30
    # LOG_FORMAT=json reaches the worker too: its scan summary is one JSON object on its own line.
    lines = [line for line in (tmp_path / "worker.log").read_text().splitlines() if "scan: claimed=" in line]
    assert lines and all(json.loads(line)["logger"] == "reminders.tasks" for line in lines), lines


def test_ready_turns_503_when_the_worker_stops_scanning_and_200_when_it_resumes(
    tmp_path: Path, settings: pytest.FixtureRequest
) -> None:
    settings.REMINDERS_HEALTH_MAX_SCAN_AGE_SECONDS = 3
    client = Client()

    def status() -> tuple[int, dict[str, object]]:
        response = client.get("/health/ready")
        return response.status_code, json.loads(response.content)

    assert status()[0] == 503  # no worker has ever scanned
    assert status()[1]["failing"] == ["scan"]
    with service(tmp_path) as worker:
        _wait(lambda: status()[0] == 200, timeout=60, what="ready after the worker's first scan")

        os.killpg(worker.pid, signal.SIGSTOP)
        took = _wait(lambda: status()[0] == 503, timeout=30, what="503 once the worker is frozen")
        _code, body = status()
        assert body["failing"] == ["scan"]
        assert body["checks"]["database"]["ok"] and body["checks"]["broker"]["ok"]
        assert "limit 3" in body["checks"]["scan"]["detail"]

        os.killpg(worker.pid, signal.SIGCONT)
        _wait(lambda: status()[0] == 200, timeout=30, what="200 once the worker resumes")
    assert took <= 3 + 2  # within a second or so of the limit
