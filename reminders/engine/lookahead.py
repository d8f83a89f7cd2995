"""The scan task's loop on PostgreSQL: claim a little ahead, fire each row at its instant, wake on NOTIFY.

Polling alone makes a reminder as late as the poll interval plus a claim. Here the scan claims the rows
due within REMINDERS_LOOKAHEAD_SECONDS (under its lease: they are `claimed` in the database and the reaper
returns them if this process dies), holds them in a timer queue (reminders/engine/timer.py) and publishes each
when the database's clock reaches its instant, through the same pipeline as the polling scan
(reminders/engine/dispatch.py): chunks, lease-token marks, deadlines, misfires, recover() on errors. Between
instants it waits on its LISTEN connection (reminders/engine/wakeup.py), so a write of something due now is
claimed at once; it still claims every REMINDERS_POLL_SECONDS, the safety net for a lost notification.

Throttled rows are claimed as the polling scan claims them (only what the bucket allows now, nothing held).
By default the scan never claims beyond its own end, and returns only when everything it held has been
published. The scan task passes a `carry`: it claims up to that long past its end and hands what it still
holds at its end to this process's carrier thread, which publishes it at its instants while Celery starts
the next scan. Without it, one worker publishes nothing from a scan's end until the next scan's first claim
(the task's bookkeeping, Celery's switch to the next task, the reap and the claim: tens of milliseconds,
every second). The carried rows stay claimed under the scan's lease, so a process that dies with them
leaves them to the reaper, as it would inside a scan.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection

from reminders.engine.chunks import claim_chunks
from reminders.engine.claim_types import Claim, ClaimedOccurrence
from reminders.engine.claiming import (
    occurrences_claim_due,
    occurrences_mark_skipped,
    occurrences_reap_expired,
)
from reminders.engine.clock import DbClock
from reminders.engine.connection_thread import ConnectionThread, marker
from reminders.engine.dialect import wakes_on_notify
from reminders.engine.dispatch import Pipeline, ScanResult, occurrences_dispatch_for
from reminders.engine.kick import lookahead_seconds
from reminders.engine.retry import RetryPolicy
from reminders.engine.throttling import throttled_claims
from reminders.engine.timer import Held, Recheck, TimerQueue, held_current, held_reload
from reminders.engine.wakeup import listener
from reminders.ops import metrics

# With less than this to wait, mark the chunk in flight later rather than now: it could make us late.
_SETTLE_GAP = 0.003
# One query checks every held row due within this window once the first of them is due: at a thousand
# rows a second, one query per ten rows instead of one per row. It is as long as a change can take to be
# seen (without a look-ahead: the time from the claim to the last chunk of its batch).
_CHECK_WINDOW = timedelta(milliseconds=10)
# Wake this long after the next instant, so instants within it go out together in one chunk (one AMQP
# transaction) rather than one transaction per row: at 3,000 fires/s that is six rows a chunk.
_GATHER = 0.002
# Rows per claim while nothing due is waiting (see `_loop`).
_AHEAD_LIMIT = 200
# Chunks sent at their instants are small (a few rows): their marks are gathered this long into one UPDATE
# (each row's delivered_at is still the time the broker confirmed its own chunk: a CASE in that UPDATE).
_MARK_AFTER = 0.02
# The scan task's carry (see the module's docstring): longer than the gap between two scans of one worker
# (tens of milliseconds; more on a loaded machine), shorter than a scan, so one carry is done before the next.
CARRY_SECONDS = 0.5
STALE_REASON = "its job changed while the occurrence was held for its instant"

logger = logging.getLogger(__name__)


def occurrences_fire_for(
    *,
    seconds: float,
    batch_size: int | None = None,
    carry: float = 0.0,
    carried: Callable[[ScanResult], None] | None = None,
) -> tuple[ScanResult, bool]:
    """Claim ahead and fire at each instant for `seconds` (then drain what is held); SQLite polls.

    With `carry`, rows due up to `carry` seconds after the end are claimed too, and whatever is still held
    at the end is published by the carrier thread after this returns; `carried` gets its totals then.
    Returns the totals and whether the last claim was full of rows due already (a backlog: re-kick).
    """
    if not wakes_on_notify():
        return occurrences_dispatch_for(seconds=seconds, batch_size=batch_size)
    policy = RetryPolicy.from_settings()
    size = batch_size or settings.REMINDERS_BATCH_SIZE
    totals = ScanResult()
    clock = DbClock.read()
    occurrences_reap_expired(now=clock.now(), policy=policy)
    # Threads of their own mark and carry, on their own connections: not inside a transaction (a test's),
    # whose rows no other connection sees.
    apart = not connection.in_atomic_block
    pipeline = Pipeline(policy, totals, clock, mark_after=_MARK_AFTER, marker=marker() if apart else None)
    timers = TimerQueue()
    carry = min(carry, lookahead_seconds()) if apart else 0.0
    if carry:
        carrier().ready()  # its connection is open by the time it is handed the carry
    try:
        backlog = _loop(pipeline, timers, size, seconds, carry)
    except Exception:
        timers.clear()
        pipeline.recover()  # hands back every held row too: the pipeline holds them by their claim
        raise
    if timers:  # only with a carry: rows due within it, held by this pipeline (settled: nothing in flight)
        pipeline.result = ScanResult()
        carrier().submit(functools.partial(_carry, pipeline, timers, carried))
    return totals, backlog


def _loop(pipeline: Pipeline, timers: TimerQueue, size: int, seconds: float, carry: float) -> bool:
    ahead = lookahead_seconds()
    poll = settings.REMINDERS_POLL_SECONDS
    wake = listener()
    stop_at = time.monotonic() + seconds
    claim_until = stop_at + carry
    next_claim = time.monotonic()
    first, full, backlog = True, False, False
    while True:
        now = time.monotonic()
        if first or (now >= next_claim and now < stop_at):
            first = False
            # Never beyond the scan's end (and its carry): whatever is claimed is published by this process.
            # Small claims while on time: a claim of a thousand rows takes tens of milliseconds, during which
            # nothing due goes out. A backlog (a full claim of rows due already) is claimed in full batches.
            limit = size if backlog else min(size, _AHEAD_LIMIT)
            full, backlog = _claim(pipeline, timers, limit, max(0.0, min(ahead, claim_until - now)))
            next_claim = time.monotonic() + (0.0 if full else poll)
        _fire_due(pipeline, timers)
        now = time.monotonic()
        if now >= stop_at and (not timers or carry):
            pipeline.settle()  # the carrier, if any, gets the rest with nothing in flight
            return backlog
        if full and now < stop_at:
            continue  # more is claimable at once
        # Past the scan's end only the instants of what it still holds are waited for (never a busy loop).
        until = min(next_claim, stop_at) if now < stop_at else math.inf
        instant = timers.next_due()
        if instant is not None:
            until = min(until, _monotonic(pipeline.clock, instant) + _GATHER)
        if until - now > _SETTLE_GAP:
            pipeline.settle(marked=False)  # idle time: read the outcome of the chunk in flight, mark it
            now = time.monotonic()
        if until > now and wake.wait(until - now) and time.monotonic() < stop_at:
            next_claim = time.monotonic()  # something due soon was written: claim it now


def _monotonic(clock: DbClock, instant: datetime) -> float:
    """The monotonic time at which the database's clock (as `clock` carries it on) reaches `instant`."""
    return clock.arrived + (instant - clock.at).total_seconds()


def _claim(pipeline: Pipeline, timers: TimerQueue, limit: int, ahead: float) -> tuple[bool, bool]:
    """Claim rows due within `ahead`: send those due now, hold the rest. Returns (full, full of due)."""
    lease, early = settings.REMINDERS_LEASE_SECONDS, settings.REMINDERS_EARLY_SECONDS
    clock = pipeline.clock = DbClock.read()
    now = clock.now()
    claim = occurrences_claim_due(
        now=now, limit=limit, lease_seconds=lease, early_seconds=max(float(early), ahead)
    )
    pipeline.hold(claim)
    edge = now + timedelta(seconds=early)
    due = [o for o in claim.occurrences if o.due_at <= edge]
    later = [o for o in claim.occurrences if o.due_at > edge]
    claims = [Claim(claim.token, claim.claimed_until, due)]
    timers.hold(claim, later)
    for throttled in throttled_claims(now=now, limit=limit, lease_seconds=lease, early_seconds=early):
        pipeline.hold(throttled)  # committed: from here an error must hand it back
        claims.append(throttled)
    for each in claims:
        if each.occurrences:
            for chunk in claim_chunks(each, pipeline):
                pipeline.send(chunk)
    pipeline.result.claimed += len(claim.occurrences) + sum(len(c.occurrences) for c in claims[1:])
    return len(claim.occurrences) >= limit, len(due) >= limit


def _fire_due(pipeline: Pipeline, timers: TimerQueue) -> None:
    """Publish every held row whose instant has come; check the ones not checked yet first."""
    if not timers:
        return
    now = pipeline.clock.now()
    groups = timers.pop_to_check(now, _CHECK_WINDOW)
    if groups:
        for (held, rows), check in zip(groups, held_current(groups), strict=True):
            _checked(pipeline, timers, held, rows, check)
    for held, rows in timers.pop_ready(pipeline.clock.now()):
        for chunk in claim_chunks(held.part(rows), pipeline, held.jobs):
            pipeline.send(chunk)


def _checked(
    pipeline: Pipeline, timers: TimerQueue, held: Held, rows: list[ClaimedOccurrence], check: Recheck
) -> None:
    """Drop the rows that are gone, skip the stale ones, re-read changed jobs; the rest are ready."""
    part = held.part(rows)
    if check.gone:
        pipeline.drop(part, check.gone)
    if check.stale:
        pipeline.result.skipped += occurrences_mark_skipped(
            token=part.token, ids=check.stale, now=pipeline.clock.now(), reason=STALE_REASON
        )
        pipeline.drop(part, check.stale)
        for o in rows:
            if o.id in check.stale and (job := held.jobs.get(o.job_id)) is not None:
                metrics.occurrences_ended("skipped", job.callback_type)
    if check.changed_jobs:
        held_reload(held, check.changed_jobs)
    dropped = set(check.gone) | set(check.stale)
    timers.ready(held, [o for o in rows if o.id not in dropped])


def _drain(pipeline: Pipeline, timers: TimerQueue) -> None:
    """Publish everything held at its instant, then mark it (the carrier's part of a scan)."""
    try:
        while timers:
            _fire_due(pipeline, timers)
            instant = timers.next_due()
            if instant is None:
                break
            until = _monotonic(pipeline.clock, instant) + _GATHER
            now = time.monotonic()
            if until - now > _SETTLE_GAP:
                pipeline.settle(marked=False)
                now = time.monotonic()
            if until > now:
                time.sleep(until - now)
        pipeline.settle()
    except Exception:
        timers.clear()
        pipeline.recover()
        raise


def _carry(pipeline: Pipeline, timers: TimerQueue, done: Callable[[ScanResult], None] | None) -> None:
    """On the carrier's thread: publish what a scan held at its end, then hand its totals to `done`."""
    try:
        _drain(pipeline, timers)
        if done is not None:
            done(pipeline.result)
    except Exception:
        # The rows not marked are covered by their lease (recover() handed back what it could).
        logger.exception("the carrier could not publish what a scan held at its end")


# Its database connection is its own (Django's are per thread) and kept between scans; the transport is
# shared, and its lock lets one chunk at a time be in flight.
_carrier = ConnectionThread("reminders-carrier")


def carrier() -> ConnectionThread:
    """The thread publishing what a scan still held at its end, while the next scan starts."""
    return _carrier
