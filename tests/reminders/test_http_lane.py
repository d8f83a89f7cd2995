"""The HTTP lane (PostgreSQL, a real worker's scan): an endpoint that is slow to answer holds its own rows,
not the RabbitMQ rows due behind them; a chunk that finds the lane full is handed back, due a moment later,
with its attempt refunded; the lane's outcomes are marked exactly once."""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from reminders.engine.clock import DbClock
from reminders.engine.connection_thread import marker
from reminders.engine.lane import DEFER_SECONDS, Lane, http_lane
from reminders.engine.lookahead import occurrences_fire_for
from reminders.engine.scan_result import ScanResult
from reminders.models import CallbackType, Occurrence, OccurrenceStatus
from reminders.tasks import _publish_carried_before_exit
from tests.conftest import drain_queue
from tests.factories import JobFactory, OccurrenceFactory
from tests.http_receiver import QuietHandler, serving

# Marks happen on the marker thread's own connection: the rows must be committed, not in a test's transaction.
pytestmark = [pytest.mark.postgres, pytest.mark.rabbitmq, pytest.mark.django_db(transaction=True)]

SLOW_SECONDS = 1.5  # how long the endpoint takes to answer 200


@pytest.fixture
def slow_endpoint(settings: Any) -> Iterator[tuple[str, list[str]]]:
    """An endpoint answering 200 after SLOW_SECONDS; yields its URL and the Idempotency-Keys it saw."""
    settings.REMINDERS_HTTP_ALLOW_PRIVATE = True
    settings.REMINDERS_HTTP_READ_TIMEOUT = 10.0
    settings.REMINDERS_POLL_SECONDS = 30.0  # one claim per scan: what goes out went out from that claim
    seen: list[str] = []
    lock = threading.Lock()

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with lock:
                seen.append(self.headers.get("Idempotency-Key", ""))
            time.sleep(SLOW_SECONDS)
            self.answer(200)

    with serving(Handler) as port:
        yield f"http://127.0.0.1:{port}/hook", seen
    assert http_lane().stop(timeout=SLOW_SECONDS + 5.0)
    assert marker().stop(timeout=5.0)


def _due(seconds_ago: float, **job: Any) -> Occurrence:
    return OccurrenceFactory(
        job=JobFactory(**job), fire_at=DbClock.read().now() - dt.timedelta(seconds=seconds_ago)
    )


def _scan_and_time(queue: str) -> tuple[float, float]:
    """Run one short scan; (seconds the scan took, seconds from its start to the queue row's mark)."""
    began = DbClock.read().now()
    started = time.monotonic()
    occurrences_fire_for(seconds=0.2)
    took = time.monotonic() - started
    row = Occurrence.objects.get(job__target=queue)
    assert row.status == OccurrenceStatus.DELIVERED and row.delivered_at is not None
    return took, (row.delivered_at - began).total_seconds()


@pytest.mark.parametrize("lane_chunks", [4, 0])
def test_a_slow_endpoint_holds_its_own_rows_not_the_queue_row_due_behind_them(
    settings, slow_endpoint, queue_name, lane_chunks
) -> None:
    settings.REMINDERS_HTTP_LANE_CHUNKS = lane_chunks
    url, seen = slow_endpoint
    hook = _due(3.0, callback_type=CallbackType.HTTP, target=url)  # due first: claimed and sent first
    _due(1.0, target=queue_name)
    http_lane().take_result()

    took, queue_row_marked = _scan_and_time(queue_name)

    if lane_chunks:
        # The scan handed the HTTP chunk over and went on: the queue row did not wait for the endpoint.
        assert queue_row_marked < SLOW_SECONDS / 2, f"the queue row waited {queue_row_marked:.2f} s"
        assert took < SLOW_SECONDS, f"the scan waited {took:.2f} s for the endpoint"
        hook.refresh_from_db()
        assert hook.status == OccurrenceStatus.CLAIMED  # still out on the lane, under the scan's lease
        # A worker stopping now waits for the chunk out on its lane, then for its mark (the shutdown hook).
        _publish_carried_before_exit()
        assert http_lane().take_result().delivered == 1  # counted in the next scan's totals
    else:
        # Inside the scan (the lane off): the queue row waited for the endpoint's answer.
        assert queue_row_marked >= SLOW_SECONDS, f"the queue row went out after {queue_row_marked:.2f} s"
    hook.refresh_from_db()
    assert (hook.status, hook.attempts) == (OccurrenceStatus.DELIVERED, 1)
    assert seen == [hook.idempotency_key]
    assert len(drain_queue(queue_name, expect=1)) == 1


def test_a_chunk_that_finds_the_lane_full_is_handed_back_due_a_moment_later_with_its_attempt_refunded(
    settings, slow_endpoint, queue_name
) -> None:
    settings.REMINDERS_HTTP_LANE_CHUNKS = 1
    url, seen = slow_endpoint
    # 65 rows: a chunk of 64 (the HTTP chunk size) takes the one place, the 65th finds the lane full.
    rows = [_due(3.0, callback_type=CallbackType.HTTP, target=f"{url}?n={n}") for n in range(65)]
    _due(1.0, target=queue_name)

    started = DbClock.read().now()
    _, queue_row_marked = _scan_and_time(queue_name)

    assert queue_row_marked < SLOW_SECONDS / 2
    back = Occurrence.objects.filter(id__in=[r.id for r in rows], status=OccurrenceStatus.SCHEDULED)
    assert [(o.attempts, o.claimed_until) for o in back] == [(0, None)]
    due_in = (back[0].next_attempt_at - started).total_seconds()
    assert DEFER_SECONDS <= due_in < DEFER_SECONDS + 1.0, due_in
    assert http_lane().stop(timeout=SLOW_SECONDS * 4 + 5.0)  # 64 requests on 16 threads: four rounds
    assert marker().stop(timeout=5.0)

    time.sleep(max(0.0, (back[0].next_attempt_at - DbClock.read().now()).total_seconds()))
    occurrences_fire_for(seconds=0.2)
    assert http_lane().stop(timeout=SLOW_SECONDS + 5.0)
    assert marker().stop(timeout=5.0)

    assert set(Occurrence.objects.filter(id__in=[r.id for r in rows]).values_list("status", "attempts")) == {
        (OccurrenceStatus.DELIVERED, 1)
    }
    assert sorted(seen) == sorted(r.idempotency_key for r in rows)  # each exactly once
    assert len(drain_queue(queue_name, expect=1)) == 1


def test_a_lane_chunks_failure_is_marked_for_its_retry_and_counted_with_its_error_in_the_scans_totals(
    settings, queue_name
) -> None:
    settings.REMINDERS_HTTP_ALLOW_PRIVATE = True
    settings.REMINDERS_POLL_SECONDS = 30.0

    class Unavailable(QuietHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.answer(503)

    with serving(Unavailable) as port:
        hook = _due(1.0, callback_type=CallbackType.HTTP, target=f"http://127.0.0.1:{port}/hook")
        http_lane().take_result()
        occurrences_fire_for(seconds=0.2)
        _publish_carried_before_exit()

    hook.refresh_from_db()
    assert (hook.status, hook.attempts) == (OccurrenceStatus.SCHEDULED, 1)  # due again after its backoff
    assert "HTTP 503" in hook.last_error
    totals = ScanResult(claimed=1)
    totals.add(http_lane().take_result())  # as the scan task adds the lane's counts to its own
    assert (totals.claimed, totals.retried, totals.delivered, totals.errors) == (1, 1, 0, {"HTTP 503": 1})


@pytest.mark.django_db(transaction=False)
def test_a_place_taken_is_a_thread_at_once_even_after_the_capacity_grew(settings) -> None:
    lane = Lane("test-lane")
    settings.REMINDERS_HTTP_LANE_CHUNKS = 1
    release, second_started = threading.Event(), threading.Event()
    assert lane.take()
    lane.run(lambda: release.wait(5.0))
    assert not lane.take()  # full
    settings.REMINDERS_HTTP_LANE_CHUNKS = 2
    assert lane.take()
    lane.run(second_started.set)
    try:
        assert second_started.wait(2.0), "the second chunk waited in a queue behind the first"
    finally:
        release.set()
    assert lane.stop(timeout=5.0)
