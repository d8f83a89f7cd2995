"""Rows of chunks whose marks are gathered into one UPDATE each keep the instant their broker accepted
them: the lateness shown and exported is the acceptance's, not that of the latest chunk marked with them."""

from __future__ import annotations

import datetime as dt

import pytest

from reminders.engine.chunks import Chunk, claim_chunks
from reminders.engine.clock import DbClock
from reminders.engine.dispatch import Pipeline, ScanResult, _Outcome
from reminders.engine.occurrences import occurrences_claim_due
from reminders.engine.retry import RetryPolicy
from reminders.models import Occurrence, OccurrenceStatus
from tests.factories import JobFactory, OccurrenceFactory

pytestmark = pytest.mark.django_db


def test_it_marks_each_gathered_chunk_with_its_own_acceptance_instant() -> None:
    job = JobFactory()
    first, second = OccurrenceFactory(job=job), OccurrenceFactory(job=job)
    clock = DbClock.read()
    pipeline = Pipeline(RetryPolicy.from_settings(), ScanResult(), clock, mark_after=1.0)
    claim = occurrences_claim_due(now=clock.now(), limit=10, lease_seconds=60)
    (chunk,) = list(claim_chunks(claim, pipeline))
    by_id = {d.occurrence_id: d for d in chunk.deliveries}
    # Two chunks of one claim whose outcomes came in 15 ms apart, marked together.
    early = Chunk(claim, chunk.callback_type, [by_id[first.pk]], chunk.advance)
    late = Chunk(claim, chunk.callback_type, [by_id[second.pk]], chunk.advance)
    pipeline._outcomes += [_Outcome(early, {}, known=clock.arrived + 0.100),
                           _Outcome(late, {}, known=clock.arrived + 0.115)]  # fmt: skip
    pipeline.settle()

    rows = {o.pk: o for o in Occurrence.objects.all()}
    assert {o.status for o in rows.values()} == {OccurrenceStatus.DELIVERED}
    assert rows[first.pk].delivered_at == clock.at + dt.timedelta(milliseconds=100)
    assert rows[second.pk].delivered_at == clock.at + dt.timedelta(milliseconds=115)
    assert rows[first.pk].finished_at == rows[first.pk].delivered_at
