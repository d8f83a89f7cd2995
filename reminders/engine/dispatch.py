"""The due scan: claim, deliver, mark. Three visible steps; see `occurrences_dispatch_batch`.

Whether a row is due, a lease still holds or a deadline passed is judged by the database's clock
(reminders/engine/clock.py), read once per batch, never by this host's.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, connection

from reminders.engine.chunks import Chunk, claim_chunks
from reminders.engine.claiming import (
    Claim,
    Failure,
    occurrences_claim_due,
    occurrences_mark_delivered,
    occurrences_mark_failed,
    occurrences_reap_expired,
)
from reminders.engine.clock import DbClock
from reminders.engine.connection_thread import ConnectionThread
from reminders.engine.lane import DEFER_SECONDS, Lane, http_lane
from reminders.engine.occurrences import occurrences_release
from reminders.engine.retry import RetryPolicy
from reminders.engine.scan_result import ScanResult
from reminders.engine.throttling import throttled_claims
from reminders.ops import metrics
from reminders.transports import InFlight, Settled, TransportError, get_transport, transport_row

logger = logging.getLogger(__name__)


def occurrences_dispatch_batch(
    *, batch_size: int | None = None, policy: RetryPolicy | None = None
) -> ScanResult:
    """Deliver one batch of due occurrences.

    1. Claim: one statement leases up to `batch_size` due rows (a new token, attempts + 1), committed at
       once, so no lock is held while we talk to brokers or endpoints. Throttled rows are claimed apart,
       one claim per throttle policy, each at most what the policy allows now
       (reminders/engine/throttling.py).
    2. Deliver outside any transaction, grouped by transport (one AMQP transaction per RabbitMQ group).
    3. Mark each row delivered, retrying or failed, only where our lease token still matches.
    A crash between 2 and 3 leaves the rows claimed; the reaper returns them when the lease expires and
    they are delivered again with the same idempotency key (at-least-once).
    """
    policy = policy or RetryPolicy.from_settings()
    result = ScanResult()
    pipeline = Pipeline(policy, result, DbClock.read())
    try:
        _scan(pipeline, batch_size or settings.REMINDERS_BATCH_SIZE)
        pipeline.settle()
    except Exception:
        pipeline.recover()
        raise
    return result


def occurrences_dispatch_for(
    *, seconds: float, batch_size: int | None = None, until_idle: bool = False
) -> tuple[ScanResult, bool]:
    """Scan repeatedly for `seconds`, polling briefly when idle, so lateness is not bound to beat's tick.

    With `until_idle`, return as soon as a batch comes back short instead (nothing more is due now).
    Batches overlap: the next claim runs while the broker commits the last one (see `Pipeline`).
    Returns the totals and whether the last batch was full (a backlog remains: re-kick at once).
    """
    policy = RetryPolicy.from_settings()
    size = batch_size or settings.REMINDERS_BATCH_SIZE
    totals = ScanResult()
    clock = DbClock.read()
    occurrences_reap_expired(now=clock.now(), policy=policy)
    pipeline = Pipeline(policy, totals, clock)
    stop_at = time.monotonic() + seconds
    try:
        while True:
            full = _scan(pipeline, size) >= size
            if time.monotonic() >= stop_at or (until_idle and not full):
                pipeline.settle()
                return totals, full
            if not full:
                pipeline.settle()  # nothing is left in flight while we sleep
                time.sleep(settings.REMINDERS_POLL_SECONDS)
    except Exception:
        pipeline.recover()
        raise


def _scan(pipeline: Pipeline, limit: int) -> int:
    """Claim one batch and send it through the pipeline; returns how many unthrottled rows it claimed."""
    claim_args = {
        "limit": limit,
        "lease_seconds": settings.REMINDERS_LEASE_SECONDS,
        "early_seconds": settings.REMINDERS_EARLY_SECONDS,
    }
    # One reading of the database's clock per batch; every decision of the batch is taken by it.
    clock = pipeline.clock = DbClock.read()
    claim = occurrences_claim_due(now=clock.now(), **claim_args)
    pipeline.hold(claim)
    claims = [claim]
    for throttled in throttled_claims(now=clock.now(), **claim_args):
        pipeline.hold(throttled)  # committed: from here an error must hand it back
        claims.append(throttled)
    for each in claims:
        if each.occurrences:
            pipeline.result.claimed += len(each.occurrences)
            for chunk in claim_chunks(each, pipeline):
                pipeline.send(chunk)
    return len(claim.occurrences)


class Pipeline:
    """Sends chunks so that the database works while the broker commits: at most one chunk in flight.

    `send` waits for the previous chunk's outcome, starts the new chunk, and only then marks the previous
    one; the caller's next claim also runs while the new chunk is in flight (the broker's `commit-ok` on
    1,000 messages took longer than claiming and marking them). A chunk is marked only after its outcome
    is known and only while its lease holds. A transport that has delivered by the time `start` returns
    (HTTP, handlers: `Settled`) is marked at once.

    It also keeps the books of what this scan holds: claimed rows not handed to a transport yet, and
    outcomes not marked yet. After an error (a terminated database backend, say) `recover` hands the
    first back and marks the second on a fresh connection, so an error costs seconds, not a lease.
    """

    def __init__(
        self,
        policy: RetryPolicy,
        result: ScanResult,
        clock: DbClock,
        *,
        mark_after: float = 0.0,
        marker: ConnectionThread | None = None,
    ) -> None:
        self.policy = policy
        self.result = result
        self.clock = clock  # the latest batch's reading of the database's clock
        # `send` leaves outcomes unmarked until the oldest is this old (the look-ahead scan sends many small
        # chunks: one UPDATE for many of them, reminders/engine/lookahead.py); `settle` marks them all.
        self.mark_after = mark_after
        self._flight: tuple[Chunk, InFlight] | None = None
        self._unsent: dict[uuid.UUID, tuple[Claim, set[int]]] = {}
        self._outcomes: list[_Outcome] = []
        # With a marker, outcomes are marked by its thread: the caller publishing at instants does not wait
        # for the UPDATEs (a few milliseconds each, tens on a loaded machine). What it failed to mark comes
        # back here, with its error, to be raised in the caller's thread (whose `recover` marks it again).
        self._marker = marker
        self._marked: threading.Event | None = None  # set once the last outcomes handed over are marked
        self._marker_failed: list[_Outcome] = []
        self._marker_error: Exception | None = None

    def hold(self, claim: Claim) -> None:
        """A committed claim: its rows are ours to deliver, or to hand back."""
        if claim.occurrences:
            self._unsent[claim.token] = (claim, {o.id for o in claim.occurrences})

    def drop(self, claim: Claim, ids: Iterable[int]) -> None:
        """These rows of `claim` need nothing more from this scan (sent, skipped, released or gone)."""
        entry = self._unsent.get(claim.token)
        if entry is not None:
            entry[1].difference_update(ids)
            if not entry[1]:
                del self._unsent[claim.token]

    def send(self, chunk: Chunk) -> None:
        previous, self._flight = self._flight, None
        if previous is not None:
            self._outcomes.append(_Outcome(previous[0], previous[1].wait()))
        ids = [d.occurrence_id for d in chunk.deliveries]
        if self._marker is not None and transport_row(chunk.callback_type).laned and Lane.capacity():
            self._send_in_lane(chunk, ids)
        else:
            self.drop(chunk.claim, ids)
            start = get_transport(chunk.callback_type).start
            self._flight = (chunk, metrics.publish_timed(chunk.callback_type, start, chunk.deliveries))
        if not self._outcomes or time.monotonic() - self._outcomes[0].known >= self.mark_after:
            self._mark_known()
        if self._flight is not None and isinstance(self._flight[1], Settled):
            # Delivered before start() returned (handlers; HTTP without its lane): there is nothing to
            # overlap, and holding the mark back until the next chunk would only risk the lease.
            self.settle()

    def _send_in_lane(self, chunk: Chunk, ids: list[int]) -> None:
        """Hand an HTTP chunk to the lane (reminders/engine/lane.py), or, when it is full, hand its rows
        back due a moment later: either way the scan goes on at once. Its marks are the marker's."""
        lane = http_lane()
        if not lane.take():
            until = self.clock.now() + timedelta(seconds=DEFER_SECONDS)
            self.result.released += occurrences_release(token=chunk.claim.token, ids=ids, until=until)
            self.drop(chunk.claim, ids)
            return
        self.drop(chunk.claim, ids)
        marker, policy, clock = self._marker, self.policy, self.clock
        assert marker is not None

        def deliver() -> None:
            start = get_transport(chunk.callback_type).start
            flight = metrics.publish_timed(chunk.callback_type, start, chunk.deliveries)
            outcome = _Outcome(chunk, flight.wait())
            marker.submit(lambda: _mark_apart(outcome, policy, clock))

        lane.run(deliver)

    def settle(self, *, marked: bool = True) -> None:
        """Wait for the chunk in flight, if any, and mark every known outcome.

        Without `marked`, the marks may still be under way on the marker's thread when this returns.
        """
        if self._flight is not None:
            chunk, flight = self._flight
            self._flight = None
            self._outcomes.append(_Outcome(chunk, flight.wait()))
        self._mark_known()
        if marked and self._marked is not None:
            self._marked.wait()
            self._raise_marker_error()

    def recover(self) -> None:
        """After an error: mark what was published and hand back what was not, on a fresh connection.

        Retried with a short backoff while the database stays away, until the leases run out; from then
        on the reaper returns the rows (every write here is conditional on the lease token, so a late
        one changes nothing).
        """
        if self._flight is not None:
            chunk, flight = self._flight
            self._flight = None
            self._outcomes.append(_Outcome(chunk, flight.wait()))  # frees the transport; wait never raises
        if self._marker is not None:
            if self._marked is not None:
                self._marked.wait()  # nothing is marked behind our back from here on
            self._outcomes[:0], self._marker_failed, self._marker_error = self._marker_failed, [], None
            self._marker = None
        if not self._outcomes and not self._unsent:
            return
        claims = [o.chunk.claim for o in self._outcomes] + [claim for claim, _ in self._unsent.values()]
        give_up_at = max(claim.claimed_until for claim in claims)
        pause = 0.05
        while True:
            _reconnect_if_broken()
            try:
                self._mark_known()
                for claim, ids in list(self._unsent.values()):
                    self.result.released += occurrences_release(token=claim.token, ids=sorted(ids))
                    self.drop(claim, ids)
                return
            except DatabaseError:
                if self.clock.now() + timedelta(seconds=pause) >= give_up_at:
                    logger.exception("could not hand a batch back after an error; its lease will expire")
                    return
                time.sleep(pause)
                pause = min(pause * 2, 1.0)
            except Exception:
                # Not the database being away: trying again would fail the same way. The scan's own error
                # is what the caller sees; the lease covers the rows.
                logger.exception("could not hand a batch back after an error; its lease will expire")
                return

    def _mark_known(self) -> None:
        if self._marker is None:
            self._mark_all(self._outcomes)
            return
        self._raise_marker_error()
        if self._outcomes:
            outcomes, self._outcomes = self._outcomes, []
            self._marked = self._marker.submit(lambda: self._mark_off(outcomes))

    def _mark_off(self, outcomes: list[_Outcome]) -> None:
        """On the marker's thread: mark `outcomes`; on an error keep what is left for the caller."""
        try:
            self._mark_all(outcomes)
        except Exception as exc:
            _reconnect_if_broken()
            self._marker_failed += outcomes
            self._marker_error = self._marker_error or exc

    def _raise_marker_error(self) -> None:
        if self._marker_error is not None:
            exc, self._marker_error = self._marker_error, None
            self._outcomes[:0], self._marker_failed = self._marker_failed, []
            raise exc

    def _mark_all(self, outcomes: list[_Outcome]) -> None:
        """Mark `outcomes`, removing each from the list once marked."""
        while outcomes:
            # Consecutive error-free outcomes of one claim and callback type are marked by one UPDATE.
            first, n = outcomes[0], 1
            while (
                n < len(outcomes)
                and not first.errors
                and not first.delivered_marked
                and not (other := outcomes[n]).errors
                and (other.chunk.claim.token, other.chunk.callback_type)
                == (first.chunk.claim.token, first.chunk.callback_type)
            ):
                n += 1
            if n > 1:
                parts = outcomes[:n]
                deliveries = [d for o in parts for d in o.chunk.deliveries]
                advance = any(o.chunk.advance for o in parts)
                chunk = Chunk(first.chunk.claim, first.chunk.callback_type, deliveries, advance)
                first = _Outcome(chunk, {}, known=max(o.known for o in parts), parts=parts)
            self._mark(first)
            del outcomes[:n]

    def _at(self, instant: float) -> datetime:
        """The database's time at monotonic `instant`, by the latest reading of its clock."""
        return self.clock.at + timedelta(seconds=instant - self.clock.arrived)

    def _mark(self, outcome: _Outcome) -> None:
        result, chunk, errors = self.result, outcome.chunk, outcome.errors
        token = chunk.claim.token
        now = self._at(outcome.known)  # when the broker confirmed (the latest of gathered chunks)
        if not outcome.delivered_marked:
            accepted = [d.occurrence_id for d in chunk.deliveries if d.occurrence_id not in errors]
            # Gathered chunks each keep the instant their broker accepted them (one UPDATE still).
            accepted_at = [
                ([d.occurrence_id for d in part.chunk.deliveries], self._at(part.known))
                for part in outcome.parts
            ]
            marked = occurrences_mark_delivered(
                token=token, ids=accepted, now=now, advance=chunk.advance, accepted_at=accepted_at
            )
            outcome.delivered_marked = True  # a retry after an error below must not mark (and count) twice
            result.delivered += marked
            result.lost_lease += len(accepted) - marked
            for part in outcome.parts or [outcome]:
                count = min(marked, len(part.chunk.deliveries))
                metrics.occurrences_delivered(
                    chunk.callback_type, part.chunk.deliveries, errors, count, self._at(part.known)
                )
                marked -= count
        if not errors:
            return
        attempts = {d.occurrence_id: d.attempt for d in chunk.deliveries}
        failures = [
            Failure(occurrence_id=oid, attempts=attempts[oid], error=str(exc), permanent=exc.permanent)
            for oid, exc in errors.items()
        ]
        occurrences_mark_failed(token=token, failures=failures, now=now, policy=self.policy)
        metrics.occurrences_failed(chunk.callback_type, chunk.deliveries, errors, self.policy.exhausted, now)
        for failure in failures:
            if failure.permanent or self.policy.exhausted(failure.attempts):
                result.failed += 1
            else:
                result.retried += 1
            kind = failure.error.split(":", 1)[0][:80]
            result.errors[kind] = result.errors.get(kind, 0) + 1


@dataclass
class _Outcome:
    """A chunk whose delivery outcome is known and whose rows are not marked yet."""

    chunk: Chunk
    errors: Mapping[int, TransportError]
    delivered_marked: bool = False
    known: float = field(default_factory=time.monotonic)  # when the outcome came in
    parts: list[_Outcome] = field(default_factory=list)  # outcomes gathered into this one, for metrics


def _mark_apart(outcome: _Outcome, policy: RetryPolicy, clock: DbClock) -> None:
    """On the marker thread: mark a lane chunk's outcome as the scan would, retrying while its lease lasts
    (`recover`); the counts go to the lane's totals."""
    result = ScanResult()
    pipeline = Pipeline(policy, result, clock)
    pipeline._outcomes.append(outcome)
    try:
        pipeline.settle()
    except Exception:
        logger.warning("marking an HTTP chunk failed; trying again while its lease lasts", exc_info=True)
        pipeline.recover()
    finally:
        http_lane().add(result)


def _reconnect_if_broken() -> None:
    """Drop a connection the error left unusable (a terminated backend), so the next query opens a new one.

    Inside a transaction (tests run in one) the connection is not ours to close.
    """
    if not connection.in_atomic_block:
        connection.close_if_unusable_or_obsolete()
