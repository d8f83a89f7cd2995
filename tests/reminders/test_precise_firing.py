"""Precise firing (PostgreSQL): rows claimed within the look-ahead are held and published at their instant,
and a job that changes while one of its rows is held does not go out in its old version."""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from django.db import OperationalError

from reminders.engine import dispatch, timer
from reminders.engine.clock import DbClock
from reminders.engine.lookahead import STALE_REASON, carrier, occurrences_fire_for
from reminders.engine.scan_result import ScanResult
from reminders.jobs import Callback, job_cancel, job_upsert
from reminders.models import CallbackType, Job, Occurrence, OccurrenceStatus
from reminders.transports import Delivery, InFlight, get_transport
from tests.conftest import drain_queue
from tests.factories import JobFactory, OccurrenceFactory

pytestmark = [pytest.mark.postgres, pytest.mark.rabbitmq, pytest.mark.django_db]


@pytest.fixture(autouse=True)
def _look_ahead(settings: Any) -> None:
    """Two seconds ahead, and no poll during a test's scan: whatever goes out went out by the timer."""
    settings.REMINDERS_LOOKAHEAD_SECONDS = 2.0
    settings.REMINDERS_POLL_SECONDS = 30.0


def _held(queue: str, in_seconds: float, **job: Any) -> Occurrence:
    """A row due `in_seconds` from now by the database's clock."""
    owner = JobFactory(target=queue, **job)
    fire_at = DbClock.read().now() + dt.timedelta(seconds=in_seconds)
    return OccurrenceFactory(job=owner, fire_at=fire_at)


def _seconds_until(instant: dt.datetime) -> float:
    """How long a scan started now must run to end at `instant` (database time): a scan's window is set
    from when it starts, not from when the test made its rows, which a loaded machine can make a good part
    of a second apart (so the rows are made due a second or more ahead: still ahead when the scan starts,
    so they are held, not sent at once)."""
    seconds = (instant - DbClock.read().now()).total_seconds()
    assert seconds > 0, (
        f"the rows took {-seconds:.2f} s too long to make: the scan would end before its window"
    )
    return seconds


def _record_publishes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[dt.datetime, list[int]]]:
    """(database time when the timer handed the chunk to the broker, its occurrence ids), per chunk.

    Read as the chunk is handed over, not after the broker took it: the publish and the reply to the
    reading are no part of when the timer fired, and on a loaded machine each can take a good part of
    the lateness allowed."""
    published: list[tuple[dt.datetime, list[int]]] = []
    transport = get_transport("rabbitmq")
    start = transport.start

    def recorded(deliveries: Sequence[Delivery]) -> InFlight:
        published.append((DbClock.read().at, [d.occurrence_id for d in deliveries]))
        return start(deliveries)

    monkeypatch.setattr(transport, "start", recorded)
    return published


def _when_held(monkeypatch: pytest.MonkeyPatch, action: Callable[[], Any]) -> None:
    """Run `action` right after the scan put rows in its timer queue (they are claimed, not sent)."""
    hold = timer.TimerQueue.hold

    def hold_then_act(self: timer.TimerQueue, claim: Any, rows: Any) -> None:
        hold(self, claim, rows)
        if rows:
            action()

    monkeypatch.setattr(timer.TimerQueue, "hold", hold_then_act)


def test_a_held_row_is_published_at_its_instant_not_before(monkeypatch, queue_name) -> None:
    rows = [_held(queue_name, 1.0), _held(queue_name, 1.4)]
    published = _record_publishes(monkeypatch)

    totals, _ = occurrences_fire_for(seconds=_seconds_until(rows[1].fire_at + dt.timedelta(seconds=0.4)))

    assert (totals.claimed, totals.delivered) == (2, 2)
    # Both were claimed by the first claim (no poll ran after it), each published by its own chunk.
    assert [ids for _, ids in published] == [[rows[0].id], [rows[1].id]]
    for (at, _), row in zip(published, rows, strict=True):
        late = (at - row.fire_at).total_seconds()
        assert late >= 0, f"published {-late:.4f} s before its instant"
        assert late < 0.2, f"published {late:.3f} s after its instant: held, not fired by the timer"
    assert len(drain_queue(queue_name, expect=2)) == 2


def test_a_job_cancelled_while_its_row_is_held_is_not_delivered(monkeypatch, queue_name) -> None:
    row = _held(queue_name, 1.0)
    _when_held(monkeypatch, lambda: job_cancel(job=row.job))

    totals, _ = occurrences_fire_for(seconds=_seconds_until(row.fire_at + dt.timedelta(seconds=0.3)))

    assert (totals.claimed, totals.delivered, totals.skipped) == (1, 0, 1)
    row.refresh_from_db()
    assert (row.status, row.last_error) == (OccurrenceStatus.SKIPPED, STALE_REASON)
    assert drain_queue(queue_name, timeout=0.3) == []


def _replace(job: Job, instants: list[dt.datetime], payload: dict[str, Any]) -> None:
    job_upsert(
        key=job.key,
        schedules=instants,
        callback=Callback(type=CallbackType.RABBITMQ, target=job.target, payload=payload),
    )


def test_a_job_updated_while_its_row_is_held_goes_out_with_the_new_payload(monkeypatch, queue_name) -> None:
    row = _held(queue_name, 1.0, payload={"v": "old"})
    _when_held(monkeypatch, lambda: _replace(row.job, [row.fire_at], {"v": "new"}))

    totals, _ = occurrences_fire_for(seconds=_seconds_until(row.fire_at + dt.timedelta(seconds=0.3)))

    assert (totals.claimed, totals.delivered) == (1, 1)
    (message,) = drain_queue(queue_name, expect=1)
    assert json.loads(message.body) == {"v": "new"}


def test_a_job_replaced_without_the_held_instant_does_not_deliver_it(monkeypatch, queue_name) -> None:
    row = _held(queue_name, 1.0, payload={"v": "old"})
    later = row.fire_at + dt.timedelta(hours=1)
    _when_held(monkeypatch, lambda: _replace(row.job, [later], {"v": "new"}))

    totals, _ = occurrences_fire_for(seconds=_seconds_until(row.fire_at + dt.timedelta(seconds=0.3)))

    assert (totals.delivered, totals.skipped) == (0, 1)
    assert drain_queue(queue_name, timeout=0.3) == []
    assert Occurrence.objects.get(job=row.job, fire_at=later).status == OccurrenceStatus.SCHEDULED


def test_the_scan_claims_nothing_due_after_its_end_and_returns_with_nothing_held(queue_name) -> None:
    soon, after_the_scan = _held(queue_name, 1.0), _held(queue_name, 2.5)

    totals, _ = occurrences_fire_for(seconds=_seconds_until(soon.fire_at + dt.timedelta(seconds=0.5)))

    assert (totals.claimed, totals.delivered) == (1, 1)
    soon.refresh_from_db()
    after_the_scan.refresh_from_db()
    assert soon.status == OccurrenceStatus.DELIVERED
    assert after_the_scan.status == OccurrenceStatus.SCHEDULED


@pytest.mark.django_db(transaction=True)  # the carrier thread reads on its own connection
def test_with_a_carry_the_rows_due_just_after_the_end_are_published_at_their_instants_by_the_carrier(
    monkeypatch, queue_name
) -> None:
    in_scan, carried, beyond = _held(queue_name, 1.0), _held(queue_name, 2.0), _held(queue_name, 3.5)
    published = _record_publishes(monkeypatch)
    recorded: list[ScanResult] = []
    end = in_scan.fire_at + dt.timedelta(seconds=0.5)  # carried is due 0.5 s after it, beyond 1.5 s

    totals, _ = occurrences_fire_for(seconds=_seconds_until(end), carry=1.0, carried=recorded.append)

    # The scan returned at its end: the carried row is claimed (under the scan's lease), not yet sent.
    assert (totals.claimed, totals.delivered) == (2, 1)
    carried.refresh_from_db()
    assert carried.status == OccurrenceStatus.CLAIMED
    assert carrier().stop(timeout=5.0)  # publishes what it holds, then closes its connection
    assert [r.delivered for r in recorded] == [1]
    assert [ids for _, ids in published] == [[in_scan.id], [carried.id]]
    late = (published[1][0] - carried.fire_at).total_seconds()
    assert 0 <= late < 0.2, f"the carried row went out {late:.3f} s after its instant"
    for row, status in ((in_scan, OccurrenceStatus.DELIVERED), (carried, OccurrenceStatus.DELIVERED),
                        (beyond, OccurrenceStatus.SCHEDULED)):  # fmt: skip
        row.refresh_from_db()
        assert row.status == status
    assert len(drain_queue(queue_name, expect=2)) == 2


@pytest.mark.django_db(transaction=True)  # the marker thread marks on its own connection
def test_a_mark_that_fails_on_the_marker_thread_is_raised_in_the_scan_and_marked_again_by_its_recover(
    monkeypatch, queue_name
) -> None:
    row = _held(queue_name, 1.0)
    failures: list[str] = []
    mark = dispatch.occurrences_mark_delivered

    def fails_once_on_the_marker(**kwargs: Any) -> int:
        if threading.current_thread().name == "reminders-marker" and not failures:
            failures.append(threading.current_thread().name)
            raise OperationalError("server closed the connection unexpectedly")
        return mark(**kwargs)

    monkeypatch.setattr(dispatch, "occurrences_mark_delivered", fails_once_on_the_marker)

    with pytest.raises(OperationalError):
        occurrences_fire_for(seconds=_seconds_until(row.fire_at + dt.timedelta(seconds=0.3)))

    assert failures == ["reminders-marker"]
    row.refresh_from_db()
    assert row.status == OccurrenceStatus.DELIVERED  # by recover(), on the scan's thread
    assert len(drain_queue(queue_name, expect=1)) == 1
