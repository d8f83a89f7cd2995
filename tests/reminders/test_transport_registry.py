"""The transport registry: one row per callback type, and the API and the dispatcher read it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from rest_framework.test import APIClient

from reminders.engine.dispatch import occurrences_dispatch_batch
from reminders.models import CallbackType
from reminders.transports import TRANSPORTS, get_transport, transport_row
from tests.factories import JobFactory, OccurrenceFactory
from tests.reminders import handlers_for_tests


def test_it_has_exactly_one_row_per_callback_type() -> None:
    assert sorted(TRANSPORTS) == sorted(CallbackType.values)
    assert len({str(key) for key in TRANSPORTS}) == len(TRANSPORTS) == len(CallbackType.values)


@pytest.mark.parametrize("callback_type", CallbackType.values)
def test_it_names_a_target_field_the_data_serializer_declares(callback_type: str) -> None:
    row = transport_row(callback_type)
    fields = row.data_serializer().fields
    assert row.data_serializer.target_field in fields
    assert "payload" in fields
    assert row.chunk_size >= 1


@pytest.mark.parametrize("callback_type", CallbackType.values)
def test_it_builds_one_transport_per_type_from_its_row(callback_type: str) -> None:
    transport = get_transport(callback_type)
    assert isinstance(transport, TRANSPORTS[callback_type].transport)
    assert get_transport(callback_type) is transport


def test_it_refuses_an_unknown_callback_type() -> None:
    with pytest.raises(ValueError, match="unknown callback type 'pigeon'"):
        transport_row("pigeon")
    with pytest.raises(ValueError, match="unknown callback type 'pigeon'"):
        get_transport("pigeon")


@pytest.fixture
def _batch_calls() -> Iterator[list[Any]]:
    handlers_for_tests.batch_calls.clear()
    yield handlers_for_tests.batch_calls
    handlers_for_tests.batch_calls.clear()


@pytest.mark.django_db
def test_the_dispatcher_cuts_chunks_at_the_rows_size(
    monkeypatch: pytest.MonkeyPatch,
    _batch_calls: list[Any],
) -> None:
    row = TRANSPORTS[CallbackType.HANDLER]
    monkeypatch.setitem(TRANSPORTS, CallbackType.HANDLER, dataclasses.replace(row, chunk_size=2))
    job = JobFactory(callback_type=CallbackType.HANDLER, target="tests.batch")
    for _ in range(5):
        OccurrenceFactory(job=job)

    result = occurrences_dispatch_batch()

    assert result.delivered == 5
    assert [len(call) for call in _batch_calls] == [2, 2, 1]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("callback", "shown"),
    [
        (
            {"type": "rabbitmq", "data": {"queue": "q1", "payload": {"a": 1}}},
            {"queue": "q1", "payload": {"a": 1}},
        ),
        (
            {"type": "http", "data": {"url": "https://8.8.8.8/hook", "payload": {}, "secret": "s3"}},
            {"url": "https://8.8.8.8/hook", "payload": {}},
        ),
        ({"type": "handler", "data": {"name": "tests.record"}}, {"name": "tests.record", "payload": {}}),
    ],
)
def test_the_api_reads_and_shows_each_type_through_its_row(
    api: APIClient,
    callback: dict[str, Any],
    shown: dict[str, Any],
) -> None:
    body = {
        "key": f"registry-{callback['type']}",
        "schedules": ["2099-01-01T00:00:00Z"],
        "callback": callback,
    }
    response = api.post("/api/jobs/", body, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["callback"] == {"type": callback["type"], "data": shown}
