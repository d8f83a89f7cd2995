"""Recurring schedules (seed 001): writes, the preview, and the chaining of one fire point to the next.

A schedule keeps only its next fire point materialised: `batch_size` occurrences of its backing job at
`Schedule.next_fire_at`. When one of them ends (delivered, skipped past its deadline, or failed), the
claiming code calls `schedules_advance` in the same transaction as the mark, and the next point is
computed from `next_fire_at` on the schedule's own timeline, never from the delivery time, so a late
delivery never shifts the timeline.

Misfires (a later point already came due, after downtime or a long backlog), applied both when the
stored point is claimed (`schedules_misfire`: the stale point is skipped, not sent) and when the next
point is computed:
- `fire_once` (default): one occurrence stands for every missed run, the latest of them; the timeline then
  continues from it. This is what cron-like schedulers users know do (anacron, Kubernetes CronJob).
- `skip`: nothing for the missed runs; the next point after now. A run that came due less than
  REMINDERS_MISFIRE_GRACE_SECONDS ago is on time, not missed, and is sent.
A schedule's `deadline_seconds` (from its job) still applies on top: an occurrence claimed more than that
late is recorded as `skipped` and the timeline goes on.

Update, pause, resume and delete lock the schedule row (FOR UPDATE); `schedules_advance` locks it too
(FOR NO KEY UPDATE), so a worker finishing an occurrence and an operator changing the schedule are
serialised. Each change bumps the version (the backing job's), cancels the pending occurrences at once
and, unless paused, materialises the first point from now. Event ids are deterministic
(`<key>-<unix fire time>[-<batch index>]`) and the idempotency key is unique, so the same fire point can
never be materialised twice: an insert of an existing id is a no-op, except that a cancelled row is
revived (an update that keeps the same next point).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from reminders import queries
from reminders.cron import AtTimeline, Timeline, timeline_for
from reminders.kick import scan_kick_on_commit
from reminders.models import (
    PRIORITY_DEFAULT,
    CallbackType,
    Job,
    MisfirePolicy,
    Occurrence,
    Schedule,
    ThrottlePolicy,
)
from reminders.occurrences import (
    batch_offset,
    occurrences_cancel,
    occurrences_insert_idempotent,
    occurrences_skip_superseded,
)
from reminders.services import Callback, OwnershipError, job_fields

logger = logging.getLogger(__name__)

JOB_KEY_PREFIX = "schedule:"
_TINY = timedelta(microseconds=1)
# fire_once walks forward from the evaluator's estimate of the latest missed point to the exact one; a
# few steps are enough (the estimate is exact except around DST changes).
_CATCH_UP_STEPS = 64


@dataclass(frozen=True)
class ScheduleSpec:
    """Everything a caller sets on a schedule (validated by the API serializer)."""

    expression: str
    callback: Callback
    timezone: str = "UTC"
    priority: int = PRIORITY_DEFAULT
    batch_size: int = 1
    throttle: ThrottlePolicy | None = None
    deadline_seconds: int | None = None
    start_at: datetime | None = None
    end_at: datetime | None = None
    misfire_policy: str = MisfirePolicy.FIRE_ONCE
    paused: bool = False


def event_id(schedule_key: str, fire_at: datetime, batch_index: int) -> str:
    """Seed 001's event id; the first event of a trigger has no suffix, the others `-1` … `-(n-1)`."""
    base = f"{schedule_key}-{int(fire_at.timestamp())}"
    return base if batch_index == 0 else f"{base}-{batch_index}"


def event_envelope(
    *, schedule_key: str, idempotency_key: str, fire_at: datetime, payload: Any
) -> dict[str, Any]:
    """The message body of a schedule's event (seed 001)."""
    return {
        "id": idempotency_key,
        "generated_at": int(fire_at.timestamp()),
        "schedule_id": schedule_key,
        "payload": payload,
    }


def schedule_timeline(schedule: Schedule) -> Timeline:
    return timeline_for(
        schedule.expression,
        zone=schedule.timezone,
        anchor=schedule.anchor_at,
        anchor_fires=schedule.start_at is not None,
    )


def schedule_spec(schedule: Schedule) -> ScheduleSpec:
    """The current settings of a schedule, to apply a partial update on."""
    job = schedule.job
    return ScheduleSpec(
        expression=schedule.expression,
        callback=Callback(
            type=CallbackType(job.callback_type),
            target=job.target,
            payload=job.payload,
            secret=job.http_secret,
        ),
        timezone=schedule.timezone,
        priority=job.priority,
        batch_size=job.batch_size,
        throttle=job.throttle,
        deadline_seconds=job.deadline_seconds,
        start_at=schedule.start_at,
        end_at=schedule.end_at,
        misfire_policy=schedule.misfire_policy,
        paused=schedule.paused,
    )


def schedule_upsert(
    *, key: str, spec: ScheduleSpec, owner: AbstractBaseUser | None = None, now: datetime | None = None
) -> tuple[Schedule, bool]:
    """Create the schedule `key` or replace its settings; returns (schedule, created).

    A replace bumps the version and replaces the pending fire point at once. `@every` keeps counting from
    its anchor unless the expression, the zone or the start changed.
    """
    now = now or timezone.now()
    fields = job_fields(
        spec.callback,
        priority=spec.priority,
        deadline_seconds=spec.deadline_seconds,
        batch_size=spec.batch_size,
        throttle=spec.throttle,
    )
    with transaction.atomic():
        schedule = (
            Schedule.objects.select_for_update(of=("self",)).select_related("job").filter(key=key).first()
        )
        created = schedule is None
        if schedule is None:
            owner_id = owner.pk if owner is not None and owner.pk else None
            # A deleted schedule's job, holding its history: taken back, by its owner only.
            job = Job.objects.select_for_update().filter(key=f"{JOB_KEY_PREFIX}{key}").first()
            if job is None:
                job = Job.objects.create(key=f"{JOB_KEY_PREFIX}{key}", owner_id=owner_id, **fields)
            else:
                _check_owner(job.owner_id, owner, what=f"schedule {key!r}")
                for name, value in fields.items():
                    setattr(job, name, value)
                job.version += 1
                job.save()
            schedule = Schedule(key=key, owner_id=owner_id, job=job)
            timeline_changed = True
        else:
            _check_owner(schedule.owner_id, owner, what=f"schedule {key!r}")
            job = Job.objects.select_for_update().get(pk=schedule.job_id)
            for name, value in fields.items():
                setattr(job, name, value)
            job.version += 1
            job.save()
            schedule.job = job
            timeline_changed = (spec.expression, spec.timezone, spec.start_at) != (
                schedule.expression,
                schedule.timezone,
                schedule.start_at,
            )
        schedule.expression = spec.expression
        schedule.timezone = spec.timezone
        schedule.start_at = spec.start_at
        schedule.end_at = spec.end_at
        schedule.misfire_policy = spec.misfire_policy
        schedule.paused = spec.paused
        if timeline_changed:
            # Whole seconds, so an @every fire time is exactly its event id's unix time; rounded up, so
            # the first fire is never less than a whole period after the change.
            schedule.anchor_at = spec.start_at or _second_at_or_after(now)
        schedule_timeline(schedule)  # an ExpressionError here rolls the whole change back
        _rematerialise(schedule, now=now, allow_past_at=True)
    return schedule, created


def _check_owner(owner_id: int | None, owner: AbstractBaseUser | None, *, what: str) -> None:
    if owner is not None and owner_id not in (None, owner.pk) and not getattr(owner, "is_staff", False):
        raise OwnershipError(f"{what} belongs to another owner")


def schedule_update(
    *, schedule: Schedule, changes: dict[str, Any], owner: AbstractBaseUser | None = None
) -> Schedule:
    """Apply a partial update (field name -> value, as in ScheduleSpec).

    The current settings are read under the row lock, so two concurrent partial updates of different
    fields both survive.
    """
    with transaction.atomic():
        current = _locked(schedule)
        spec = replace(schedule_spec(current), **changes)
        updated, _ = schedule_upsert(key=current.key, spec=spec, owner=owner)
    return updated


def schedule_pause(*, schedule: Schedule) -> Schedule:
    """Nothing fires while paused: the pending fire point is cancelled at once."""
    with transaction.atomic():
        schedule = _locked(schedule)
        schedule.paused = True
        _bump(schedule)
        _rematerialise(schedule, now=timezone.now(), allow_past_at=False)
    return schedule


def schedule_resume(*, schedule: Schedule) -> Schedule:
    """Continue from now: runs missed while paused are not fired."""
    with transaction.atomic():
        schedule = _locked(schedule)
        schedule.paused = False
        _bump(schedule)
        _rematerialise(schedule, now=timezone.now(), allow_past_at=False)
    return schedule


def schedule_delete(*, schedule: Schedule) -> int:
    """Delete the schedule and cancel what it had pending; returns how many were cancelled.

    Its history stays, as a deleted job's does (retention purges it later): the backing job keeps its
    delivered, failed and cancelled rows, without the throttle policy (so that policy can go) and under a
    new version, so an occurrence being delivered right now completes and advances nothing. A schedule
    created again under the key takes the job back (`schedule_upsert`).
    """
    with transaction.atomic():
        schedule = _locked(schedule)
        job = schedule.job
        job.version += 1
        job.throttle = None
        job.save(update_fields=["version", "throttle", "updated_at"])
        cancelled = occurrences_cancel(job.occurrences.all(), reason="schedule deleted")
        schedule.delete()
    return cancelled


def schedule_preview(schedule: Schedule, *, count: int, now: datetime | None = None) -> list[datetime]:
    """The next `count` fire times from now (or from the materialised point, which may be just past)."""
    now = now or timezone.now()
    timeline = schedule_timeline(schedule)
    fires: list[datetime] = []
    instant = now - _TINY
    if schedule.next_fire_at is not None and schedule.next_fire_at <= now:
        fires.append(schedule.next_fire_at)
        instant = schedule.next_fire_at
    while len(fires) < count:
        fire = _first_after(schedule, timeline, instant)
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
            _materialise(schedule, following, now=now)
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
            following = _first_after(schedule, timeline, fire_at)
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
                _materialise(schedule, replacement, now=now)
    return skipped


# --- internals -------------------------------------------------------------------------------------------


def _heads_among(occurrence_ids: Sequence[int]) -> list[tuple[int, datetime, int]]:
    """(schedule id, fire_at, version) for the rows that are their schedule's current fire point.

    This runs after every mark, mostly over rows of plain jobs, so on PostgreSQL it is one statement.
    """
    ids = list(occurrence_ids)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(queries.SCHEDULE_HEADS, [ids])
            return [tuple(row) for row in cursor.fetchall()]
    return list(
        Occurrence.objects.filter(id__in=ids, job__schedule__next_fire_at=F("fire_at"))
        .values_list("job__schedule__id", "fire_at", "job_version")
        .distinct()
    )


def _locked(schedule: Schedule) -> Schedule:
    return (
        Schedule.objects.select_for_update(of=("self",))
        .select_related("job", "job__throttle")
        .get(pk=schedule.pk)
    )


def _bump(schedule: Schedule) -> None:
    Job.objects.filter(pk=schedule.job_id).update(version=F("version") + 1, updated_at=timezone.now())
    schedule.job.refresh_from_db(fields=["version", "updated_at"])


def _rematerialise(schedule: Schedule, *, now: datetime, allow_past_at: bool) -> None:
    """Cancel what is pending and, unless paused, materialise the first point from now."""
    occurrences_cancel(
        Occurrence.objects.filter(job_id=schedule.job_id),
        reason=f"replaced by version {schedule.job.version}",
    )
    fire = None if schedule.paused else _first_fire_from(schedule, now=now, allow_past_at=allow_past_at)
    schedule.next_fire_at = fire
    schedule.save()
    if fire is not None:
        _materialise(schedule, fire, now=now)
        scan_kick_on_commit(fire)


def _second_at_or_after(instant: datetime) -> datetime:
    whole = instant.replace(microsecond=0)
    return whole if whole == instant else whole + timedelta(seconds=1)


def _first_fire_from(schedule: Schedule, *, now: datetime, allow_past_at: bool) -> datetime | None:
    timeline = schedule_timeline(schedule)
    if allow_past_at and isinstance(timeline, AtTimeline) and timeline.instant <= now:
        # An @at instant a caller just set slightly in the past (the API bounds how far) fires at once,
        # like a job's instant; a resume does not bring it back.
        if schedule.end_at is not None and timeline.instant > schedule.end_at:
            return None
        return timeline.instant
    return _first_after(schedule, timeline, now - _TINY)


def _first_after(schedule: Schedule, timeline: Timeline, instant: datetime) -> datetime | None:
    """The first fire strictly after `instant` inside the schedule's start/end."""
    if schedule.start_at is not None and instant < schedule.start_at:
        instant = schedule.start_at - _TINY
    fire = timeline.next_after(instant)
    if fire is None or (schedule.end_at is not None and fire > schedule.end_at):
        return None
    return fire


def _next_fire(schedule: Schedule, timeline: Timeline, *, after: datetime, now: datetime) -> datetime | None:
    """The point after `after` on the timeline, with the misfire policy when that point is already past.

    fire_once: the latest point not after now stands for all the missed ones. skip: that latest point
    only if it just came due (within REMINDERS_MISFIRE_GRACE_SECONDS), else the first point after now.
    """
    fire = _first_after(schedule, timeline, after)
    if fire is None or fire > now:
        return fire
    estimate = timeline.at_or_before(now)
    latest = estimate if estimate is not None and estimate > fire else fire
    if schedule.end_at is not None and latest > schedule.end_at:
        latest = fire
    for _ in range(_CATCH_UP_STEPS):
        following = _first_after(schedule, timeline, latest)
        if following is None or following > now:
            break
        latest = following
    if schedule.misfire_policy == MisfirePolicy.SKIP and now - latest > timedelta(
        seconds=settings.REMINDERS_MISFIRE_GRACE_SECONDS
    ):
        return _first_after(schedule, timeline, now)
    return latest


def _materialise(schedule: Schedule, fire: datetime, *, now: datetime) -> None:
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
