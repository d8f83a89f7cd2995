"""A claim cut into chunks: its rows' jobs loaded, rows past their deadline or superseded by a later run
(the misfire policy) skipped, the rest grouped by callback type into chunks of the transport's size, each
sent only while the lease has time left (reminders/engine/dispatch.py sends them)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from django.conf import settings

from reminders.engine.claiming import Claim, occurrences_mark_skipped
from reminders.engine.clock import DbClock
from reminders.engine.deliveries import DeliveryJob, delivery_for, delivery_jobs
from reminders.engine.occurrences import occurrences_release
from reminders.engine.scan_result import ScanResult
from reminders.ops import metrics
from reminders.schedules.cron import MIN_EVERY_SECONDS
from reminders.schedules.lifecycle import schedules_misfire
from reminders.transports import Delivery, transport_row


class ChunkSink(Protocol):
    """What cutting a claim needs of the pipeline its chunks go to (reminders.engine.dispatch.Pipeline): its
    totals, its reading of the database's clock, and a way to forget rows it will not send."""

    result: ScanResult
    clock: DbClock

    def drop(self, claim: Claim, ids: Iterable[int]) -> None: ...


# Stop starting new chunks when less than this is left of the lease: the rest is released, not risked.
# Never more than a quarter of the lease, or a short lease (the minimum is 5 s) would release every claim
# untried before its first chunk.
_LEASE_MARGIN = timedelta(seconds=5)
# No timeline fires more often than this (cron: once a minute), so no row later than this is superseded.
_SHORTEST_PERIOD = timedelta(seconds=MIN_EVERY_SECONDS)


@dataclass(frozen=True)
class Chunk:
    """Deliveries of one callback type from one claim, sent together (one AMQP transaction)."""

    claim: Claim
    callback_type: str
    deliveries: Sequence[Delivery]
    advance: bool = True  # some row is a schedule's: marking it moves the schedule on


def claim_chunks(
    claim: Claim, pipeline: ChunkSink, jobs: Mapping[int, DeliveryJob] | None = None
) -> Iterator[Chunk]:
    """Load the claimed rows' jobs, skip rows past their deadline, and cut the rest into chunks.

    A generator, so each chunk's lease check happens just before it is sent; the rest of a claim whose
    lease is nearly over is handed back untried. `jobs`, if given, were read already (held rows,
    reminders/engine/lookahead.py).
    """
    result = pipeline.result
    if jobs is None:
        jobs = delivery_jobs({o.job_id for o in claim.occurrences})
    groups: dict[str, list[Delivery]] = defaultdict(list)
    late: list[int] = []
    now = pipeline.clock.now()
    superseded = _misfires(claim, jobs, now)
    if superseded:
        result.skipped += len(superseded)
        pipeline.drop(claim, superseded)
        for o in claim.occurrences:
            if o.id in superseded and (job := jobs.get(o.job_id)) is not None:
                metrics.occurrences_ended("skipped", job.callback_type)
    for occurrence in claim.occurrences:
        if occurrence.id in superseded:
            continue
        job = jobs.get(occurrence.job_id)
        if job is None:
            # Deleted (with its occurrences) since the claim: nothing left to deliver or mark.
            pipeline.drop(claim, [occurrence.id])
            continue
        if job.deadline_seconds is not None and now - occurrence.fire_at > timedelta(
            seconds=job.deadline_seconds
        ):
            late.append(occurrence.id)
            metrics.occurrences_ended("skipped", job.callback_type)
            continue
        groups[job.callback_type].append(delivery_for(occurrence, job))
    if late:
        result.skipped += occurrences_mark_skipped(
            token=claim.token, ids=late, now=now, reason="past its deadline when claimed"
        )
        pipeline.drop(claim, late)

    # The lease ends by the database's clock; the batch's reading carried on by the monotonic clock makes
    # this a local deadline (claim time + lease - margin) that no wall-clock step moves.
    margin = min(_LEASE_MARGIN, timedelta(seconds=settings.REMINDERS_LEASE_SECONDS) / 4)
    scheduled = {
        job.callback_type
        for o in claim.occurrences
        if (job := jobs.get(o.job_id)) is not None and job.schedule_key is not None
    }
    for callback_type, due in groups.items():
        row = transport_row(callback_type)
        size = row.chunk_size
        # More than one chunk: the transport says which go first (a handler's small units before a big one).
        deliveries = row.order(due) if row.order is not None and len(due) > size else due
        for start in range(0, len(deliveries), size):
            if pipeline.clock.now() > claim.claimed_until - margin:
                untried = [d.occurrence_id for d in deliveries[start:]]
                result.released += occurrences_release(token=claim.token, ids=untried)
                pipeline.drop(claim, untried)
                break
            yield Chunk(claim, callback_type, deliveries[start : start + size], callback_type in scheduled)


def _misfires(claim: Claim, jobs: Mapping[int, DeliveryJob], now: datetime) -> set[int]:
    """Rows of schedules claimed so late that a later run is due already: the misfire policy decides.

    Only a row at least one shortest period late can have been superseded, so an on-time scan asks
    the schedules nothing.
    """
    candidates = [
        o.id
        for o in claim.occurrences
        if (job := jobs.get(o.job_id)) is not None
        and job.schedule_key is not None
        and now - o.fire_at >= _SHORTEST_PERIOD
    ]
    if not candidates:
        return set()
    return schedules_misfire(token=claim.token, occurrence_ids=candidates, now=now)
