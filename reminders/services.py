"""Writes: scheduling, replacing, cancelling and purging. Callers pass validated, aware datetimes.

Every write here runs in the caller's transaction (nested as a savepoint): a domain object and its
occurrences are committed together or not at all. The only broker call, the scan kick, happens after
commit.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, User
from django.db import IntegrityError, connection, transaction
from django.db.models import QuerySet
from django.utils import timezone

from reminders.kick import scan_kick_on_commit
from reminders.models import (
    PRIORITY_DEFAULT,
    PURGEABLE_STATUSES,
    CallbackType,
    Job,
    Occurrence,
    OccurrenceStatus,
    ThrottlePolicy,
    new_idempotency_key,
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
    fields = {
        "callback_type": callback.type,
        "target": callback.target,
        "payload": callback.payload,
        "http_secret": callback.secret,
        "priority": priority,
        "deadline_seconds": deadline_seconds,
        "batch_size": batch_size,
        "throttle": throttle,
    }
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
            job = Job.objects.create(key=key, owner_id=owner.pk if owner is not None else None, **fields)
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
    now = timezone.now()
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
        Occurrence.objects.filter(id__in=stale, status=OccurrenceStatus.SCHEDULED).update(
            status=OccurrenceStatus.CANCELLED,
            finished_at=now,
            last_error="replaced by a new version of the job",
        )
    job.occurrences.filter(status=OccurrenceStatus.SCHEDULED).update(
        priority=job.priority, job_version=job.version, throttle=job.throttle_id
    )
    occurrences_insert([(job, instant, index) for instant, index in sorted(slots - covered)])


def batch_offset(job: Job, index: int) -> timedelta:
    """How far after its instant event `index` of a batch is due: spread over the policy's window, if any."""
    window = job.throttle.window_seconds if job.throttle is not None else None
    if not window or job.batch_size <= 1:
        return timedelta(0)
    return timedelta(seconds=window * index / job.batch_size)


_COPY_COLUMNS = (
    "job_id, fire_at, next_attempt_at, priority, status, attempts, last_error, idempotency_key, job_version, "
    "batch_index, throttle_id, created_at"
)


def occurrences_insert(rows: Sequence[tuple[Job, datetime, int]]) -> int:
    """Insert new `scheduled` occurrences, one per (job, instant, batch index), each with a fresh key.

    On PostgreSQL the rows are streamed with COPY, several times faster than INSERT batches (bulk
    scheduling is measured by the benchmark); either way it runs inside the caller's transaction.
    """
    if not rows:
        return 0
    now = timezone.now()
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            raw = cursor.cursor  # the psycopg 3 cursor under Django's wrapper
            with raw.copy(f"COPY {Occurrence._meta.db_table} ({_COPY_COLUMNS}) FROM STDIN") as copy:
                for job, instant, index in rows:
                    copy.write_row(
                        (job.pk, instant, instant + batch_offset(job, index), job.priority,
                         OccurrenceStatus.SCHEDULED.value, 0, "", new_idempotency_key(), job.version, index,
                         job.throttle_id, now)
                    )  # fmt: skip
        return len(rows)
    Occurrence.objects.bulk_create(
        [
            Occurrence(
                job=job,
                fire_at=instant,
                next_attempt_at=instant + batch_offset(job, index),
                priority=job.priority,
                job_version=job.version,
                batch_index=index,
                throttle_id=job.throttle_id,
                idempotency_key=new_idempotency_key(),
            )
            for job, instant, index in rows
        ],
        batch_size=2000,
    )
    return len(rows)


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
                jobs = Job.objects.bulk_create(
                    Job(
                        key=s.key,
                        owner_id=owner.pk if owner is not None else None,
                        callback_type=s.callback.type,
                        target=s.callback.target,
                        payload=s.callback.payload,
                        http_secret=s.callback.secret,
                        priority=s.priority,
                        deadline_seconds=s.deadline_seconds,
                        batch_size=s.batch_size,
                        throttle=s.throttle,
                    )
                    for s in fresh
                )
        except IntegrityError as exc:
            raise ConcurrentCreate(str(exc)) from exc
        count = occurrences_insert(
            [
                (job, instant, index)
                for job, s in zip(jobs, fresh, strict=True)
                for instant in _instants(s.schedules)
                for index in range(s.batch_size)
            ]
        )
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


def _instants(schedules: Iterable[datetime]) -> list[datetime]:
    return sorted({instant.astimezone(UTC) for instant in schedules})


def job_cancel(*, job: Job) -> int:
    """Cancel every occurrence of the job that has not fired yet. In-flight (claimed) ones complete."""
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        job.version += 1
        job.save(update_fields=["version", "updated_at"])
        return occurrences_cancel(job.occurrences.all())


def occurrences_cancel(occurrences: QuerySet[Occurrence], *, reason: str = "cancelled") -> int:
    return occurrences.filter(status=OccurrenceStatus.SCHEDULED).update(
        status=OccurrenceStatus.CANCELLED, finished_at=timezone.now(), last_error=reason
    )


def occurrences_retry_now(occurrences: QuerySet[Occurrence]) -> int:
    """Operator action: make failed or waiting occurrences due now (one more attempt for failed ones)."""
    now = timezone.now()
    count = occurrences.filter(status__in=[OccurrenceStatus.FAILED, OccurrenceStatus.SCHEDULED]).update(
        status=OccurrenceStatus.SCHEDULED, next_attempt_at=now, finished_at=None
    )
    if count:
        scan_kick_on_commit(now)
    return count


def occurrences_purge_old(*, now: datetime | None = None, max_batches: int = 100) -> int:
    """Delete finished occurrences older than the retention period, in bounded batches.

    Each batch is its own short statement, so a large purge never holds a long transaction; a run stops
    after `max_batches` and the next hourly run continues.
    """
    cutoff = (now or timezone.now()) - timedelta(days=settings.REMINDERS_RETENTION_DAYS)
    batch = settings.REMINDERS_PURGE_BATCH
    deleted = 0
    for _ in range(max_batches):
        ids = list(
            Occurrence.objects.filter(status__in=PURGEABLE_STATUSES, finished_at__lt=cutoff).values_list(
                "id", flat=True
            )[:batch]
        )
        if not ids:
            break
        count, _ = Occurrence.objects.filter(id__in=ids).delete()
        deleted += count
    if deleted:
        logger.info("purged %d occurrences finished before %s", deleted, cutoff.isoformat())
    return deleted


def _is_staff(user: AbstractBaseUser) -> bool:
    return bool(getattr(user, "is_staff", False))
