"""Scenario 7b: a crash after commit still fires every reminder.

A training is created through the API (committed with its occurrences). A real Celery worker claims its
two due reminders and is killed -9 at one of two points:
- inside the first reminder's handler, its push rows written but not committed;
- after both handlers published their pushes (and recorded them as sent), before the occurrences were
  marked delivered.
A new worker takes the occurrences back once the lease has run out and fires them again: every due
reminder ends `delivered`, and the push queue holds exactly one push per pending player of each reminder,
none twice (in the second case because the Push rows say they were sent, so the re-fire publishes nothing).

How the worker is stopped at a chosen point without a mock: the test holds, in its own uncommitted
transaction, a row the worker is about to write (the handler's `ReminderRun` row; the occurrence rows the
marking updates), so the worker waits on PostgreSQL. The test sees the wait in `pg_stat_activity`, kills
the worker, then lets go; the dead worker's open transaction can then only roll back.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from reminders.models import Occurrence, OccurrenceStatus
from reminders.tasks import scan_due
from tests.clients import api_as
from tests.conftest import drain_queue
from tests.factories import WELLNESS
from tests.fault_table import record
from tests.trainings_faults.conftest import Processes, ready_count, training_via_api, wait_for
from trainings.models import Player, Push, PushStatus, ReminderRule, ReminderRun, Team

pytestmark = [
    pytest.mark.faults,
    pytest.mark.postgres,
    pytest.mark.rabbitmq,
    pytest.mark.django_db(transaction=True),
]

# The shortest lease that still delivers: the dispatcher stops starting chunks when less than 5 s of the
# lease is left (reminders/engine/dispatch.py _LEASE_MARGIN), so a 5 s lease would release every claim unsent.
LEASE_SECONDS = "8"


@pytest.fixture
def connect() -> Iterator[Callable[[], psycopg.Connection[Any]]]:
    """Opens more connections to the test database, each with a transaction the test controls."""
    db = settings.DATABASES["default"]
    opened: list[psycopg.Connection[Any]] = []

    def open_one() -> psycopg.Connection[Any]:
        conn = psycopg.connect(
            host=db["HOST"] or "127.0.0.1", port=db["PORT"] or 5432, user=db["USER"], dbname=db["NAME"]
        )
        opened.append(conn)
        return conn

    yield open_one
    for conn in opened:
        conn.rollback()
        conn.close()


def _backend_waiting_to(statement: str) -> bool:
    """Whether some backend waits on a lock while running a statement that starts with `statement`."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            " AND query LIKE %s",
            [statement.replace("%", "") + "%"],
        )
        return cursor.fetchone() is not None


def _terminate_backends_waiting() -> None:
    """End every backend of this database that waits on a lock (the killed worker's)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        )


def _kick() -> None:
    scan_due.apply_async(expires=3)  # what beat does every second


INSIDE_HANDLER = "inside the handler"
AFTER_PUBLISH = "after the pushes went out"


@pytest.mark.parametrize("kill_point", [INSIDE_HANDLER, AFTER_PUBLISH])
def test_a_worker_killed_while_firing_loses_no_reminder_and_duplicates_no_push(
    kill_point: str,
    coach: Any,
    team: Team,
    push_queue: str,
    processes: Processes,
    connect: Callable[[], psycopg.Connection[Any]],
) -> None:
    # Two reminders due a few seconds from now: the invitation and the pre-questionnaire, both 15 min ahead.
    ReminderRule.objects.filter(slug__in=["invitation", "pre-questionnaire"]).update(offsets=["15m"])
    engine = {"REMINDERS_LEASE_SECONDS": LEASE_SECONDS, "REMINDERS_SCAN_SECONDS": "1"}
    first_worker = processes.worker("worker-1", **engine)

    api = api_as(coach)
    start = (timezone.now() + dt.timedelta(minutes=15, seconds=3)).replace(microsecond=0)
    url = f"/api/trainings/{training_via_api(api, team, start)}"
    player = {p.name: p.pk for p in Player.objects.all()}
    for path, answer in [
        ("invitation", {"player": player["Alice"], "status": "ACCEPTED"}),
        ("invitation", {"player": player["Bruno"], "status": "DENIED"}),
        ("answers", {"player": player["Chloe"], "phase": "PRE", "answers": WELLNESS}),
    ]:
        assert api.post(f"{url}/{path}/", answer, format="json").status_code in (200, 201)
    due = {
        o.job.key.rsplit("-", 1)[-1] if o.job.key.endswith("invitation") else "pre": o
        for o in Occurrence.objects.select_related("job").filter(
            fire_at__lte=start - dt.timedelta(minutes=15)
        )
    }
    assert set(due) == {"invitation", "pre"}
    expected = {
        (due["invitation"].idempotency_key, player["Chloe"]),
        (due["invitation"].idempotency_key, player["Dan"]),
        (due["pre"].idempotency_key, player["Alice"]),
        (due["pre"].idempotency_key, player["Dan"]),
    }

    ids = [o.pk for o in due.values()]

    # Hold the handler's ReminderRun rows: whichever reminder the worker runs first waits on us.
    runs_held = connect()
    with runs_held.cursor() as cursor:
        for occurrence in due.values():
            cursor.execute(
                "INSERT INTO trainings_reminderrun (occurrence_key, fire_at, outcome, recipients, attempts,"
                " ran_at) VALUES (%s, %s, 'sent', 0, 1, now())",
                (occurrence.idempotency_key, occurrence.fire_at),
            )
    deadline = time.monotonic() + 30
    while not _backend_waiting_to('INSERT INTO "trainings_reminderrun"'):
        assert first_worker.poll() is None, processes.log("worker-1")
        assert time.monotonic() < deadline, "the worker never ran the reminder:\n" + processes.log("worker-1")
        _kick()
        time.sleep(0.3)
    occurrences_held = connect()
    if kill_point == AFTER_PUBLISH:
        # Now hold the occurrence rows (claimed, committed, locked by nobody) and let the handlers run:
        # they publish and record their pushes, and the worker waits to mark the occurrences delivered.
        occurrences_held.execute("SELECT id FROM reminders_occurrence WHERE id = ANY(%s) FOR UPDATE", [ids])
        runs_held.rollback()
        wait_for(
            lambda: _backend_waiting_to('UPDATE "reminders_occurrence"'),
            timeout=20,
            what="the worker to mark the occurrences",
        )
        assert ready_count(push_queue) > 0  # every push is out before the crash (many to a message)
        assert Push.objects.filter(status=PushStatus.SENT).count() == len(expected)
    os.kill(first_worker.pid, signal.SIGKILL)
    first_worker.wait(timeout=10)
    killed_at = time.monotonic()
    in_flight = list(Occurrence.objects.filter(pk__in=ids).values_list("status", "attempts"))
    assert in_flight == [(OccurrenceStatus.CLAIMED, 1)] * 2
    # PostgreSQL notices a dead client only when it next talks to it: a statement the worker had sent in
    # autocommit (the mark of a chunk without schedules) would still run, and commit, once our lock goes.
    # The scenario is a crash before the mark, so its backends end with it, as client_connection_check_
    # interval would end them in production.
    _terminate_backends_waiting()
    if kill_point == INSIDE_HANDLER:
        assert not Push.objects.exists()  # written by the handler, never committed
    runs_held.rollback()  # the dead worker's transaction can only end in a rollback now
    occurrences_held.rollback()

    processes.worker("worker-2", **engine)

    def all_delivered() -> bool:
        _kick()
        return not Occurrence.objects.filter(
            pk__in=[o.pk for o in due.values()],
            status__in=[OccurrenceStatus.SCHEDULED, OccurrenceStatus.CLAIMED],
        ).exists()

    wait_for(all_delivered, timeout=40, every=0.5, what="the new worker to fire both reminders")
    recovered_after = time.monotonic() - killed_at
    messages = drain_queue(push_queue, expect=len(expected), timeout=10)
    messages += drain_queue(push_queue, timeout=2)  # anything more would be a duplicate

    for occurrence in due.values():
        occurrence.refresh_from_db()
        assert (occurrence.status, occurrence.attempts) == (OccurrenceStatus.DELIVERED, 2)
    bodies = [json.loads(m.body) for m in messages]
    pairs = Counter((b["idempotency_key"].rsplit(".", 1)[0], b["player"]) for b in bodies)
    assert pairs == dict.fromkeys(expected, 1), processes.log("worker-2")
    assert all(
        m.properties["message_id"] == b["idempotency_key"] for m, b in zip(messages, bodies, strict=True)
    )
    assert Push.objects.filter(status=PushStatus.SENT).count() == Push.objects.count() == len(expected)
    runs = ReminderRun.objects.filter(occurrence_key__in=[o.idempotency_key for o in due.values()])
    assert sorted(runs.values_list("outcome", "recipients", "attempts")) == [("sent", 2, 2)] * 2
    timeline = [e for e in api.get(f"{url}/timeline/").json() if e["status"] == "delivered"]
    assert [(e["rule"], e["pushes_published"]) for e in sorted(timeline, key=lambda e: e["rule"])] == [
        ("invitation", 2),
        ("pre-questionnaire", 2),
    ]
    if kill_point == INSIDE_HANDLER:
        scenario = "Celery worker killed -9 inside a training reminder's handler (after the API commit)"
        fault = "SIGKILL of `celery worker` while its handler waits on PostgreSQL with uncommitted push rows"
    else:
        scenario = "Celery worker killed -9 after publishing a reminder's pushes, before marking it delivered"
        fault = "SIGKILL of `celery worker` while it waits on PostgreSQL to mark the occurrences"
    record(
        scenario=scenario,
        fault=f"{fault}; lease {LEASE_SECONDS} s",
        result=f"a new worker re-claimed both due reminders after the lease "
        f"({recovered_after:.1f} s after the kill): 2/2 delivered (attempts 2), {len(messages)} pushes "
        f"for exactly the {len(expected)} pending (reminder, player) pairs, 0 duplicated, 0 lost",
    )
