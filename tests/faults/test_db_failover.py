"""PostgreSQL fails over while a worker delivers a burst (the runbook's "PostgreSQL failover").

The worker's database connections go through a TCP proxy the test owns. Mid-burst the test cuts it: every
connection is dropped and new ones are refused for a few seconds, which is what a client sees while a
primary goes away and a standby takes over its address; then it lets connections through again. Pass: the
same worker process, never restarted, delivers every occurrence (rows it had claimed come back after their
lease; a row published before the cut and not marked is published again with the same message id), and
nothing is failed or left claimed.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from reminders.models import Occurrence, OccurrenceStatus
from tests.faults import harness

pytestmark = [pytest.mark.faults, pytest.mark.postgres, pytest.mark.rabbitmq]

TOTAL = 600
OUTAGE_SECONDS = 3.0


def test_a_worker_rides_out_a_database_failover_and_delivers_everything(
    workers: Callable[..., harness.WorkerProcess], fault_queue: str
) -> None:
    proxy = harness.TcpProxy(harness.database_address())
    try:
        worker = workers(
            "failover",
            phase_delay=0.05,
            REMINDERS_BATCH_SIZE="50",
            DATABASE_URL=harness.worker_database_url("fault-failover", port=proxy.port),
        )
        worker.start()
        harness.due_occurrences(fault_queue, TOTAL)
        with harness.Kicker():
            assert worker.wait_phase("published", after=0, timeout=30), worker.log_tail()
            proxy.cut()
            time.sleep(0.2)  # a commit the proxy forwarded just before the cut lands first
            cut_at = harness.status_counts()
            time.sleep(OUTAGE_SECONDS)
            # Nothing reached the database while it was away.
            assert harness.status_counts() == cut_at
            proxy.restore()
            harness.wait_for(
                lambda: harness.all_delivered(TOTAL),
                timeout=90,
                what="every occurrence delivered",
                worker=worker,
            )
        assert proxy.dropped >= 1  # the worker's connections were there to be cut
        assert worker.alive and worker.starts == 1, "the worker had to be restarted"
        assert harness.status_counts() == {OccurrenceStatus.DELIVERED: TOTAL}
        arrivals = harness.read_queue(fault_queue, expect=TOTAL)
        harness.assert_every_occurrence_arrived(arrivals, TOTAL)
        reclaimed = Occurrence.objects.filter(attempts__gt=1).count()
    finally:
        proxy.close()
    harness.record(
        "database failover",
        f"the worker's PostgreSQL connections dropped and refused for {OUTAGE_SECONDS:.0f} s mid-burst "
        "(TCP proxy), then let through again",
        f"{TOTAL}/{TOTAL} delivered by the same process (reconnected by itself); claimed at the cut: "
        f"{cut_at.get(OccurrenceStatus.CLAIMED, 0)}; {reclaimed} re-claimed after lease expiry; "
        f"{arrivals.duplicates} duplicates (same message_id); 0 failed",
    )
