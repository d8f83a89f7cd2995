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
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from reminders.models import (
    PRIORITY_DEFAULT,
    PURGEABLE_STATUSES,
    CallbackType,
    Job,
    Occurrence,
    OccurrenceStatus,
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
    owner: AbstractBaseUser | None = None,
) -> tuple[Job, bool]:
    """Create the job `key` or replace it: its callback, priority and pending occurrences.

    Pending (`scheduled`) occurrences whose instant is still wanted are kept with their idempotency key;
    the others are cancelled; instants not yet present are added. Occurrences in flight or finished
    (claimed, delivered, failed, skipped) are history and stay as they are, and an instant they already
    cover is not scheduled twice. Returns (job, created).
    """
    _require_aware(schedules)
    wanted = {instant.astimezone(UTC) for instant in schedules}
    fields = {
        "callback_type": callback.type,
        "target": callback.target,
        "payload": callback.payload,
        "http_secret": callback.secret,
        "priority": priority,
        "deadline_seconds": deadline_seconds,
    }
    with transaction.atomic():
        job = Job.objects.select_for_update().filter(key=key).first()
        created = job is None
        if job is None:
            job = Job.objects.create(key=key, owner=owner if owner and owner.pk else None, **fields)
        else:
            # A job with no owner was made by the system (e.g. the trainings app): no API caller owns it.
            if owner is not None and job.owner_id != owner.pk and not _is_staff(owner):
                raise OwnershipError(f"job {key!r} belongs to another owner")
            for name, value in fields.items():
                setattr(job, name, value)
            job.version += 1
            job.save()
        _occurrences_replace_pending(job, wanted)
    _kick_on_commit(min(wanted) if wanted else None)
    return job, created


def _occurrences_replace_pending(job: Job, wanted: set[datetime]) -> None:
    now = timezone.now()
    existing = list(
        job.occurrences.exclude(status=OccurrenceStatus.CANCELLED).values_list("id", "fire_at", "status")
    )
    covered = {fire_at for _, fire_at, status in existing}
    stale = [oid for oid, fire_at, status in existing if status == OccurrenceStatus.SCHEDULED and fire_at not in wanted]
    if stale:
        Occurrence.objects.filter(id__in=stale, status=OccurrenceStatus.SCHEDULED).update(
            status=OccurrenceStatus.CANCELLED, finished_at=now, last_error="replaced by a new version of the job"
        )
    job.occurrences.filter(status=OccurrenceStatus.SCHEDULED).update(priority=job.priority, job_version=job.version)
    Occurrence.objects.bulk_create(
        [
            Occurrence(
                job=job,
                fire_at=instant,
                next_attempt_at=instant,
                priority=job.priority,
                job_version=job.version,
                idempotency_key=new_idempotency_key(),
            )
            for instant in sorted(wanted - covered)
        ],
        batch_size=2000,
    )


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
        _kick_on_commit(now)
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


def scan_kick() -> None:
    """Ask a worker to scan now. Best effort: if the broker is down, beat's next tick does it."""
    from reminders.tasks import scan_due

    try:
        scan_due.apply_async(expires=30)
    except Exception:
        logger.warning("could not kick the scan; beat will pick the work up", exc_info=True)


def _kick_on_commit(earliest: datetime | None) -> None:
    if earliest is not None and earliest <= timezone.now() + timedelta(seconds=settings.REMINDERS_SCAN_SECONDS):
        transaction.on_commit(scan_kick)


def _is_staff(user: AbstractBaseUser) -> bool:
    return bool(getattr(user, "is_staff", False))
