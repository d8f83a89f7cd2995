"""Scenario 3: the broker goes away during a burst (its connections drop and it refuses new ones for a
while, as during a RabbitMQ restart), three times, at a random step of a publish.

Both of the worker's broker connections (Celery's consumer and the callback publisher) run through a TCP
proxy this test owns, so the outage hits only this test's traffic on a shared broker; the kicks (beat's
stand-in) go straight to the broker and wait there until the worker is back.

Pass: every row marked delivered is on the durable queue; the rest were retried with backoff and arrived;
the worker reconnected by itself; nothing lost, nothing failed.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from reminders.models import Occurrence, OccurrenceStatus
from tests.faults import harness

pytestmark = [pytest.mark.faults, pytest.mark.postgres, pytest.mark.rabbitmq]

TOTAL = 2000
OUTAGE_SECONDS = 2.0


def test_it_loses_nothing_when_the_broker_drops_during_a_burst(
    workers: Callable[..., harness.WorkerProcess], fault_queue: str
) -> None:
    seed, rng = harness.seeded_rng()
    proxy = harness.TcpProxy(harness.broker_address())
    worker = workers(
        "burst",
        phase_delay=0.05,
        REMINDERS_BATCH_SIZE="100",
        CELERY_BROKER_URL=harness.broker_url_via(proxy.port),
        REMINDERS_CALLBACK_BROKER_URL=harness.broker_url_via(proxy.port),
        REMINDERS_RETRY_BASE_SECONDS="0.2",
        REMINDERS_RETRY_MAX_SECONDS="1",
        REMINDERS_MAX_ATTEMPTS="30",
    )
    worker.start()
    harness.due_occurrences(fault_queue, TOTAL)

    marked_at_cuts: list[set[str]] = []
    cuts: list[str] = []
    try:
        with harness.Kicker():
            for point in rng.sample(list(harness.SCAN_STEPS), len(harness.SCAN_STEPS)):
                if not worker.wait_phase(point, after=worker.count(point), timeout=20):
                    break
                proxy.cut()
                cuts.append(harness.SCAN_STEPS[point])
                marked_at_cuts.append(
                    set(
                        Occurrence.objects.filter(status=OccurrenceStatus.DELIVERED).values_list(
                            "idempotency_key", flat=True
                        )
                    )
                )
                time.sleep(OUTAGE_SECONDS)
                proxy.restore()
            harness.wait_for(
                lambda: harness.all_delivered(TOTAL), timeout=90, what="every occurrence delivered"
            )
    finally:
        proxy.close()

    assert proxy.cuts == len(harness.SCAN_STEPS), f"seed {seed}: the burst ended before every cut"
    assert proxy.dropped >= 1, "no broker connection was open to drop"
    assert worker.alive, "the worker died instead of retrying"
    assert harness.status_counts() == {OccurrenceStatus.DELIVERED: TOTAL}
    retried = Occurrence.objects.filter(attempts__gt=1).count()
    assert retried > 0, "no publish failed: the outage did not hit the worker"
    assert harness.queue_is_durable(fault_queue)
    arrivals = harness.read_queue(fault_queue, expect=TOTAL)
    assert {m.properties.get("delivery_mode") for m in arrivals.messages} == {2}, "not all persistent"
    for marked in marked_at_cuts:
        assert marked <= set(arrivals.by_message_id), (
            "a row marked delivered before a cut is not on the queue"
        )
    harness.assert_every_occurrence_arrived(arrivals, TOTAL)
    harness.record(
        "3. broker outage",
        f"worker's broker connections dropped and refused for {OUTAGE_SECONDS:.0f} s, x {proxy.cuts} during "
        f"a {TOTAL} burst: {' / '.join(cuts)}",
        f"{TOTAL}/{TOTAL} on the durable queue ({arrivals.duplicates} duplicates, same message_id); "
        f"{retried} retried with backoff; 0 lost, 0 failed",
    )
