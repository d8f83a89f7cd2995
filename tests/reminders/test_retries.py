"""Failures retry with growing, jittered delays up to the maximum, then end `failed` with the error kept."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest
from django.utils import timezone

from reminders.engine.dispatch import occurrences_dispatch_batch
from reminders.engine.retry import RetryPolicy
from reminders.models import CallbackType, Occurrence, OccurrenceStatus
from reminders.transports.base import TransportError
from tests.factories import JobFactory, OccurrenceFactory
from tests.reminders import handlers_for_tests

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _clean_handler() -> Iterator[None]:
    handlers_for_tests.calls.clear()
    handlers_for_tests.fail_next.clear()
    yield
    handlers_for_tests.fail_next.clear()


def _handler_occurrence(**job: object) -> Occurrence:
    return OccurrenceFactory(job=JobFactory(callback_type=CallbackType.HANDLER, target="tests.record", **job))


def _make_due(occurrence: Occurrence) -> None:
    Occurrence.objects.filter(pk=occurrence.pk).update(
        next_attempt_at=timezone.now() - dt.timedelta(seconds=1)
    )


def test_the_handler_gets_the_delivery_with_payload_and_idempotency_key() -> None:
    occurrence = _handler_occurrence(payload={"training": "t1"})
    assert occurrences_dispatch_batch().delivered == 1
    (delivery,) = handlers_for_tests.calls
    assert delivery.payload == {"training": "t1"}
    assert delivery.idempotency_key == occurrence.idempotency_key
    assert delivery.attempt == 1


def test_a_failure_retries_with_growing_delays_then_fails_with_the_last_error(settings) -> None:
    settings.REMINDERS_MAX_ATTEMPTS = 4
    settings.REMINDERS_RETRY_BASE_SECONDS = 10
    occurrence = _handler_occurrence()
    delays = []
    for attempt in range(1, 5):
        handlers_for_tests.fail_next.append(RuntimeError(f"endpoint down #{attempt}"))
        before = timezone.now()
        occurrences_dispatch_batch()
        occurrence.refresh_from_db()
        assert occurrence.attempts == attempt
        assert occurrence.last_error == f"RuntimeError: endpoint down #{attempt}"
        if attempt < 4:
            assert occurrence.status == OccurrenceStatus.SCHEDULED
            delays.append((occurrence.next_attempt_at - before).total_seconds())
            _make_due(occurrence)
    # Equal jitter: each delay lies in [half, all] of 10 * 2^(attempt-1), so they strictly grow.
    assert 5 <= delays[0] <= 10.5 and 10 <= delays[1] <= 20.5 and 20 <= delays[2] <= 40.5, delays
    assert occurrence.status == OccurrenceStatus.FAILED
    assert occurrence.finished_at is not None
    assert occurrence.fire_at < occurrence.next_attempt_at  # retries never move the nominal instant...
    assert handlers_for_tests.calls == []


def test_a_permanent_error_fails_at_once() -> None:
    occurrence = _handler_occurrence()
    handlers_for_tests.fail_next.append(TransportError("404 Not Found", permanent=True))
    result = occurrences_dispatch_batch()
    occurrence.refresh_from_db()
    assert (result.failed, occurrence.status, occurrence.attempts) == (1, OccurrenceStatus.FAILED, 1)
    assert occurrence.last_error == "404 Not Found"


def test_an_unregistered_handler_fails_permanently() -> None:
    occurrence = OccurrenceFactory(job=JobFactory(callback_type=CallbackType.HANDLER, target="gone.away"))
    occurrences_dispatch_batch()
    occurrence.refresh_from_db()
    assert occurrence.status == OccurrenceStatus.FAILED
    assert "no handler registered" in occurrence.last_error


def test_an_occurrence_later_than_its_deadline_is_skipped_not_delivered() -> None:
    late = _handler_occurrence(deadline_seconds=60)
    Occurrence.objects.filter(pk=late.pk).update(fire_at=timezone.now() - dt.timedelta(minutes=5))
    on_time = _handler_occurrence(deadline_seconds=60)

    result = occurrences_dispatch_batch()

    assert (result.skipped, result.delivered) == (1, 1)
    late.refresh_from_db()
    assert late.status == OccurrenceStatus.SKIPPED
    assert "deadline" in late.last_error
    assert [d.occurrence_id for d in handlers_for_tests.calls] == [on_time.pk]


def test_the_backoff_is_capped_and_never_shorter_than_half() -> None:
    policy = RetryPolicy(max_attempts=50, base_seconds=5, max_seconds=300)
    for attempts in (1, 5, 20, 40):
        delay = policy.delay(attempts)
        ceiling = min(300, 5 * 2 ** (attempts - 1))
        assert ceiling / 2 <= delay <= ceiling
