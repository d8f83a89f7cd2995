"""Prometheus metrics of the engine, and the per-occurrence log lines that go with them.

The engine calls one function of this module per event (a chunk marked, a claim timed), so
the instrumentation is a line at each place and everything about labels, buckets and log fields lives here.

Processes: with `PROMETHEUS_MULTIPROC_DIR` set before the process starts (scripts/run-all.sh does it), every
process (gunicorn workers, Celery prefork children, the push gateway) writes its samples to files in that
directory and the web's `/metrics` sums them (prometheus-client's multiprocess mode); without it, samples
stay in the process's memory. Gauges that describe the database (backlog, last scan) are not kept in any
process: `reminders.ops.db_gauges` computes them at scrape time.
"""

from __future__ import annotations

import bisect
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from functools import wraps
from typing import Any, ParamSpec, TypeVar

from django.db.models import Count, QuerySet
from prometheus_client import Counter, Histogram

from reminders.models import Occurrence, OccurrenceStatus
from reminders.transports.base import Delivery, InFlight, Settled, TransportError

logger = logging.getLogger("reminders.engine.occurrences")

P = ParamSpec("P")
R = TypeVar("R")

# 1 ms to 10 min: the punctuality target is milliseconds, the alert is at a minute, a stalled scheduler
# shows in the last buckets.
LATENESS_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
)  # fmt: skip
# A claim of 1,000 rows takes tens of milliseconds; a publish of a whole batch up to a second or so.
DURATION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

OCCURRENCES = Counter(
    "reminders_occurrences",
    "Occurrence attempts that ended, by outcome (delivered, retried, failed, skipped, cancelled).",
    ["outcome", "callback"],
)
LATENESS = Histogram(
    "reminders_fire_lateness_seconds",
    "Delivered time (broker or endpoint accepted) minus the occurrence's fire time; early counts as 0.",
    ["callback"],
    buckets=LATENESS_BUCKETS,
)
CLAIM_SECONDS = Histogram(
    "reminders_claim_seconds", "Time of one claim statement (one batch).", buckets=DURATION_BUCKETS
)
PUBLISH_SECONDS = Histogram(
    "reminders_publish_seconds",
    "From the first publish of a chunk until its outcome is known (RabbitMQ: commit-ok).",
    ["callback"],
    buckets=DURATION_BUCKETS,
)
_enabled = True


def set_enabled(enabled: bool) -> None:
    """Turn every recording function into a no-op (the benchmark measures dispatch with and without)."""
    global _enabled
    _enabled = enabled


def occurrences_delivered(
    callback: str,
    deliveries: Sequence[Delivery],
    errors: Mapping[int, TransportError],
    marked: int,
    now: datetime,
) -> None:
    """A chunk's accepted deliveries were marked: count them and record their lateness.

    `marked` can be below the accepted count when our lease was lost meanwhile (another worker owns those
    rows and will count them); then only the first `marked` are recorded.
    """
    if not _enabled or not marked:
        return
    OCCURRENCES.labels("delivered", callback).inc(marked)
    debug = logger.isEnabledFor(logging.DEBUG)
    latenesses: list[float] = []
    for delivery in deliveries:
        if delivery.occurrence_id in errors:
            continue
        lateness = max((now - delivery.fire_at).total_seconds(), 0.0)
        latenesses.append(lateness)
        if debug:
            logger.debug("delivered", extra=_fields(delivery, "delivered", lateness))
        if len(latenesses) == marked:
            break
    _observe_many(LATENESS.labels(callback), latenesses)


def _observe_many(histogram: Any, values: Sequence[float]) -> None:
    """`histogram.observe(v)` for every value, with one increment per bucket instead of one per value.

    A RabbitMQ chunk is up to 20,000 deliveries, and observe() per value was a visible share of the
    dispatch loop's CPU (docs/benchmarks.md, "Figures moved out of the code"). Same result: `observe`
    adds 1 to the first bucket whose bound is >= the value (buckets are cumulated when collected) and the
    value to the sum. Uses the pinned client's bucket attributes.
    """
    bounds = histogram._upper_bounds
    counts = [0] * len(bounds)
    for value in values:
        counts[bisect.bisect_left(bounds, value)] += 1
    for bucket, count in zip(histogram._buckets, counts, strict=True):
        if count:
            bucket.inc(count)
    histogram._sum.inc(sum(values))


def occurrences_failed(
    callback: str,
    deliveries: Sequence[Delivery],
    errors: Mapping[int, TransportError],
    exhausted: Callable[[int], bool],
    now: datetime,
) -> None:
    """Deliveries the transport refused: each is `retried` or `failed` (permanent error, or out of attempts),
    the same rule as the mark (reminders/engine/claiming.py)."""
    if not _enabled or not errors:
        return
    for delivery in deliveries:
        error = errors.get(delivery.occurrence_id)
        if error is None:
            continue
        outcome = "failed" if error.permanent or exhausted(delivery.attempt) else "retried"
        OCCURRENCES.labels(outcome, callback).inc()
        lateness = max((now - delivery.fire_at).total_seconds(), 0.0)
        logger.warning(
            "occurrence %s of %s, attempt %d, %s: %s",
            delivery.occurrence_id, delivery.job_key, delivery.attempt, outcome, str(error)[:500],
            extra={**_fields(delivery, outcome, lateness), "error": str(error)[:2000]},
        )  # fmt: skip


def occurrences_ended(outcome: str, callback: str, count: int = 1) -> None:
    """Occurrences that ended without a delivery attempt of ours (skipped, cancelled, reaped)."""
    if _enabled and count:
        OCCURRENCES.labels(outcome, callback).inc(count)


def timed_claim(func: Callable[P, R]) -> Callable[P, R]:
    """Decorator: record the duration of every claim statement."""

    @wraps(func)
    def timed(*args: P.args, **kwargs: P.kwargs) -> R:
        if not _enabled:
            return func(*args, **kwargs)
        start = time.perf_counter()
        try:
            return func(*args, **kwargs)
        finally:
            CLAIM_SECONDS.observe(time.perf_counter() - start)

    return timed


def publish_timed(
    callback: str, start: Callable[[Sequence[Delivery]], InFlight], deliveries: Sequence[Delivery]
) -> InFlight:
    """Start a chunk's delivery through `start` and record how long until its outcome is known."""
    if not _enabled:
        return start(deliveries)
    began = time.perf_counter()
    flight = start(deliveries)
    if isinstance(flight, Settled):  # delivered before start() returned (HTTP, handlers)
        PUBLISH_SECONDS.labels(callback).observe(time.perf_counter() - began)
        return flight
    return _TimedFlight(flight, callback, began)


class _TimedFlight:
    def __init__(self, flight: InFlight, callback: str, began: float) -> None:
        self._flight, self._callback, self._began = flight, callback, began

    def wait(self) -> Mapping[int, TransportError]:
        try:
            return self._flight.wait()
        finally:
            PUBLISH_SECONDS.labels(self._callback).observe(time.perf_counter() - self._began)


def _fields(delivery: Delivery, outcome: str, lateness: float) -> dict[str, Any]:
    """The structured fields of one occurrence's log line (rendered by reminders.ops.logformat in JSON
    mode)."""
    return {
        "key": delivery.job_key,
        "occurrence_id": delivery.occurrence_id,
        "idempotency_key": delivery.idempotency_key,
        "attempt": delivery.attempt,
        "outcome": outcome,
        "lateness_seconds": round(lateness, 6),
    }


def occurrences_cancelled(occurrences: QuerySet[Occurrence], *, finished_at: datetime, count: int) -> None:
    """`count` rows of `occurrences` were just cancelled at `finished_at`: count them by callback type."""
    if not _enabled or not count:
        return
    cancelled = occurrences.filter(status=OccurrenceStatus.CANCELLED, finished_at=finished_at)
    for callback, n in cancelled.values_list("job__callback_type").annotate(n=Count("id")).order_by():
        OCCURRENCES.labels("cancelled", callback).inc(n)


def occurrences_reaped_failed(ids: Sequence[int]) -> None:
    """The reaper failed these rows (their lease expired on the last allowed attempt)."""
    if not _enabled or not ids:
        return
    failed = Occurrence.objects.filter(id__in=list(ids), status=OccurrenceStatus.FAILED)
    for callback, n in failed.values_list("job__callback_type").annotate(n=Count("id")).order_by():
        OCCURRENCES.labels("failed", callback).inc(n)
