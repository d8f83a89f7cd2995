"""Recurring schedules (seed 001): create, update, pause, resume and delete, and the event envelope.

A schedule keeps only its next fire point materialised: `batch_size` occurrences of its backing job at
`Schedule.next_fire_at`; how one point leads to the next, and misfires, live in reminders.schedules.chain.

Update, pause, resume and delete lock the schedule row (FOR UPDATE); `schedules_advance` locks it too
(FOR NO KEY UPDATE), so a worker finishing an occurrence and an operator changing the schedule are
serialised. Each change bumps the version (the backing job's), cancels the pending occurrences at once
and, unless paused, materialises the first point from now.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from reminders.engine.inserts import batch_offset, occurrences_insert_idempotent
from reminders.engine.kick import scan_kick_on_commit
from reminders.engine.occurrences import occurrences_cancel
from reminders.jobs import Callback, OwnershipError, job_fields
from reminders.models import (
    PRIORITY_DEFAULT,
    CallbackType,
    Job,
    MisfirePolicy,
    Occurrence,
    Schedule,
    ThrottlePolicy,
)
from reminders.schedules.chain import event_id as event_id
from reminders.schedules.chain import schedule_first_fire, schedule_materialise, schedule_timeline
from reminders.schedules.chain import schedule_preview as schedule_preview
from reminders.schedules.chain import schedules_advance as schedules_advance
from reminders.schedules.chain import schedules_misfire as schedules_misfire

logger = logging.getLogger(__name__)

JOB_KEY_PREFIX = "schedule:"


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
    return _set_paused(schedule, True)


def schedule_resume(*, schedule: Schedule) -> Schedule:
    """Continue from now: runs missed while paused are not fired."""
    return _set_paused(schedule, False)


def schedule_run_now(*, schedule: Schedule, now: datetime | None = None) -> int:
    """Fire the schedule's payload once now, beside its timeline (the next run stays where it was).

    The extra run's event ids are `<key>-run-<unix second>[-<batch index>]`: two clicks in one second
    make one run. It is not the schedule's current point, so delivering it moves nothing on. Returns the
    number of events (the batch size)."""
    now = (now or timezone.now()).replace(microsecond=0)
    job = schedule.job
    rows = [
        (job.id, now, now + batch_offset(job, index), job.priority, job.version, index, job.throttle_id,
         event_id(f"{schedule.key}-run", now, index), now)
        for index in range(job.batch_size)
    ]  # fmt: skip
    with transaction.atomic():
        occurrences_insert_idempotent(rows)
        scan_kick_on_commit(now)
    return len(rows)


def _set_paused(schedule: Schedule, paused: bool) -> Schedule:
    with transaction.atomic():
        schedule = _locked(schedule)
        schedule.paused = paused
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


# --- internals -------------------------------------------------------------------------------------------


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
    fire = None if schedule.paused else schedule_first_fire(schedule, now=now, allow_past_at=allow_past_at)
    schedule.next_fire_at = fire
    schedule.save()
    if fire is not None:
        schedule_materialise(schedule, fire, now=now)
        scan_kick_on_commit(fire)


def _second_at_or_after(instant: datetime) -> datetime:
    whole = instant.replace(microsecond=0)
    return whole if whole == instant else whole + timedelta(seconds=1)
