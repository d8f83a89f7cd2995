"""The dispatch pipeline: the database works while the broker commits, and nothing is marked early."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from django.utils import timezone

from reminders import dispatch
from reminders.dispatch import occurrences_dispatch_for
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


def test_the_next_claim_and_the_previous_mark_run_while_the_broker_commits(monkeypatch, queue_name) -> None:  # type: ignore[no-untyped-def]
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


def test_an_error_while_marking_waits_for_the_chunk_in_flight_and_leaves_both_to_the_reaper(  # type: ignore[no-untyped-def]
    monkeypatch, queue_name
) -> None:
    occurrences = _due(queue_name, 4)
    recorder = _Recorder(monkeypatch)
    recorded_mark = dispatch.occurrences_mark_delivered

    def failing_mark(**kwargs: Any) -> int:
        recorder._record("mark")
        raise RuntimeError("database went away")

    monkeypatch.setattr(dispatch, "occurrences_mark_delivered", failing_mark)

    with pytest.raises(RuntimeError, match="database went away"):
        occurrences_dispatch_for(seconds=60, batch_size=2, until_idle=True)

    # The second chunk was in flight when marking the first failed: its outcome was still read, so the
    # transport is free, but neither chunk is marked.
    assert recorder.events[-2:] == ["mark1", "wait2"]
    assert set(Occurrence.objects.values_list("status", flat=True)) == {OccurrenceStatus.CLAIMED}
    assert len(drain_queue(queue_name, expect=4)) == 4

    # When the leases run out, the reaper hands them back and they go out again with the same ids.
    monkeypatch.setattr(dispatch, "occurrences_mark_delivered", recorded_mark)
    Occurrence.objects.update(claimed_until=timezone.now() - dt.timedelta(seconds=1))
    totals, _ = occurrences_dispatch_for(seconds=60, batch_size=2, until_idle=True)
    assert totals.delivered == 4
    again = drain_queue(queue_name, expect=4)
    assert sorted(m.properties["message_id"] for m in again) == sorted(o.idempotency_key for o in occurrences)


@pytest.mark.django_db
def test_a_chunk_delivered_synchronously_is_marked_before_the_next_one_starts(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """HTTP and handler deliveries are done when start() returns: holding their mark back would only let
    the lease run down while the next chunk's slow calls go on."""
    handlers_for_tests.calls.clear()
    _due("tests.record", 4, callback_type=CallbackType.HANDLER)
    recorder = _Recorder(monkeypatch, "handler")

    totals, _ = occurrences_dispatch_for(seconds=60, batch_size=2, until_idle=True)

    assert totals.delivered == 4
    assert recorder.events[:5] == ["claim1", "start1", "mark1", "claim2", "start2"], recorder.events
