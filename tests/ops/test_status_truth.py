"""The status page shows stuck work and the push side as they are: retrying occurrences grouped by error
with Retry now / Cancel, the gateway's heartbeat age turning amber then red, the push queue's depth on
the filesystem broker too, pushes that reached phones per minute; /health/ready names the gateway."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone
from kombu import Connection, Producer

from delivery.gateway.liveness import gateway_heartbeat, push_minutes_add
from delivery.models import GatewayHeartbeat
from reminders.models import Occurrence, OccurrenceStatus
from reminders.ops.figures import status_queries
from tests.factories import OccurrenceFactory

pytestmark = [pytest.mark.django_db]


def _figure(page: str, name: str) -> str:
    match = re.search(rf'data-figure="{name}"[^>]*>([^<]*)<', page)
    assert match, name
    return match.group(1).strip()


def _retrying(error: str, *, minutes: int) -> Occurrence:
    fire = timezone.now() - dt.timedelta(minutes=minutes)
    return OccurrenceFactory(fire_at=fire, next_attempt_at=timezone.now() + dt.timedelta(minutes=5),
                             attempts=2, last_error=error)  # fmt: skip


def test_retrying_occurrences_are_counted_grouped_and_can_be_retried_or_cancelled(operator: Client) -> None:
    for minutes in (7, 3):
        _retrying("HTTP 503 from the endpoint", minutes=minutes)
    timeout = _retrying("timeout after 10 s", minutes=1)
    OccurrenceFactory(attempts=0)  # scheduled, never tried: not retrying
    page = operator.get("/admin/status/").content.decode()
    section = page.split('id="retrying"', 1)[1].split("</section>", 1)[0]
    assert _figure(page, "retrying") == "3"
    assert "HTTP 503 from the endpoint</a></td><td>2</td>" in section
    assert "timeout after 10 s</a></td><td>1</td>" in section
    assert "Retry now" in section and "Cancel" in section

    response = operator.post("/admin/status/retrying/", {"error": "HTTP 503", "action": "retry"}, follow=True)
    assert "2 retrying occurrence(s) due now." in response.content.decode()
    due = Occurrence.objects.filter(last_error__startswith="HTTP 503")
    assert all(o.next_attempt_at <= timezone.now() for o in due)
    operator.post("/admin/status/retrying/", {"error": "timeout", "action": "cancel"})
    timeout.refresh_from_db()
    assert timeout.status == OccurrenceStatus.CANCELLED
    assert operator.post("/admin/status/retrying/", {"error": "x", "action": "drop"}).status_code == 400


def test_the_gateway_heartbeat_turns_amber_then_red_and_health_ready_names_it(
    operator: Client, settings: Any
) -> None:
    from reminders.ops import health

    health.scan_finished(worker="worker@test")
    assert "push_gateway" not in Client().get("/health/ready").json()["checks"]  # none ever seen: auto is off
    page = operator.get("/admin/status/").content.decode()
    assert "never seen" in _figure(page, "gateway")

    gateway_heartbeat(name="gw@test", force=True)
    page = operator.get("/admin/status/").content.decode()
    assert re.search(r'data-level="ok"', page) and "alive: last heartbeat" in _figure(page, "gateway")
    ready = Client().get("/health/ready").json()
    assert (
        ready["checks"]["push_gateway"]["ok"] is True
        and "gw@test" in ready["checks"]["push_gateway"]["detail"]
    )

    GatewayHeartbeat.objects.update(seen_at=timezone.now() - dt.timedelta(seconds=30))
    page = operator.get("/admin/status/").content.decode()
    assert 'data-level="amber"' in page and _figure(page, "gateway").startswith("late: last heartbeat 30")
    assert Client().get("/health/ready").status_code == 200  # late, not down

    GatewayHeartbeat.objects.update(seen_at=timezone.now() - dt.timedelta(minutes=6))
    page = operator.get("/admin/status/").content.decode()
    assert 'data-level="red"' in page and _figure(page, "gateway").startswith("down: last heartbeat 6 min")
    response = Client().get("/health/ready")
    assert response.status_code == 503 and response.json()["failing"] == ["push_gateway"]
    settings.TRAININGS_HEALTH_GATEWAY = "off"
    assert Client().get("/health/ready").status_code == 200


def test_the_push_queue_depth_is_read_on_the_filesystem_broker_too(
    operator: Client, settings: Any, tmp_path: Path
) -> None:
    folders = {name: str(tmp_path / name) for name in ("queue", "processed", "control")}
    for folder in folders.values():
        Path(folder).mkdir()
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": folders["queue"], "data_folder_out": folders["queue"],
        "processed_folder": folders["processed"], "control_folder": folders["control"],
    }  # fmt: skip
    settings.REMINDERS_CALLBACK_BROKER_URL = "filesystem://"
    with Connection("filesystem://", transport_options=settings.CELERY_BROKER_TRANSPORT_OPTIONS) as broker:
        producer = Producer(broker.default_channel)
        for n in range(3):
            producer.publish({"n": n}, routing_key=settings.TRAININGS_PUSH_QUEUE)
    page = operator.get("/admin/status/").content.decode()
    assert _figure(page, "push-depth") == "3 messages waiting (up to 100 pushes each)"
    assert "consumers: unknown on this broker" in page


def test_pushes_reaching_phones_per_minute_are_charted_beside_deliveries(operator: Client) -> None:
    now = timezone.now()
    push_minutes_add(at=now - dt.timedelta(minutes=2), accepted=40, not_reached=2)
    push_minutes_add(at=now - dt.timedelta(minutes=2), accepted=10, not_reached=0)  # a second gateway adds
    push_minutes_add(at=now - dt.timedelta(minutes=1), accepted=7, not_reached=1)
    page = operator.get("/admin/status/").content.decode()
    assert _figure(page, "reached-hour") == "57"
    assert "3 did not" in page
    assert page.count('<circle class="reached"') == 2
    assert "50 push(es) reached a phone, 2 did not" in page
    assert "pushes reaching phones (device sends accepted)" in page  # the legend


@pytest.mark.postgres
def test_the_retrying_query_walks_its_partial_index() -> None:
    sql, params = status_queries(now=timezone.now())["retrying"]
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN {sql}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "occurrence_retrying_idx" in plan, plan
