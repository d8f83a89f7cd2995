"""The dispatch pipeline: the database works while the broker commits, and nothing is marked early."""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
from django.db import OperationalError
from django.utils import timezone

from reminders.engine import dispatch
from reminders.engine.dispatch import occurrences_dispatch_for
from reminders.models import CallbackType, Occurrence, OccurrenceStatus
from reminders.transports import Delivery, InFlight, Settled, TransportError, get_transport
from tests.conftest import drain_queue
from tests.factories import JobFactory, OccurrenceFactory
from tests.reminders import handlers_for_tests

pytestmark = [pytest.mark.rabbitmq, pytest.mark.django_db]


class _Recorder:
    """Records, in order, each claim, each chunk started and waited for, and each mark."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, callback_type: str = "rabbitmq") -> None:
        self.events: list[str] = []
        self._counts: dict[str, int] = {}
        claim, mark = dispatch.occurrences_claim_due, dispatch.occurrences_mark_delivered
        transport = get_transport(callback_type)
        start = transport.start

        def recorded_claim(**kwargs: Any) -> Any:
            result = claim(**kwargs)
            self._record("claim")
            return result

        def recorded_mark(**kwargs: Any) -> int:
            self._record("mark")
            return mark(**kwargs)

        def recorded_start(deliveries: Sequence[Delivery]) -> InFlight:
            flight = start(deliveries)
            self._record("start")
            return flight if isinstance(flight, Settled) else _RecordedFlight(flight, self)

        monkeypatch.setattr(dispatch, "occurrences_claim_due", recorded_claim)
        monkeypatch.setattr(dispatch, "occurrences_mark_delivered", recorded_mark)
        monkeypatch.setattr(transport, "start", recorded_start)

    def _record(self, kind: str) -> None:
        self._counts[kind] = self._counts.get(kind, 0) + 1
        self.events.append(f"{kind}{self._counts[kind]}")

    def at(self, event: str) -> int:
        return self.events.index(event)


class _RecordedFlight:
    def __init__(self, flight: InFlight, recorder: _Recorder) -> None:
        self._flight, self._recorder = flight, recorder

    def wait(self) -> Mapping[int, TransportError]:
        errors = self._flight.wait()
        self._recorder._record("wait")
        return errors


def _due(queue: str, count: int, **job: Any) -> list[Occurrence]:
    owner = JobFactory(target=queue, **job)
    start = timezone.now() - dt.timedelta(minutes=5)
    return [OccurrenceFactory(job=owner, fire_at=start + dt.timedelta(seconds=i)) for i in range(count)]


def _four_due_with_a_failing_mark(
    monkeypatch: pytest.MonkeyPatch, queue: str, error: Exception, *, times: int | None = None
) -> tuple[list[Occurrence], _Recorder, Callable[..., int]]:
    """Four due rows, a recorder, and a mark that raises `error` on its first `times` calls (every call by
    default); returns the rows, the recorder and the real (recorded) mark."""
    occurrences = _due(queue, 4)
    recorder = _Recorder(monkeypatch)
    recorded_mark = dispatch.occurrences_mark_delivered
    calls = itertools.count()

    def failing_mark(**kwargs: Any) -> int:
        if times is None or next(calls) < times:
            recorder._record("mark")
            raise error
        return recorded_mark(**kwargs)

    monkeypatch.setattr(dispatch, "occurrences_mark_delivered", failing_mark)
    return occurrences, recorder, recorded_mark


def _message_ids(messages: list[Any]) -> list[str]:
    return sorted(m.properties["message_id"] for m in messages)


def _keys(occurrences: list[Occurrence]) -> list[str]:
    return sorted(o.idempotency_key for o in occurrences)


def test_the_next_claim_and_the_previous_mark_run_while_the_broker_commits(monkeypatch, queue_name) -> None:
    occurrences = _due(queue_name, 6)
    recorder = _Recorder(monkeypatch)

    totals, backlog = occurrences_dispatch_for(seconds=60, batch_size=2, until_idle=True)

    assert (totals.claimed, totals.delivered, backlog) == (6, 6, False)
    events = recorder.events
    assert events.count("start3") == 1 and "start4" not in events
    for k in (1, 2):
        # Batch k+1 is claimed after batch k was sent and before its commit-ok was read ...
        assert recorder.at(f"start{k}") < recorder.at(f"claim{k + 1}") < recorder.at(f"wait{k}"), events
        # ... and batch k is marked only after its outcome is known, while batch k+1 is in flight.
        assert recorder.at(f"wait{k}") < recorder.at(f"start{k + 1}") < recorder.at(f"mark{k}"), events
    assert events[-2:] == ["wait3", "mark3"]  # nothing is left in flight when the loop returns
    assert Occurrence.objects.filter(status=OccurrenceStatus.DELIVERED).count() == 6
    received = drain_queue(queue_name, expect=6)
    assert [m.properties["message_id"] for m in received] == [o.idempotency_key for o in occurrences]


def test_a_database_error_while_marking_marks_both_chunks_once_the_database_answers(
    monkeypatch, queue_name
) -> None:
    """Issue 19, defect 4: a published chunk is marked after the error, not re-sent after its lease."""
    blip = OperationalError("terminating connection due to administrator command")
    occurrences, recorder, _ = _four_due_with_a_failing_mark(monkeypatch, queue_name, blip, times=1)

    with pytest.raises(OperationalError):
        occurrences_dispatch_for(seconds=60, batch_size=2, until_idle=True)

    # The second chunk was in flight when marking the first failed: its outcome is read, then both marks.
    assert recorder.events[-4:] == ["mark1", "wait2", "mark2", "mark3"]
    assert set(Occurrence.objects.values_list("status", "attempts")) == {(OccurrenceStatus.DELIVERED, 1)}
    assert _message_ids(drain_queue(queue_name, expect=4)) == _keys(occurrences)


def test_an_error_that_is_not_the_database_leaves_both_chunks_to_the_reaper(monkeypatch, queue_name) -> None:
    bug = RuntimeError("a bug in the mark")
    occurrences, recorder, recorded_mark = _four_due_with_a_failing_mark(monkeypatch, queue_name, bug)

    with pytest.raises(RuntimeError, match="a bug in the mark"):
        occurrences_dispatch_for(seconds=60, batch_size=2, until_idle=True)

    # The chunk in flight was still waited for, so the transport is free; the one try to mark after the
    # error failed the same way, and nothing is marked.
    assert recorder.events[-3:] == ["mark1", "wait2", "mark2"]
    assert set(Occurrence.objects.values_list("status", flat=True)) == {OccurrenceStatus.CLAIMED}
    assert len(drain_queue(queue_name, expect=4)) == 4

    # When the leases run out, the reaper hands them back and they go out again with the same ids.
    monkeypatch.setattr(dispatch, "occurrences_mark_delivered", recorded_mark)
    Occurrence.objects.update(claimed_until=timezone.now() - dt.timedelta(seconds=1))
    totals, _ = occurrences_dispatch_for(seconds=60, batch_size=2, until_idle=True)
    assert totals.delivered == 4
    assert _message_ids(drain_queue(queue_name, expect=4)) == _keys(occurrences)


def test_a_database_error_after_a_claim_hands_the_unsent_rows_back_at_once(monkeypatch, queue_name) -> None:
    """Issue 19, defect 4: the claim is committed, the throttled claims that follow fail: the claimed rows
    go back to `scheduled` (the attempt refunded) instead of waiting out the lease."""
    _due(queue_name, 3)

    def failing_throttled_claims(**kwargs: Any) -> Any:
        raise OperationalError("terminating connection due to administrator command")
        yield  # a generator, as the real one

    monkeypatch.setattr(dispatch, "throttled_claims", failing_throttled_claims)

    with pytest.raises(OperationalError):
        occurrences_dispatch_for(seconds=60, batch_size=10, until_idle=True)

    assert set(Occurrence.objects.values_list("status", "attempts", "claimed_until")) == {
        (OccurrenceStatus.SCHEDULED, 0, None)
    }
    assert drain_queue(queue_name, timeout=0.5) == []


@pytest.mark.django_db
def test_a_chunk_delivered_synchronously_is_marked_before_the_next_one_starts(monkeypatch) -> None:
    """HTTP and handler deliveries are done when start() returns: holding their mark back would only let
    the lease run down while the next chunk's slow calls go on."""
    handlers_for_tests.calls.clear()
    _due("tests.record", 4, callback_type=CallbackType.HANDLER)
    recorder = _Recorder(monkeypatch, "handler")

    totals, _ = occurrences_dispatch_for(seconds=60, batch_size=2, until_idle=True)

    assert totals.delivered == 4
    assert recorder.events[:5] == ["claim1", "start1", "mark1", "claim2", "start2"], recorder.events
