"""Scenario 1: a worker is killed (-9) after its claim, mid-publish and after publish before its mark.

Two real Celery workers drain 2,000 due occurrences; one of them is killed at each of those steps, twice,
in a random order, and restarted. Nothing may be lost: every occurrence reaches the queue (at least once,
duplicates under the same message_id), none stays claimed once its lease has expired and a scan ran,
none fails.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from reminders.models import Occurrence, OccurrenceStatus
from tests.faults import harness

pytestmark = [pytest.mark.faults, pytest.mark.postgres, pytest.mark.rabbitmq]

TOTAL = 2000


def test_it_loses_nothing_when_workers_are_killed(
    workers: Callable[..., harness.WorkerProcess], fault_queue: str
) -> None:
    seed, rng = harness.seeded_rng()
    harness.due_occurrences(fault_queue, TOTAL)
    pool = [workers(f"w{i}", phase_delay=0.1, REMINDERS_BATCH_SIZE="50") for i in (1, 2)]
    harness.start_together(pool)

    kills: list[str] = []
    with harness.Kicker():
        for point in harness.shuffled(harness.SCAN_STEPS, 2, rng):
            # A worker still starting up has nothing to interrupt; pick among the ones at work.
            harness.wait_for(lambda: any(w.ready for w in pool), timeout=60, what="a worker to be ready")
            victim = rng.choice([w for w in pool if w.ready])
            if not victim.wait_phase(point, after=victim.count(point), timeout=20):
                break  # the backlog is gone: nothing left to interrupt
            victim.kill()
            kills.append(point)
            victim.start(wait=False)
        last_kill = time.monotonic()
        harness.wait_for(lambda: harness.all_delivered(TOTAL), timeout=90, what="every occurrence delivered")
        # "After lease expiry plus one scan": by now every lease taken before the last kill has expired.
        time.sleep(max(0.0, last_kill + harness.LEASE_SECONDS + 1 - time.monotonic()))

    assert len(kills) >= 4, f"seed {seed}: only {kills} kills happened before the backlog drained"
    assert set(kills) == set(harness.SCAN_STEPS), f"seed {seed}: not every kill point was hit: {kills}"
    counts = harness.status_counts()
    assert counts == {OccurrenceStatus.DELIVERED: TOTAL}, counts
    arrivals = harness.read_queue(fault_queue, expect=TOTAL)
    harness.assert_every_occurrence_arrived(arrivals, TOTAL)
    retried = Occurrence.objects.filter(attempts__gt=1).count()
    harness.record(
        "1. worker killed",
        f"2 workers, {TOTAL} due; kill -9 x {len(kills)}: {' / '.join(harness.SCAN_STEPS[k] for k in kills)}",
        f"{TOTAL}/{TOTAL} delivered, {len(arrivals.messages)} messages ({arrivals.duplicates} duplicates, "
        f"same message_id), {retried} re-claimed after lease expiry, 0 claimed, 0 failed",
    )
