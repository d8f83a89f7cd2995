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


HELD = 200


def test_rows_held_for_their_instant_by_a_killed_worker_are_returned_by_the_reaper(
    workers: Callable[..., harness.WorkerProcess], fault_queue: str
) -> None:
    """The look-ahead scan claims rows before they are due and holds them in memory until their instant.
    Killed while holding them, it published none; the lease is what brings them back: after it expires,
    a scan's reaper returns them and they are delivered (a second attempt), none lost, none early."""
    # Due from 3 s on, spread over half a second: claimed ~1.2 s before (the look-ahead), held, not sent.
    job = harness.due_occurrences(fault_queue, HELD, in_seconds=3.0, spread_seconds=0.5)
    victim = workers("holder", phase_delay=1.0, REMINDERS_LOOKAHEAD_SECONDS="1.2")
    victim.start()
    with harness.Kicker():
        assert victim.wait_phase("claimed", after=0, timeout=20), victim.log_tail()
        victim.kill()  # within the probe's pause after the claim: every claimed row is held, none sent
        killed_at = time.monotonic()
        held = Occurrence.objects.filter(job=job, status=OccurrenceStatus.CLAIMED).count()
        assert held > 0
        assert harness.status_counts().get(OccurrenceStatus.DELIVERED, 0) == 0
        victim.start()
        harness.wait_for(lambda: harness.all_delivered(HELD), timeout=60, what="every held row delivered")
    assert time.monotonic() - killed_at >= harness.LEASE_SECONDS - 1  # not before the lease let them go
    assert harness.status_counts() == {OccurrenceStatus.DELIVERED: HELD}
    assert Occurrence.objects.filter(job=job, attempts=2).count() >= held
    arrivals = harness.read_queue(fault_queue, expect=HELD)
    harness.assert_every_occurrence_arrived(arrivals, HELD)
    harness.record(
        "1. worker killed while holding",
        f"1 worker, look-ahead 1.2 s, {HELD} due in 3 s; kill -9 after the claim, before their instants",
        f"{held} held rows returned by the reaper after the {harness.LEASE_SECONDS} s lease, "
        f"{HELD}/{HELD} delivered, 0 lost",
    )
