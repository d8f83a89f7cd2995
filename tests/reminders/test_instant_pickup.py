"""Instant pickup (PostgreSQL): a committed write of something due soon NOTIFYs, once per transaction, and
a scan waiting on LISTEN claims it without waiting for a poll."""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.db import connection, connections, transaction
from django.utils import timezone

from reminders.engine.lookahead import occurrences_fire_for
from reminders.engine.wakeup import CHANNEL
from reminders.jobs import Callback, JobSpec, job_upsert, jobs_bulk_upsert
from reminders.models import CallbackType, Occurrence, OccurrenceStatus
from reminders.queries import DUE_LISTEN
from tests.conftest import drain_queue

pytestmark = [pytest.mark.postgres, pytest.mark.rabbitmq, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _look_ahead(settings: Any) -> None:
    settings.REMINDERS_LOOKAHEAD_SECONDS = 2.0
    settings.REMINDERS_POLL_SECONDS = 30.0  # a poll never runs within a test


@pytest.fixture
def listening() -> Iterator[psycopg.Connection[Any]]:
    """A LISTEN connection of our own to the test database, to count what was sent."""
    config = connection.settings_dict
    conn = psycopg.connect(
        dbname=config["NAME"],
        user=config["USER"] or None,
        host=config["HOST"] or None,
        port=config["PORT"] or None,
        password=config["PASSWORD"] or None,
        autocommit=True,
    )
    conn.execute(f"LISTEN {CHANNEL}")
    yield conn
    conn.close()


SENTINEL = "tests.instant_pickup.sentinel"


def _received(conn: psycopg.Connection[Any]) -> int:
    """How many notifications were sent before now. PostgreSQL delivers notifications in commit order, so
    this connection sends a sentinel and counts up to it: every earlier one is counted however late a loaded
    machine delivers it (a fixed sleep could count none and pass an upper bound it should have failed)."""
    conn.execute("SELECT pg_notify(%s, %s)", [CHANNEL, SENTINEL])
    for count, notify in enumerate(conn.notifies(timeout=60)):
        if notify.payload == SENTINEL:
            return count
    raise AssertionError("the sentinel notification never came back within 60 s")


def _a_scan_is_listening() -> bool:
    """A backend of the test database other than ours has run the scan's LISTEN."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid() AND query = %s",
            [DUE_LISTEN],
        )
        return bool(cursor.fetchone()[0])


def _callback(queue: str) -> Callback:
    return Callback(type=CallbackType.RABBITMQ, target=queue, payload={"n": 1})


def test_a_bulk_write_of_10000_due_rows_sends_a_handful_of_notifications(listening, queue_name) -> None:
    now = timezone.now()
    # 5,000 new jobs (one COPY) and, in the same request, 20 existing keys replaced one by one.
    for i in range(20):
        job_upsert(key=f"old-{i}", schedules=[now + dt.timedelta(hours=1)], callback=_callback(queue_name))
    assert _received(listening) == 0  # due in an hour: nothing for a scan to wake for
    twice = [now, now + dt.timedelta(seconds=1)]
    specs = [JobSpec(key=f"bulk-{i}", schedules=twice, callback=_callback(queue_name)) for i in range(5000)]
    specs += [JobSpec(key=f"old-{i}", schedules=[now], callback=_callback(queue_name)) for i in range(20)]

    result = jobs_bulk_upsert(specs=specs)

    assert result.instants == 10_020
    assert _received(listening) <= 3


def test_nothing_is_sent_for_a_write_rolled_back_or_due_beyond_the_look_ahead(listening, queue_name) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        job_upsert(key="rolled-back", schedules=[timezone.now()], callback=_callback(queue_name))
        raise RuntimeError
    job_upsert(
        key="later", schedules=[timezone.now() + dt.timedelta(minutes=5)], callback=_callback(queue_name)
    )
    assert _received(listening) == 0


def test_a_job_posted_due_now_is_picked_up_by_a_waiting_scan_without_a_poll(queue_name) -> None:
    results: list[Any] = []

    def scan() -> None:
        try:
            results.append(occurrences_fire_for(seconds=4.0))
        finally:
            connections.close_all()

    worker = threading.Thread(target=scan)
    worker.start()
    # The scan made its first claim (empty) and waits on LISTEN; its next poll is 30 s away. Waited for,
    # not slept on: a write committed before the LISTEN would wake nobody, however loaded the machine.
    deadline = time.monotonic() + 30
    while not _a_scan_is_listening():
        assert time.monotonic() < deadline, "the scan never started listening"
        time.sleep(0.01)
    posted = time.monotonic()
    job_upsert(key="now", schedules=[timezone.now()], callback=_callback(queue_name))

    messages = drain_queue(queue_name, expect=1, timeout=2.0)
    arrived = time.monotonic() - posted
    worker.join()

    assert len(messages) == 1
    assert arrived < 1.0, f"on the queue {arrived:.3f} s after the write: it waited, it was not woken"
    assert Occurrence.objects.get(job__key="now").status == OccurrenceStatus.DELIVERED
    ((totals, _),) = results
    assert (totals.claimed, totals.delivered) == (1, 1)
