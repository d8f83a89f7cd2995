"""Batch handlers: one call per chunk of a handler's due occurrences, answering for each of them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from reminders.engine import handler_registry
from reminders.engine.dispatch import occurrences_dispatch_batch
from reminders.models import CallbackType, Occurrence, OccurrenceStatus
from reminders.transports import TransportError
from tests.factories import JobFactory, OccurrenceFactory
from tests.reminders import handlers_for_tests

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    handlers_for_tests.batch_calls.clear()
    handlers_for_tests.batch_fail.clear()
    handlers_for_tests.batch_raise.clear()
    handlers_for_tests.batch_order.clear()
    yield
    handlers_for_tests.batch_order.clear()
    handlers_for_tests.batch_fail.clear()
    handlers_for_tests.batch_raise.clear()


def _due(count: int) -> list[Occurrence]:
    job = JobFactory(callback_type=CallbackType.HANDLER, target="tests.batch")
    return [OccurrenceFactory(job=job) for _ in range(count)]


def test_a_batch_handler_gets_the_chunk_in_one_call_and_its_errors_retry_only_those() -> None:
    occurrences = _due(5)
    handlers_for_tests.batch_fail[1] = TransportError("push broker refused")
    handlers_for_tests.batch_fail[3] = TransportError("training gone", permanent=True)

    result = occurrences_dispatch_batch()

    assert len(handlers_for_tests.batch_calls) == 1
    assert {d.occurrence_id for d in handlers_for_tests.batch_calls[0]} == {o.pk for o in occurrences}
    assert (result.delivered, result.retried, result.failed) == (3, 1, 1)
    called = handlers_for_tests.batch_calls[0]
    retried, failed = (
        Occurrence.objects.get(pk=called[1].occurrence_id),
        Occurrence.objects.get(pk=called[3].occurrence_id),
    )
    assert (retried.status, retried.last_error) == (OccurrenceStatus.SCHEDULED, "push broker refused")
    assert (failed.status, failed.last_error) == (OccurrenceStatus.FAILED, "training gone")


def test_a_batch_handler_that_raises_retries_every_occurrence_of_the_chunk() -> None:
    _due(3)
    handlers_for_tests.batch_raise.append(RuntimeError("database went away"))

    result = occurrences_dispatch_batch()

    assert (result.delivered, result.retried) == (0, 3)
    errors = set(Occurrence.objects.values_list("last_error", flat=True))
    assert errors == {"RuntimeError: database went away"}


def test_one_name_is_one_handler_single_or_batch() -> None:
    def other(deliveries: Any) -> dict[int, TransportError]:
        return {}

    with pytest.raises(ValueError, match="already registered"):
        handler_registry.register_batch("tests.record")(other)
    with pytest.raises(ValueError, match="already registered"):
        handler_registry.register("tests.batch")(lambda delivery: None)
    assert {"tests.batch", "tests.record"} <= set(handler_registry.names())


def test_the_api_accepts_a_batch_handler_as_a_target(api: Any) -> None:
    response = api.post(
        "/api/jobs/",
        {
            "key": "batch-target",
            "schedules": ["2030-01-01T00:00:00Z"],
            "callback": {"type": "handler", "data": {"name": "tests.batch", "payload": {}}},
        },
        format="json",
    )
    assert response.status_code == 201, response.json()


def test_more_than_a_chunk_runs_in_the_order_the_handler_gives() -> None:
    occurrences = _due(120)  # chunks of 50: three calls
    last_first = sorted(occurrences, key=lambda o: -o.pk)
    handlers_for_tests.batch_order[:] = [o.pk for o in last_first]

    assert occurrences_dispatch_batch().delivered == 120

    called = [d.occurrence_id for call in handlers_for_tests.batch_calls for d in call]
    assert called == [o.pk for o in last_first]
    assert [len(call) for call in handlers_for_tests.batch_calls] == [50, 50, 20]


def test_an_order_that_loses_a_delivery_is_ignored() -> None:
    occurrences = _due(60)
    handlers_for_tests.batch_order[:] = [o.pk for o in occurrences[1:]]  # one left out

    assert occurrences_dispatch_batch().delivered == 60

    called = sorted(d.occurrence_id for call in handlers_for_tests.batch_calls for d in call)
    assert called == sorted(o.pk for o in occurrences)  # each once, in the claim's order
