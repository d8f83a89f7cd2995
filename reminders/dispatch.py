"""The due scan: claim, deliver, mark. Three visible steps; see `occurrences_dispatch_batch`."""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from reminders.claiming import (
    Claim,
    ClaimedOccurrence,
    Failure,
    occurrences_claim_due,
    occurrences_mark_delivered,
    occurrences_mark_failed,
    occurrences_mark_skipped,
    occurrences_reap_expired,
)
from reminders.models import CallbackType, Job, Occurrence, OccurrenceStatus
from reminders.retry import RetryPolicy
from reminders.schedules import event_envelope
from reminders.throttling import throttled_claims
from reminders.transports import Delivery, get_transport

logger = logging.getLogger(__name__)

# How many deliveries of one type go out between two lease checks and marks. RabbitMQ publishes a whole
# batch in one transaction; HTTP and handlers are slower per item, so they are marked as they go.
_CHUNK: dict[str, int] = {CallbackType.RABBITMQ: 20000, CallbackType.HTTP: 64, CallbackType.HANDLER: 50}
# Stop starting new chunks when less than this is left of the lease: the rest is released, not risked.
# Never more than a quarter of the lease, or a short lease (the minimum is 5 s) would release every claim
# untried before its first chunk.
_LEASE_MARGIN = timedelta(seconds=5)
_DELIVERY_JOB_FIELDS = ("key", "callback_type", "target", "payload", "http_secret", "deadline_seconds")


@dataclass
class ScanResult:
    claimed: int = 0
    delivered: int = 0
    retried: int = 0
    failed: int = 0
    skipped: int = 0
    released: int = 0
    lost_lease: int = 0
    errors: dict[str, int] = field(default_factory=dict)

    def add(self, other: ScanResult) -> None:
        for name in ("claimed", "delivered", "retried", "failed", "skipped", "released", "lost_lease"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


def occurrences_dispatch_batch(
    *, batch_size: int | None = None, policy: RetryPolicy | None = None
) -> ScanResult:
    """Deliver one batch of due occurrences.

    1. Claim: one statement leases up to `batch_size` due rows (a new token, attempts + 1), committed at
       once, so no lock is held while we talk to brokers or endpoints. Throttled rows are claimed apart,
       one claim per throttle policy, each at most what the policy allows now (reminders/throttling.py).
    2. Deliver outside any transaction, grouped by transport (one AMQP transaction per RabbitMQ group).
    3. Mark each row delivered, retrying or failed, only where our lease token still matches.
    A crash between 2 and 3 leaves the rows claimed; the reaper returns them when the lease expires and
    they are delivered again with the same idempotency key (at-least-once).
    """
    policy = policy or RetryPolicy.from_settings()
    result = ScanResult()
    limit = batch_size or settings.REMINDERS_BATCH_SIZE
    claim_args = {
        "limit": limit,
        "lease_seconds": settings.REMINDERS_LEASE_SECONDS,
        "early_seconds": settings.REMINDERS_EARLY_SECONDS,
    }
    claims = [occurrences_claim_due(now=timezone.now(), **claim_args)]
    claims += throttled_claims(now=timezone.now(), **claim_args)
    for claim in claims:
        if claim.occurrences:
            _dispatch_claim(claim, policy, result)
    return result


def _dispatch_claim(claim: Claim, policy: RetryPolicy, result: ScanResult) -> None:
    result.claimed += len(claim.occurrences)
    # Only the columns a delivery needs: loading whole jobs (timestamps, owner, ...) was a fifth of the
    # scan's CPU time at a thousand rows per batch (bench/: dispatch scenario, py-spy).
    jobs = (
        Job.objects.select_related("schedule")
        .only(*_DELIVERY_JOB_FIELDS, "schedule__key")
        .in_bulk({o.job_id for o in claim.occurrences})
    )
    groups: dict[str, list[Delivery]] = defaultdict(list)
    late: list[int] = []
    now = timezone.now()
    for occurrence in claim.occurrences:
        job = jobs.get(occurrence.job_id)
        if job is None:
            continue  # deleted (with its occurrences) since the claim: nothing left to deliver or mark
        if job.deadline_seconds is not None and now - occurrence.fire_at > timedelta(
            seconds=job.deadline_seconds
        ):
            late.append(occurrence.id)
            continue
        groups[job.callback_type].append(_delivery(occurrence, job))
    if late:
        result.skipped += occurrences_mark_skipped(
            token=claim.token, ids=late, now=now, reason="past its deadline when claimed"
        )

    margin = min(_LEASE_MARGIN, timedelta(seconds=settings.REMINDERS_LEASE_SECONDS) / 4)
    for callback_type, deliveries in groups.items():
        size = _CHUNK.get(callback_type, 50)
        for start in range(0, len(deliveries), size):
            chunk = deliveries[start : start + size]
            if timezone.now() > claim.claimed_until - margin:
                result.released += _release(claim, [d.occurrence_id for d in deliveries[start:]])
                break
            _deliver_and_mark(callback_type, chunk, claim, policy, result)


def _deliver_and_mark(
    callback_type: str, chunk: Sequence[Delivery], claim: Claim, policy: RetryPolicy, result: ScanResult
) -> None:
    errors = get_transport(callback_type).deliver(chunk)
    now = timezone.now()
    accepted = [d.occurrence_id for d in chunk if d.occurrence_id not in errors]
    marked = occurrences_mark_delivered(token=claim.token, ids=accepted, now=now)
    result.delivered += marked
    result.lost_lease += len(accepted) - marked
    if errors:
        attempts = {d.occurrence_id: d.attempt for d in chunk}
        failures = [
            Failure(occurrence_id=oid, attempts=attempts[oid], error=str(exc), permanent=exc.permanent)
            for oid, exc in errors.items()
        ]
        occurrences_mark_failed(token=claim.token, failures=failures, now=now, policy=policy)
        for failure in failures:
            if failure.permanent or policy.exhausted(failure.attempts):
                result.failed += 1
            else:
                result.retried += 1
            kind = failure.error.split(":", 1)[0][:80]
            result.errors[kind] = result.errors.get(kind, 0) + 1


def _release(claim: Claim, ids: list[int]) -> int:
    """Hand rows back untried (the lease is nearly over); the attempt they were charged is refunded."""
    return Occurrence.objects.filter(
        id__any=ids, lease_token=claim.token, status=OccurrenceStatus.CLAIMED
    ).update(status=OccurrenceStatus.SCHEDULED, claimed_until=None, attempts=F("attempts") - 1)


def _delivery(occurrence: ClaimedOccurrence, job: Job) -> Delivery:
    payload = job.payload
    schedule = getattr(job, "schedule", None)
    if schedule is not None:
        # A schedule's events carry seed 001's envelope; its id is the idempotency key.
        payload = event_envelope(
            schedule_key=schedule.key,
            idempotency_key=occurrence.idempotency_key,
            fire_at=occurrence.fire_at,
            payload=job.payload,
        )
    return Delivery(
        occurrence_id=occurrence.id,
        idempotency_key=occurrence.idempotency_key,
        job_key=job.key,
        fire_at=occurrence.fire_at,
        attempt=occurrence.attempts,
        target=job.target,
        payload=payload,
        secret=job.http_secret,
    )


def occurrences_dispatch_for(*, seconds: float, batch_size: int | None = None) -> tuple[ScanResult, bool]:
    """Scan repeatedly for `seconds`, polling briefly when idle, so lateness is not bound to beat's tick.

    Returns the totals and whether the last batch was full (a backlog remains: re-kick at once).
    """
    policy = RetryPolicy.from_settings()
    size = batch_size or settings.REMINDERS_BATCH_SIZE
    totals = ScanResult()
    occurrences_reap_expired(now=timezone.now(), policy=policy)
    stop_at = time.monotonic() + seconds
    while True:
        batch = occurrences_dispatch_batch(batch_size=size, policy=policy)
        totals.add(batch)
        full = batch.claimed >= size
        if time.monotonic() >= stop_at:
            return totals, full
        if not full:
            time.sleep(settings.REMINDERS_POLL_SECONDS)
