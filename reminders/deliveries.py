"""What a claimed row becomes on its way out: the job columns its delivery needs, and the `Delivery` a
transport sends (a schedule's events wrapped in seed 001's envelope)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from reminders.models import Job
from reminders.occurrences import ClaimedOccurrence
from reminders.schedules import event_envelope
from reminders.transports import Delivery


@dataclass(frozen=True, slots=True)
class DeliveryJob:
    """The columns of a job that its deliveries need."""

    key: str
    callback_type: str
    target: str
    payload: Any
    http_secret: str
    deadline_seconds: int | None
    schedule_key: str | None


def delivery_jobs(job_ids: Iterable[int]) -> dict[int, DeliveryJob]:
    """The claimed rows' jobs as plain tuples: building model instances (with the schedule joined) was a
    tenth of the scan loop's time at a thousand rows per batch (bench/, dispatch scenario, py-spy)."""
    rows = Job.objects.filter(id__any=list(job_ids)).values_list(
        "id", "key", "callback_type", "target", "payload", "http_secret", "deadline_seconds", "schedule__key"
    )
    return {job_id: DeliveryJob(*columns) for job_id, *columns in rows}


def delivery_for(occurrence: ClaimedOccurrence, job: DeliveryJob) -> Delivery:
    payload = job.payload
    if job.schedule_key is not None:
        # A schedule's events carry seed 001's envelope; its id is the idempotency key.
        payload = event_envelope(
            schedule_key=job.schedule_key,
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
