"""What asynchronous replication loses at a failover, and what the service does about it (the runbook's
"PostgreSQL failover, and restoring after it", step 2).

The standby stops receiving (it is stopped), so the primary runs on alone, as a primary whose standby lags
does: a worker delivers a first burst there (delivered marks the standby never gets) and a second burst of
jobs is created there. Then the primary is stopped with `-m immediate`, the standby started and promoted.

Pass, as the runbook says: the worker, on libpq's host list, finds the promoted standby by itself; the
deliveries whose marks were lost go out again with the same message ids (a consumer de-duplicating on
message_id sees each once) and nothing of what the standby had is lost; the jobs created in the lost window
are gone from the new primary (the caller that created them must create them again).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings

from bench.processes import read_queue
from tests.faults import harness
from tests.faults.pg_pair import PgPair, PgTemplate

pytestmark = [pytest.mark.faults, pytest.mark.clusters, pytest.mark.rabbitmq]

KEPT, LOST = 300, 100


@pytest.fixture
def pair(pg_template: PgTemplate) -> Iterator[PgPair]:
    made = PgPair(pg_template)
    yield made
    made.remove()


def seed(url: str, queue: str, count: int, in_seconds: float) -> None:
    subprocess.run(  # the jobs, as the API would create them
        [
            sys.executable,
            "-m",
            "tests.faults.cluster_seed",
            "engine",
            queue,
            str(count),
            str(in_seconds),
            "2",
        ],
        env={**os.environ, "DATABASE_URL": url},
        check=True,
        timeout=300,
    )


def test_what_the_standby_never_received_is_repeated_or_gone_as_the_runbook_says(
    pair: PgPair, tmp_path: Path
) -> None:
    assert pair.standby is not None
    kept, lost = f"test.tail.kept.{uuid.uuid4().hex[:8]}", f"test.tail.lost.{uuid.uuid4().hex[:8]}"
    worker = harness.WorkerProcess(
        name="tail", workdir=tmp_path, env={"DATABASE_URL": pair.url("fault-tail")}
    )
    try:
        worker.start()
        seed(pair.url(), kept, KEPT, 8)  # due in 8 s: on the standby before it stops
        lsn = pair.primary.value("SELECT pg_current_wal_lsn()::text")
        harness.wait_for(
            lambda: pair.standby.value("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [lsn]),
            timeout=30,
            what="the standby to replay the first burst",
        )
        pair.standby.stop()  # from here on the primary commits what the standby never gets
        seed(pair.url(), lost, LOST, 3600)  # created in the window, due in an hour
        with harness.Kicker():
            harness.wait_for(
                lambda: (
                    pair.primary.value("SELECT count(*) FROM reminders_occurrence WHERE status = 'delivered'")
                    == KEPT
                ),
                timeout=120,
                what="the first burst delivered on the primary",
                worker=worker,
            )
            pair.primary.stop("immediate")
            pair.standby.start()
            pair.standby.promote()
            harness.wait_for(
                lambda: (
                    pair.standby.value("SELECT count(*) FROM reminders_occurrence WHERE status = 'delivered'")
                    == KEPT
                ),
                timeout=120,
                what="the first burst delivered again on the promoted standby",
                worker=worker,
            )
        assert worker.alive and worker.starts == 1, worker.log_tail()
        new = pair.standby
        gone = new.value("SELECT count(*) FROM reminders_job WHERE target = %s", [lost])
        assert gone == 0  # created in the lost window: not on the new primary
        arrivals = read_queue(settings.CELERY_BROKER_URL, kept, expect=2 * KEPT, timeout=60)
        keys = {k for (k,) in new.connect().execute("SELECT idempotency_key FROM reminders_occurrence")}
        assert set(arrivals.by_message_id) == keys and len(keys) == KEPT
        assert arrivals.duplicates == KEPT  # every lost mark: one repeat, under the same message id
        time.sleep(0.1)
    finally:
        worker.stop()
        harness.delete_queue(kept)
        harness.delete_queue(lost)
    harness.record(
        "PostgreSQL failover losing the unreplicated tail",
        f"standby stopped; on the primary alone {KEPT} occurrences delivered and {LOST} new jobs created; "
        "primary stopped -m immediate; standby started and promoted",
        f"the worker found the new primary by itself; {KEPT} lost delivered marks: each occurrence delivered "
        f"again, {arrivals.duplicates} repeats all under their first message_id, 0 lost; the {LOST} jobs "
        "created in the window are gone (runbook step 2: their callers create them again)",
    )
