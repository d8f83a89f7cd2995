"""Scenario 2: a worker freezes (SIGSTOP) after publishing, past its lease; another takes over; it thaws.

The frozen worker's late "delivered" must not overwrite the newer claim: its mark is conditional on a
lease token the second worker's claim has replaced, so it matches no row.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from reminders.models import Occurrence, OccurrenceStatus
from tests.faults import harness

pytestmark = [pytest.mark.faults, pytest.mark.postgres, pytest.mark.rabbitmq]

TOTAL = 50


def test_it_refuses_the_late_mark_of_a_worker_frozen_past_its_lease(
    workers: Callable[..., harness.WorkerProcess], fault_queue: str
) -> None:
    frozen = workers("frozen", phase_delay=0.3, REMINDERS_BATCH_SIZE=str(TOTAL))
    taker = workers("taker", REMINDERS_BATCH_SIZE=str(TOTAL))
    frozen.start()
    harness.due_occurrences(fault_queue, TOTAL)

    with harness.Kicker():
        assert frozen.wait_phase("published", after=0, timeout=30), frozen.log_tail()
        frozen.freeze()
        first_tokens = set(Occurrence.objects.values_list("lease_token", flat=True))
        assert len(first_tokens) == 1 and None not in first_tokens
        (first_lease_end,) = set(Occurrence.objects.values_list("claimed_until", flat=True))
        taker.start()
        harness.wait_for(
            lambda: harness.all_delivered(TOTAL), timeout=60, what="the taker to deliver", worker=taker
        )
        assert Occurrence.objects.filter(delivered_at__lte=first_lease_end).count() == 0
        taken_over = {
            row["id"]: row
            for row in Occurrence.objects.values("id", "status", "lease_token", "attempts", "delivered_at")
        }
        frozen.thaw()
        assert frozen.wait_phase("marked", after=0, timeout=30), frozen.log_tail()

    late_marks = [count for phase, count in frozen.phases() if phase == "marked"]
    assert late_marks[0] == 0, "the frozen worker's mark matched rows it no longer held"
    after = {
        row["id"]: row
        for row in Occurrence.objects.values("id", "status", "lease_token", "attempts", "delivered_at")
    }
    assert after == taken_over, "the late mark changed rows the taker had delivered"
    assert {row["status"] for row in after.values()} == {OccurrenceStatus.DELIVERED}
    assert {row["attempts"] for row in after.values()} == {2}
    assert not first_tokens & {row["lease_token"] for row in after.values()}

    arrivals = harness.read_queue(fault_queue, expect=2 * TOTAL)
    harness.assert_every_occurrence_arrived(arrivals, TOTAL)
    assert set(arrivals.by_message_id.values()) == {2}, (
        "each occurrence: one frozen publish, one taker publish"
    )
    harness.record(
        "2. worker frozen",
        f"SIGSTOP after publish, before mark, for > lease ({harness.LEASE_SECONDS} s); another worker "
        "takes over; SIGCONT",
        f"late mark matched 0 of {TOTAL} rows; {TOTAL}/{TOTAL} delivered once (attempts 2, taker's lease "
        "token and delivered_at kept); 2 messages per occurrence, same message_id",
    )
