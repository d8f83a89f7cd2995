"""A schedule's timeline: the chaining of one fire point to the next, misfires, and the preview.

When one of a point's occurrences ends (delivered, skipped past its deadline, or failed), the claiming
code calls `schedules_advance` in the same transaction as the mark, and the next point is computed from
`next_fire_at` on the schedule's own timeline, never from the delivery time, so a late delivery never
shifts the timeline.

Misfires (a later point already came due, after downtime or a long backlog), applied both when the
stored point is claimed (`schedules_misfire`: the stale point is skipped, not sent) and when the next
point is computed:
- `fire_once` (default): one occurrence stands for every missed run, the latest of them; the timeline then
  continues from it, as cron-like schedulers do (anacron, Kubernetes CronJob).
- `skip`: nothing for the missed runs; the next point after now. A run that came due less than
  REMINDERS_MISFIRE_GRACE_SECONDS ago is on time, not missed, and is sent.
A schedule's `deadline_seconds` (from its job) still applies on top: an occurrence claimed more than that
late is recorded as `skipped` and the timeline goes on.

Event ids are deterministic (`<key>-<unix fire time>[-<batch index>]`) and the idempotency key is unique,
so the same fire point is never materialised twice: an insert of an existing id is a no-op, except that a
cancelled row is revived (an update that keeps the same next point).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from reminders import queries
from reminders.engine.dialect import speaks_postgresql
from reminders.engine.inserts import batch_offset, occurrences_insert_idempotent
from reminders.engine.occurrences import occurrences_skip_superseded
from reminders.models import MisfirePolicy, Occurrence, Schedule
from reminders.schedules.cron import AtTimeline, Timeline, timeline_for

TINY = timedelta(microseconds=1)
# fire_once walks forward from the evaluator's estimate of the latest missed point to the exact one; a
# few steps are enough (the estimate is exact except around DST changes).
_CATCH_UP_STEPS = 64


def event_id(schedule_key: str, fire_at: datetime, batch_index: int) -> str:
    """Seed 001's event id; the first event of a trigger has no suffix, the others `-1` … `-(n-1)`."""
    base = f"{schedule_key}-{int(fire_at.timestamp())}"
    return base if batch_index == 0 else f"{base}-{batch_index}"


def schedule_timeline(schedule: Schedule) -> Timeline:
    """The schedule's expression read in its zone, counted from its anchor."""
    return timeline_for(
        schedule.expression,
        zone=schedule.timezone,
        anchor=schedule.anchor_at,
        anchor_fires=schedule.start_at is not None,
    )


def schedule_preview(schedule: Schedule, *, count: int, now: datetime | None = None) -> list[datetime]:
    """The next `count` fire times from now (or from the materialised point, which may be just past)."""
    now = now or timezone.now()
    timeline = schedule_timeline(schedule)
    fires: list[datetime] = []
    instant = now - TINY
    if schedule.next_fire_at is not None and schedule.next_fire_at <= now:
        fires.append(schedule.next_fire_at)
        instant = schedule.next_fire_at
    while len(fires) < count:
        fire = schedule_fire_after(schedule, timeline, instant)
        if fire is None:
            break
        fires.append(fire)
        instant = fire
    return fires


def schedules_advance(*, occurrence_ids: Sequence[int], now: datetime) -> int:
    """Materialise the next fire point of each schedule whose current point one of these rows was.

    Runs inside the transaction that marked the rows finished. Rows of an older point (a sibling in the
    same batch, finishing later) or of an older version change nothing. Returns how many schedules moved.
    """
    heads = _heads_among(occurrence_ids)
    if not heads:
        return 0
    wanted = {schedule_id: (fire_at, version) for schedule_id, fire_at, version in heads}
    moved = 0
    locked = (
        Schedule.objects.select_for_update(no_key=True, of=("self",))
        .select_related("job", "job__throttle")
        .filter(id__in=wanted, paused=False)
        .order_by("id")  # one lock order for every worker: no deadlocks between them
    )
    for schedule in locked:
        fire_at, version = wanted[schedule.id]
        if schedule.next_fire_at != fire_at or schedule.job.version != version:
            continue  # someone else moved it on, or the schedule changed since this row was materialised
        following = _next_fire(schedule, schedule_timeline(schedule), after=fire_at, now=now)
        schedule.next_fire_at = following
        schedule.save(update_fields=["next_fire_at", "updated_at"])
        if following is not None:
            schedule_materialise(schedule, following, now=now)
        moved += 1
    return moved


def schedules_misfire(*, token: uuid.UUID, occurrence_ids: Sequence[int], now: datetime) -> set[int]:
    """Apply the misfire policy to claimed rows whose fire point later points have already superseded.

    A point claimed after the next one on its timeline came due (downtime, a long backlog) is not sent:
    its rows become `skipped` (ours, conditionally on our lease, and its siblings still waiting) and the
    point the policy picks is materialised instead, in one transaction: fire_once the latest missed run,
    skip the next future run (or the latest, if it just came due). Returns the ids of ours it skipped.
    Rows that are not their schedule's current point (a sibling the schedule moved past) are left alone.
    """
    heads = _heads_among(occurrence_ids)
    if not heads:
        return set()
    wanted = {schedule_id: (fire_at, version) for schedule_id, fire_at, version in heads}
    ours = set(occurrence_ids)
    skipped: set[int] = set()
    with transaction.atomic():
        locked = (
            Schedule.objects.select_for_update(no_key=True, of=("self",))
            .select_related("job", "job__throttle")
            .filter(id__in=wanted, paused=False)
            .order_by("id")  # the same lock order as schedules_advance
        )
        for schedule in locked:
            fire_at, version = wanted[schedule.id]
            if schedule.next_fire_at != fire_at or schedule.job.version != version:
                continue
            timeline = schedule_timeline(schedule)
            following = schedule_fire_after(schedule, timeline, fire_at)
            if following is None or following > now:
                continue  # late, but no later run is due yet: not a misfire (a deadline may still apply)
            replacement = _next_fire(schedule, timeline, after=fire_at, now=now)
            label = replacement.isoformat() if replacement is not None else "nothing (the schedule ends)"
            ids = occurrences_skip_superseded(
                job_id=schedule.job_id,
                fire_at=fire_at,
                token=token,
                now=now,
                reason=f"misfire ({schedule.misfire_policy}): superseded, {label} fires instead",
            )
            skipped.update(ours.intersection(ids))
            schedule.next_fire_at = replacement
            schedule.save(update_fields=["next_fire_at", "updated_at"])
            if replacement is not None:
                schedule_materialise(schedule, replacement, now=now)
    return skipped


def _heads_among(occurrence_ids: Sequence[int]) -> list[tuple[int, datetime, int]]:
    """(schedule id, fire_at, version) for the rows that are their schedule's current fire point.

    This runs after every mark, mostly over rows of plain jobs, so on PostgreSQL it is one statement.
    """
    ids = list(occurrence_ids)
    if speaks_postgresql():
        with connection.cursor() as cursor:
            cursor.execute(queries.SCHEDULE_HEADS, [ids])
            return [tuple(row) for row in cursor.fetchall()]
    return list(
        Occurrence.objects.filter(id__in=ids, job__schedule__next_fire_at=F("fire_at"))
        .values_list("job__schedule__id", "fire_at", "job_version")
        .distinct()
    )


def schedule_first_fire(schedule: Schedule, *, now: datetime, allow_past_at: bool) -> datetime | None:
    timeline = schedule_timeline(schedule)
    if allow_past_at and isinstance(timeline, AtTimeline) and timeline.instant <= now:
        # An @at instant a caller just set slightly in the past (the API bounds how far) fires at once,
        # like a job's instant; a resume does not bring it back.
        if schedule.end_at is not None and timeline.instant > schedule.end_at:
            return None
        return timeline.instant
    return schedule_fire_after(schedule, timeline, now - TINY)


def schedule_fire_after(schedule: Schedule, timeline: Timeline, instant: datetime) -> datetime | None:
    """The first fire strictly after `instant` inside the schedule's start/end."""
    if schedule.start_at is not None and instant < schedule.start_at:
        instant = schedule.start_at - TINY
    fire = timeline.next_after(instant)
    if fire is None or (schedule.end_at is not None and fire > schedule.end_at):
        return None
    return fire


def _next_fire(schedule: Schedule, timeline: Timeline, *, after: datetime, now: datetime) -> datetime | None:
    """The point after `after` on the timeline, with the misfire policy when that point is already past.

    fire_once: the latest point not after now stands for all the missed ones. skip: that latest point
    only if it just came due (within REMINDERS_MISFIRE_GRACE_SECONDS), else the first point after now.
    """
    fire = schedule_fire_after(schedule, timeline, after)
    if fire is None or fire > now:
        return fire
    estimate = timeline.at_or_before(now)
    latest = estimate if estimate is not None and estimate > fire else fire
    if schedule.end_at is not None and latest > schedule.end_at:
        latest = fire
    for _ in range(_CATCH_UP_STEPS):
        following = schedule_fire_after(schedule, timeline, latest)
        if following is None or following > now:
            break
        latest = following
    if schedule.misfire_policy == MisfirePolicy.SKIP and now - latest > timedelta(
        seconds=settings.REMINDERS_MISFIRE_GRACE_SECONDS
    ):
        return schedule_fire_after(schedule, timeline, now)
    return latest


def schedule_materialise(schedule: Schedule, fire: datetime, *, now: datetime) -> None:
    """Insert the `batch_size` occurrences of one fire point (no-op for ids that exist, see module doc)."""
    job = schedule.job
    rows = []
    for index in range(job.batch_size):
        due = fire + batch_offset(job, index)
        rows.append(
            (
                job.id,
                fire,
                due,
                job.priority,
                job.version,
                index,
                job.throttle_id,
                event_id(schedule.key, fire, index),
                now,
            )
        )
    occurrences_insert_idempotent(rows)
