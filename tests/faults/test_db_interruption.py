"""Scenario 4: PostgreSQL drops the workers' connections mid-batch (`pg_terminate_backend`).

Three interruptions, each on the backends of this test's workers only (found by database name and
application_name): while a scan statement is running (it waits on a lock the test holds, so the kill
lands mid-statement), after a claim was committed, and after a publish before its mark. Pass: the
interrupted statement rolls back, committed claims lease out, the same worker processes reconnect by
themselves (CONN_HEALTH_CHECKS) and deliver everything.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from django.db import connection, transaction

from reminders.models import Occurrence, OccurrenceStatus
from tests.faults import harness

pytestmark = [pytest.mark.faults, pytest.mark.postgres, pytest.mark.rabbitmq]

TOTAL = 1000


def test_it_delivers_everything_when_the_database_drops_the_workers(
    workers: Callable[..., harness.WorkerProcess], fault_queue: str
) -> None:
    pool = [workers(f"db{i}", phase_delay=0.1, REMINDERS_BATCH_SIZE="50") for i in (1, 2)]
    harness.start_together(pool)
    pids = [worker.pid for worker in pool]
    harness.due_occurrences(fault_queue, TOTAL)
    terminated: dict[str, int] = {}

    with harness.Kicker():
        # 1. Mid-statement: hold the table so the workers' next scan statement waits, then kill them there.
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(f"LOCK TABLE {Occurrence._meta.db_table} IN EXCLUSIVE MODE")
            harness.wait_for(
                lambda: harness.waiting_worker_backends() >= 1, timeout=30, what="a blocked scan"
            )
            claimed_before = Occurrence.objects.filter(status=OccurrenceStatus.CLAIMED).count()
            terminated["mid-statement"] = harness.terminate_worker_backends(only_waiting=True)
            # Nothing the killed statements did survived: they held no claim they could have committed.
            # Read while the lock still holds and once their backends have exited: after it is released,
            # a worker whose statement was not waiting yet (or one reconnected) claims a batch, rightly.
            assert Occurrence.objects.filter(status=OccurrenceStatus.CLAIMED).count() == claimed_before
        # 2. and 3. Between the steps of a batch.
        for point in ("claimed", "published"):
            worker = pool[0] if point == "claimed" else pool[1]
            assert worker.wait_phase(point, after=worker.count(point), timeout=30), worker.log_tail()
            terminated[point] = harness.terminate_worker_backends(worker=worker)
        harness.wait_for(lambda: harness.all_delivered(TOTAL), timeout=90, what="every occurrence delivered")

    assert all(count >= 1 for count in terminated.values()), terminated
    assert [worker.pid for worker in pool] == pids and all(w.alive for w in pool), (
        "a worker had to be restarted"
    )
    assert harness.status_counts() == {OccurrenceStatus.DELIVERED: TOTAL}
    arrivals = harness.read_queue(fault_queue, expect=TOTAL)
    harness.assert_every_occurrence_arrived(arrivals, TOTAL)
    leased_out = Occurrence.objects.filter(attempts__gt=1).count()
    harness.record(
        "4. database interruption",
        f"pg_terminate_backend on the workers' backends x {len(terminated)}: mid-statement (lock wait), "
        "after claim, after publish before mark",
        f"{TOTAL}/{TOTAL} delivered by the same 2 processes (reconnected by themselves); interrupted "
        f"statement rolled back; {leased_out} re-claimed after lease expiry; {arrivals.duplicates} "
        "duplicates (same message_id); 0 failed",
    )


def test_it_hands_back_a_batch_stranded_by_a_database_error_within_seconds(
    workers: Callable[..., harness.WorkerProcess], fault_queue: str
) -> None:
    """Issue 19, defect 4: with a 60 s lease, terminating the worker's backend right after a claim was
    committed (the next scan statement fails) or right after a publish (the mark fails) must cost seconds:
    the worker hands back what it has not published and marks what it has, on a fresh connection."""
    total = 300
    worker = workers("stranded", phase_delay=0.3, REMINDERS_BATCH_SIZE="50", REMINDERS_LEASE_SECONDS="60")
    worker.start()
    harness.due_occurrences(fault_queue, total)
    terminated: dict[str, int] = {}

    with harness.Kicker():
        for point in ("claimed", "published"):
            assert worker.wait_phase(point, after=worker.count(point), timeout=30), worker.log_tail()
            terminated[point] = harness.terminate_worker_backends(worker=worker)
        started = time.monotonic()
        harness.wait_for(
            lambda: harness.all_delivered(total), timeout=20, what="every occurrence delivered", worker=worker
        )
        recovered_in = time.monotonic() - started

    assert all(count >= 1 for count in terminated.values()), terminated
    assert worker.alive and worker.starts == 1
    arrivals = harness.read_queue(fault_queue, expect=total)
    harness.assert_every_occurrence_arrived(arrivals, total)
    # Published rows were marked after the error, not re-sent after a lease: no duplicate on the queue.
    assert arrivals.duplicates == 0
    # Nothing waited for its lease to run out: every row was claimed once (a hand-back refunds the attempt).
    assert not Occurrence.objects.filter(attempts__gt=1).exists()
    harness.record(
        "4. database error mid-batch (60 s lease)",
        "pg_terminate_backend after a committed claim and after a publish before its mark",
        f"{total}/{total} delivered {recovered_in:.1f} s after the second termination (lease 60 s); "
        f"unpublished rows handed back, published rows marked on a fresh connection; "
        f"{arrivals.duplicates} duplicates",
    )
