"""/metrics after real deliveries to RabbitMQ from PostgreSQL: counters and the lateness histogram move by
exactly what was delivered, retried and failed."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from django.utils import timezone

from reminders.engine.dispatch import occurrences_dispatch_batch, occurrences_dispatch_for
from reminders.jobs import job_cancel
from reminders.models import CallbackType, Occurrence, OccurrenceStatus
from tests.conftest import drain_queue
from tests.factories import JobFactory, OccurrenceFactory
from tests.ops import handlers as _handlers  # noqa: F401 - registers tests.ops.fail
from tests.ops.scrape import delta, scrape, value

pytestmark = [pytest.mark.postgres, pytest.mark.rabbitmq, pytest.mark.django_db]


def test_it_counts_deliveries_failures_and_lateness_exactly(queue_name: str) -> None:
    now = timezone.now()
    job = JobFactory(target=queue_name)
    # 20 a couple of seconds late, 10 about 200 s late: the 120 s bucket gets 20, the 300 s bucket 30.
    for i in range(20):
        OccurrenceFactory(job=job, fire_at=now - dt.timedelta(seconds=2, milliseconds=i))
    for i in range(10):
        OccurrenceFactory(job=job, fire_at=now - dt.timedelta(seconds=200, milliseconds=i))
    retried = JobFactory(callback_type=CallbackType.HANDLER, target="tests.ops.fail", payload={})
    failed = JobFactory(callback_type=CallbackType.HANDLER, target="tests.ops.fail", payload={"permanent": 1})
    OccurrenceFactory(job=retried)
    OccurrenceFactory(job=failed)
    cancelled = JobFactory(target=queue_name)
    for i in range(3):
        OccurrenceFactory(job=cancelled, fire_at=now + dt.timedelta(hours=1 + i))

    before = scrape()
    result = occurrences_dispatch_batch()
    job_cancel(job=cancelled)
    after = scrape()

    assert (result.delivered, result.retried, result.failed) == (30, 1, 1)
    assert len(drain_queue(queue_name, expect=30)) == 30
    counted = "reminders_occurrences_total"
    assert delta(before, after, counted, outcome="delivered", callback="rabbitmq") == 30
    assert delta(before, after, counted, outcome="retried", callback="handler") == 1
    assert delta(before, after, counted, outcome="failed", callback="handler") == 1
    assert delta(before, after, counted, outcome="cancelled", callback="rabbitmq") == 3
    assert delta(before, after, counted, outcome="delivered", callback="handler") == 0

    lateness = "reminders_fire_lateness_seconds"
    assert delta(before, after, f"{lateness}_count", callback="rabbitmq") == 30
    assert delta(before, after, f"{lateness}_bucket", callback="rabbitmq", le="1.0") == 0
    assert delta(before, after, f"{lateness}_bucket", callback="rabbitmq", le="120.0") == 20
    assert delta(before, after, f"{lateness}_bucket", callback="rabbitmq", le="300.0") == 30
    # The sum is the delivered time (as recorded on the row) minus the fire time, to the microsecond.
    rows = Occurrence.objects.filter(job=job, status=OccurrenceStatus.DELIVERED)
    expected = sum((o.delivered_at - o.fire_at).total_seconds() for o in rows)
    assert delta(before, after, f"{lateness}_sum", callback="rabbitmq") == pytest.approx(expected, abs=1e-3)

    assert delta(before, after, "reminders_claim_seconds_count") >= 1
    assert delta(before, after, "reminders_publish_seconds_count", callback="rabbitmq") == 1
    assert delta(before, after, "reminders_publish_seconds_count", callback="handler") == 1  # one chunk


def test_it_reports_the_due_backlog_and_its_oldest_age_from_the_database() -> None:
    now = timezone.now()
    job = JobFactory()
    OccurrenceFactory(job=job, fire_at=now - dt.timedelta(seconds=90))
    for i in range(4):
        OccurrenceFactory(job=job, fire_at=now - dt.timedelta(seconds=i + 1))
    OccurrenceFactory(job=job, fire_at=now + dt.timedelta(hours=1))  # not due: not backlog
    OccurrenceFactory(job=job, fire_at=now - dt.timedelta(hours=1), status=OccurrenceStatus.DELIVERED)

    samples = scrape()

    assert value(samples, "reminders_due_backlog", throttled="false") == 5
    assert value(samples, "reminders_due_backlog", throttled="true") == 0
    assert 90 <= value(samples, "reminders_oldest_due_age_seconds", throttled="false") < 120
    assert value(samples, "reminders_database_up") == 1


def test_it_counts_skipped_and_reaped_failures_by_callback(
    queue_name: str, settings: pytest.FixtureRequest
) -> None:
    now = timezone.now()
    late = JobFactory(target=queue_name, deadline_seconds=5)
    OccurrenceFactory(job=late, fire_at=now - dt.timedelta(seconds=60))
    # A lease that ran out on the last allowed attempt: the reaper fails it.
    crashed = JobFactory(callback_type=CallbackType.HTTP, target="https://example.com/hook")
    OccurrenceFactory(
        job=crashed,
        status=OccurrenceStatus.CLAIMED,
        attempts=settings.REMINDERS_MAX_ATTEMPTS,
        lease_token=uuid.uuid4(),
        claimed_until=now - dt.timedelta(seconds=1),
    )

    before = scrape()
    occurrences_dispatch_for(seconds=0)
    after = scrape()

    counted = "reminders_occurrences_total"
    assert delta(before, after, counted, outcome="skipped", callback="rabbitmq") == 1
    assert delta(before, after, counted, outcome="failed", callback="http") == 1
    assert drain_queue(queue_name, timeout=0.3) == []
