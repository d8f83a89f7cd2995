"""The Celery scan task drains what is due and re-kicks itself while a backlog remains."""

from __future__ import annotations

from typing import Any

import pytest
from celery import current_app
from kombu.exceptions import OperationalError

from reminders import tasks
from reminders.models import CallbackType, Occurrence, OccurrenceStatus
from tests.factories import JobFactory, OccurrenceFactory
from tests.reminders import handlers_for_tests

pytestmark = pytest.mark.django_db


def test_a_full_batch_re_kicks_the_scan_and_a_partial_one_does_not(settings: Any, monkeypatch: Any) -> None:
    settings.REMINDERS_BATCH_SIZE = 2
    handlers_for_tests.calls.clear()
    job = JobFactory(callback_type=CallbackType.HANDLER, target="tests.record")
    for _ in range(3):
        OccurrenceFactory(job=job)
    kicks: list[dict[str, Any]] = []
    monkeypatch.setattr(current_app, "send_task", lambda name, **kw: kicks.append(kw))

    assert tasks.scan_due() == {"claimed": 2, "delivered": 2}
    assert len(kicks) == 1

    assert tasks.scan_due() == {"claimed": 1, "delivered": 1}
    assert len(kicks) == 1
    assert Occurrence.objects.filter(status=OccurrenceStatus.DELIVERED).count() == 3


def test_a_re_kick_the_broker_refuses_does_not_fail_a_scan_that_delivered(
    settings: Any, monkeypatch: Any, caplog: Any
) -> None:
    settings.REMINDERS_BATCH_SIZE = 1
    job = JobFactory(callback_type=CallbackType.HANDLER, target="tests.record")
    OccurrenceFactory(job=job)

    def broker_down(name: str, **kwargs: Any) -> None:
        raise OperationalError("[Errno 111] Connection refused")

    monkeypatch.setattr(current_app, "send_task", broker_down)

    assert tasks.scan_due() == {"claimed": 1, "delivered": 1}
    assert "could not kick the scan" in caplog.text
    assert Occurrence.objects.get().status == OccurrenceStatus.DELIVERED


def test_the_scan_keeps_polling_for_its_budget(settings: Any) -> None:
    settings.REMINDERS_SCAN_SECONDS = 0.3
    settings.REMINDERS_POLL_SECONDS = 0.05
    from reminders.engine.dispatch import occurrences_dispatch_for

    totals, backlog = occurrences_dispatch_for(seconds=0.3)
    assert totals.claimed == 0
    assert backlog is False
