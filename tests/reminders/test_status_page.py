"""The operator's status page: backlog, lateness, per-minute deliveries, failures (with retry), last scan,
push queue; operators only, and a coach gets a page (not a traceback)."""

from __future__ import annotations

import datetime as dt
import logging
import re
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from reminders.engine.dispatch import ScanResult
from reminders.models import Occurrence, OccurrenceStatus, ScanMinute
from reminders.ops.figures import engine_status, scan_record
from reminders.tasks import scan_due
from tests.factories import OccurrenceFactory, UserFactory
from trainings.access import coach_group_ensure

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def _delivered(late_ms: int, *, ago: dt.timedelta) -> Occurrence:
    fire = timezone.now() - ago
    delivered = fire + dt.timedelta(milliseconds=late_ms)
    return OccurrenceFactory(
        status=OccurrenceStatus.DELIVERED, fire_at=fire, next_attempt_at=fire, delivered_at=delivered,
        finished_at=delivered, attempts=1,
    )  # fmt: skip


def _figure(page: str, name: str) -> str:
    match = re.search(rf'data-figure="{name}"[^>]*>([^<]*)<', page)
    assert match, name
    return match.group(1).strip()


def test_it_shows_the_backlog_and_lateness_the_database_holds(operator: Client) -> None:
    now = timezone.now()
    for minutes in (3, 2, 1):  # three due rows, the oldest due 3 minutes ago
        OccurrenceFactory(
            fire_at=now - dt.timedelta(minutes=minutes), next_attempt_at=now - dt.timedelta(minutes=minutes)
        )
    OccurrenceFactory(
        fire_at=now + dt.timedelta(hours=1), next_attempt_at=now + dt.timedelta(hours=1)
    )  # not due
    for late in (10, 20, 30):  # p50 20 ms in the last 5 minutes
        _delivered(late, ago=dt.timedelta(minutes=1))
    _delivered(4000, ago=dt.timedelta(minutes=30))  # only in the last hour's figures

    page = operator.get("/admin/status/").content.decode()

    assert _figure(page, "due") == "3"
    assert _figure(page, "oldest-age").startswith("3 min")
    last5 = page.split('data-window="last 5 min"', 1)[1]
    assert _figure(last5, "p50") == "20 ms"
    hour = page.split('data-window="last hour"', 1)[1]
    assert _figure(hour, "p50") == "25 ms"  # (20 + 30) / 2 over four values
    assert _figure(hour, "p99").endswith(" s")  # the 4 s one dominates p99
    assert 'http-equiv="refresh"' in page
    assert "<svg" in page and "http://" not in page.split("<svg", 1)[1].split("</svg>", 1)[0].replace(
        "http://www.w3.org/2000/svg", ""
    )


def test_a_scan_run_records_its_minute_and_the_chart_and_last_scan_show_it(operator: Client) -> None:
    scan_due()  # the real task: records even an empty scan
    row = ScanMinute.objects.get()
    assert row.scans == 1 and row.last_worker
    scan_record(result=ScanResult(claimed=7, delivered=5, failed=2), worker="w2")
    status = engine_status()
    assert sum(p.delivered for p in status.per_minute) == 5
    assert status.last_worker == "w2"
    page = operator.get("/admin/status/").content.decode()
    assert "(5 occurrences delivered" in page and "5 occurrence(s) delivered</title>" in page
    assert "2 occurrence(s) failed</title>" in page
    assert "ago, w2" in _figure(page, "last-scan") or "w2" in page


def test_failures_are_grouped_by_error_link_to_the_list_and_can_be_retried(operator: Client) -> None:
    now = timezone.now()
    for _ in range(3):
        OccurrenceFactory(
            status=OccurrenceStatus.FAILED, finished_at=now, last_error="HTTP 503 from endpoint"
        )
    OccurrenceFactory(status=OccurrenceStatus.FAILED, finished_at=now, last_error="connection refused")
    OccurrenceFactory(
        status=OccurrenceStatus.FAILED,
        finished_at=now - dt.timedelta(days=2),
        last_error="HTTP 503 from endpoint",
    )  # older than 24 h
    page = operator.get("/admin/status/").content.decode()
    assert re.search(r"HTTP 503 from endpoint</a></td><td>3<", page)
    link = "/admin/reminders/occurrence/?status__exact=failed&amp;error=HTTP+503+from+endpoint"
    assert link in page
    listing = operator.get(link.replace("&amp;", "&")).content.decode()
    assert listing.count("HTTP 503 from endpoint") >= 4 and "connection refused" not in listing

    response = operator.post("/admin/status/retry/", {"error": "HTTP 503 from endpoint"}, follow=True)
    assert "3 failed occurrence(s) due again now." in response.content.decode()
    assert Occurrence.objects.filter(status=OccurrenceStatus.SCHEDULED).count() == 3
    assert Occurrence.objects.filter(status=OccurrenceStatus.FAILED).count() == 2


@pytest.mark.rabbitmq
def test_push_queue_depth_comes_from_rabbitmq_and_is_unknown_when_the_broker_does_not_answer(
    operator: Client, settings: Any, queue_name: str
) -> None:
    from kombu import Connection, Producer

    settings.TRAININGS_PUSH_QUEUE = queue_name
    with Connection(settings.REMINDERS_CALLBACK_BROKER_URL) as broker:
        producer = Producer(broker.default_channel)
        from delivery.gateway.consumer import push_queue

        for n in range(2):
            producer.publish({"n": n}, routing_key=queue_name, declare=[push_queue()])
    page = operator.get("/admin/status/").content.decode()
    assert _figure(page, "push-depth").startswith("2 messages waiting (up to 100 pushes each)")
    settings.REMINDERS_CALLBACK_BROKER_URL = "amqp://guest:guest@127.0.0.1:1//"  # nothing listens there
    page = operator.get("/admin/status/").content.decode()
    assert _figure(page, "push-depth") == "unknown"  # said so, not a zero


def test_operators_find_it_on_the_index_and_a_coach_gets_a_friendly_403_without_traceback(
    operator: Client, caplog: pytest.LogCaptureFixture
) -> None:
    assert 'href="/admin/status/"' in operator.get("/admin/").content.decode()
    coach = UserFactory(is_staff=True)
    coach.groups.add(coach_group_ensure())
    client = Client()
    client.force_login(coach)
    assert 'href="/admin/status/"' not in client.get("/admin/").content.decode()
    with caplog.at_level(logging.WARNING, logger="django.request"):
        for url in ("/admin/status/", "/admin/reminders/occurrence/?state=upcoming"):
            response = client.get(url)
            assert response.status_code == 403
            assert "This page is not available to you" in response.content.decode()
    records = [r for r in caplog.records if r.name == "django.request"]
    assert records and all(r.exc_info is None for r in records)
