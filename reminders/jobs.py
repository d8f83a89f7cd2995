"""Job writes: scheduling, replacing and cancelling a job's instants. Callers pass validated, aware datetimes.

Every write here runs in the caller's transaction (nested as a savepoint): a domain object and its
occurrences are committed together or not at all. The only broker call, the scan kick, happens after
commit.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, User
from django.db import IntegrityError, transaction
from django.db.models import Model
from django.utils import timezone

from common.history import without_history
from common.rows_insert import rows_insert, rows_insert_linked
from reminders.engine.inserts import occurrences_insert
from reminders.engine.kick import scan_kick_on_commit
from reminders.engine.occurrences import occurrences_cancel
from reminders.models import (
    PRIORITY_DEFAULT,
    CallbackType,
    Job,
    Occurrence,
    OccurrenceStatus,
    ThrottlePolicy,
)

logger = logging.getLogger(__name__)


class OwnershipError(PermissionError):
    """The key exists and belongs to another owner."""


@dataclass(frozen=True)
class Callback:
    type: CallbackType
    target: str
    payload: Any
    secret: str = ""


def job_fields(
    callback: Callback,
    *,
    priority: int,
    deadline_seconds: int | None,
    batch_size: int,
    throttle: ThrottlePolicy | None,
) -> dict[str, Any]:
    """A Job's delivery settings as model fields: the one place a callback becomes columns."""
    return {
        "callback_type": callback.type,
        "target": callback.target,
        "payload": callback.payload,
        "http_secret": callback.secret,
        "priority": priority,
        "deadline_seconds": deadline_seconds,
        "batch_size": batch_size,
        "throttle": throttle,
    }


def _require_aware(instants: Iterable[datetime]) -> None:
    for instant in instants:
        if timezone.is_naive(instant):
            raise ValueError(f"naive datetime {instant.isoformat()} (a time zone is required)")


def job_upsert(
    *,
    key: str,
    schedules: Sequence[datetime],
    callback: Callback,
    priority: int = PRIORITY_DEFAULT,
    deadline_seconds: int | None = None,
    owner: User | AbstractBaseUser | None = None,
    batch_size: int = 1,
    throttle: ThrottlePolicy | None = None,
) -> tuple[Job, bool]:
    """Create the job `key` or replace it: its callback, priority and pending occurrences.

    Pending (`scheduled`) occurrences whose instant is still wanted are kept with their idempotency key;
    the others are cancelled; instants not yet present are added. Occurrences in flight or finished
    (claimed, delivered, failed, skipped) are history and stay as they are, and an instant they already
    cover is not scheduled twice. With `batch_size` n each instant is n occurrences (batch_index 0..n-1),
    each with its own idempotency key; a throttle policy with a window spreads them over it.
    Returns (job, created).
    """
    _require_aware(schedules)
    wanted = set(_instants(schedules))
    fields = job_fields(
        callback,
        priority=priority,
        deadline_seconds=deadline_seconds,
        batch_size=batch_size,
        throttle=throttle,
    )
    with transaction.atomic():
        job = Job.objects.select_for_update().filter(key=key).first()
        created = False
        if job is None:
            job, created = _job_create_or_lock(key=key, owner=owner, fields=fields)
        if not created:
            # A job with no owner was made by the system (e.g. the trainings app): no API caller owns it.
            if owner is not None and job.owner_id != owner.pk and not _is_staff(owner):
                raise OwnershipError(f"job {key!r} belongs to another owner")
            for name, value in fields.items():
                setattr(job, name, value)
            job.version += 1
            if owner is None:
                without_history(job)  # the system's job: the change that caused it is recorded
            job.save()
        _occurrences_replace_pending(job, wanted, created=created)
    scan_kick_on_commit(min(wanted) if wanted else None)
    return job, created


def _job_create_or_lock(
    *, key: str, owner: User | AbstractBaseUser | None, fields: dict[str, Any]
) -> tuple[Job, bool]:
    """Insert the job; if a concurrent request inserted the same key first, lock and return theirs.

    Two first requests for one new key both find nothing to lock; the second INSERT waits for the first
    transaction and then fails on the unique key. Instead of a 500, the second request becomes an update
    of the job the first one created (upsert semantics), under the same ownership rule.
    Returns (job, created).
    """
    try:
        with transaction.atomic():
            job = Job(key=key, owner_id=owner.pk if owner is not None else None, **fields)
            if owner is None:  # made by the system (a training's rule job): its training's history says who
                without_history(job)
            job.save(force_insert=True)
    except IntegrityError:
        existing = Job.objects.select_for_update().filter(key=key).first()
        if existing is None:
            raise  # not the key: some other constraint, which validation should have caught
        return existing, False
    return job, True


def _occurrences_replace_pending(job: Job, wanted: set[datetime], *, created: bool) -> None:
    slots = {(instant, index) for instant in wanted for index in range(job.batch_size)}
    if created:  # nothing to replace: skip the three queries below
        occurrences_insert([(job, instant, index) for instant, index in sorted(slots)])
        return
    existing = list(
        job.occurrences.exclude(status=OccurrenceStatus.CANCELLED).values_list(
            "id", "fire_at", "batch_index", "status"
        )
    )
    covered = {(fire_at, index) for _, fire_at, index, _ in existing}
    stale = [
        oid
        for oid, fire_at, index, status in existing
        if status == OccurrenceStatus.SCHEDULED and (fire_at, index) not in slots
    ]
    if stale:
        occurrences_cancel(
            Occurrence.objects.filter(id__in=stale), reason="replaced by a new version of the job"
        )
    job.occurrences.filter(status=OccurrenceStatus.SCHEDULED).update(
        priority=job.priority, job_version=job.version, throttle=job.throttle_id
    )
    # A claimed row still wanted may be held by a look-ahead scan until its instant: moved to the new
    # version, it goes out with the new payload; one left behind is skipped there (reminders/engine/timer.py).
    held = job.occurrences.filter(status=OccurrenceStatus.CLAIMED, fire_at__in=wanted)
    held.update(job_version=job.version)
    occurrences_insert([(job, instant, index) for instant, index in sorted(slots - covered)])


@dataclass(frozen=True)
class JobSpec:
    key: str
    schedules: Sequence[datetime]
    callback: Callback
    priority: int = PRIORITY_DEFAULT
    deadline_seconds: int | None = None
    batch_size: int = 1
    throttle: ThrottlePolicy | None = None


@dataclass(frozen=True)
class BulkResult:
    created: int
    replaced: int
    instants: int  # instants now scheduled for these jobs (new ones inserted, existing ones kept)


class ConcurrentCreate(Exception):
    """Another request created one of these keys at the same moment; the whole bulk request rolled back."""


def jobs_bulk_upsert(*, specs: Sequence[JobSpec], owner: User | AbstractBaseUser | None = None) -> BulkResult:
    """Create or replace many jobs in one transaction: all of them or none.

    New keys are inserted together (one INSERT for the jobs, one COPY for their occurrences), which is
    what makes bulk scheduling fast; keys that exist go through `job_upsert`'s replace rules.
    """
    for spec in specs:
        _require_aware(spec.schedules)
    with transaction.atomic():
        existing = set(Job.objects.filter(key__in=[s.key for s in specs]).values_list("key", flat=True))
        fresh = [s for s in specs if s.key not in existing]
        try:
            with transaction.atomic():
                jobs, count = jobs_insert(specs=fresh, owner=owner)
                if owner is not None:  # one history row per new job, in one INSERT, attributed to the caller
                    Job.history.bulk_history_create(jobs, default_user=owner)
        except IntegrityError as exc:
            raise ConcurrentCreate(str(exc)) from exc
        for spec in specs:
            if spec.key in existing:
                job_upsert(
                    key=spec.key,
                    schedules=spec.schedules,
                    callback=spec.callback,
                    priority=spec.priority,
                    deadline_seconds=spec.deadline_seconds,
                    owner=owner,
                    batch_size=spec.batch_size,
                    throttle=spec.throttle,
                )
                count += len(_instants(spec.schedules)) * spec.batch_size
    earliest = min((min(s.schedules) for s in specs if s.schedules), default=None)
    scan_kick_on_commit(earliest)
    return BulkResult(created=len(fresh), replaced=len(specs) - len(fresh), instants=count)


def jobs_insert(
    *,
    specs: Sequence[JobSpec],
    owner: User | AbstractBaseUser | None = None,
    links: Sequence[Model] = (),
) -> tuple[list[Job], int]:
    """Insert new jobs (one INSERT) and all their occurrences (one COPY) in the caller's transaction.

    For keys the caller knows to be free: one that exists raises IntegrityError and the caller's
    transaction must roll back (there is no savepoint here, which would cost two round trips). Does not
    kick the scan: the caller does, once. Returns the jobs, in `specs` order, and how many occurrences.
    `links`: a caller's new row per spec with a `job` foreign key (e.g. the trainings app's TrainingJob),
    pointed at its job and inserted in the jobs' statement.
    """
    for spec in specs:
        _require_aware(spec.schedules)
    if not specs:
        return [], 0
    jobs = [
        Job(
            key=s.key,
            owner_id=owner.pk if owner is not None else None,
            **job_fields(
                s.callback,
                priority=s.priority,
                deadline_seconds=s.deadline_seconds,
                batch_size=s.batch_size,
                throttle=s.throttle,
            ),
        )
        for s in specs
    ]
    if links:
        rows_insert_linked(jobs, links, key="key", via="job")
    else:
        rows_insert(jobs)
    count = occurrences_insert(
        [
            (job, instant, index)
            for job, s in zip(jobs, specs, strict=True)
            for instant in _instants(s.schedules)
            for index in range(s.batch_size)
        ]
    )
    return jobs, count


def _instants(schedules: Iterable[datetime]) -> list[datetime]:
    return sorted({instant.astimezone(UTC) for instant in schedules})


def job_cancel(*, job: Job) -> int:
    """Cancel every occurrence of the job that has not fired yet. In-flight (claimed) ones complete."""
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        job.version += 1
        job._change_reason = "cancelled"  # type: ignore[attr-defined]  # shown on the job's History page
        job.save(update_fields=["version", "updated_at"])
        return occurrences_cancel(job.occurrences.all())


def _is_staff(user: AbstractBaseUser) -> bool:
    return bool(getattr(user, "is_staff", False))
