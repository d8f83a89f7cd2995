"""What a claimed row becomes on its way out: the job columns its delivery needs, and the `Delivery` a
transport sends (a schedule's events wrapped in seed 001's envelope).

A RabbitMQ job's payload is read as the JSON text PostgreSQL stores (`payload::text`) and published as
those bytes: decoding it into Python and encoding it again per message was work the raw publisher does not
do. The text is the same JSON value, in PostgreSQL's rendering (a space after `:` and
`,`, non-ASCII characters as UTF-8 rather than `\\u` escapes). HTTP and handler jobs get the decoded
payload as before: HTTP signs the compact encoding it sends, handlers are Python functions.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import TextField
from django.db.models.functions import Cast

from reminders.engine.claim_types import ClaimedOccurrence
from reminders.models import CallbackType, Job
from reminders.schedules.lifecycle import event_envelope
from reminders.transports import Delivery

# A plain str: comparing against the enum member per row goes through Enum's attribute lookup, per delivery.
_RABBITMQ = str(CallbackType.RABBITMQ.value)


@dataclass(frozen=True, slots=True)
class DeliveryJob:
    """The columns of a job that its deliveries need.

    `payload_json` is the stored JSON text, UTF-8 encoded; `payload` is it decoded, except for RabbitMQ
    jobs, whose messages carry the text itself (then `payload` is None).
    """

    key: str
    callback_type: str
    target: str
    payload: Any
    http_secret: str
    deadline_seconds: int | None
    schedule_key: str | None
    payload_json: bytes = b"null"


def delivery_jobs(job_ids: Iterable[int]) -> dict[int, DeliveryJob]:
    """The claimed rows' jobs as plain tuples: model instances (with the schedule joined) cost a large share
    of the scan loop at a full batch."""
    rows = Job.objects.filter(id__any=list(job_ids)).values_list(
        "id",
        "key",
        "callback_type",
        "target",
        Cast("payload", TextField()),
        "http_secret",
        "deadline_seconds",
        "schedule__key",
    )
    jobs = {}
    for job_id, key, callback_type, target, text, secret, deadline, schedule_key in rows:
        payload = None if callback_type == _RABBITMQ else json.loads(text)
        jobs[job_id] = DeliveryJob(
            key, callback_type, target, payload, secret, deadline, schedule_key, text.encode()
        )
    return jobs


def delivery_for(occurrence: ClaimedOccurrence, job: DeliveryJob) -> Delivery:
    if job.callback_type == _RABBITMQ:
        return _delivery(occurrence, job, None, _stored_body(occurrence, job))
    payload = job.payload
    if job.schedule_key is not None:
        # A schedule's events carry seed 001's envelope; its id is the idempotency key.
        payload = event_envelope(
            schedule_key=job.schedule_key,
            idempotency_key=occurrence.idempotency_key,
            fire_at=occurrence.fire_at,
            payload=job.payload,
        )
    return _delivery(occurrence, job, payload, None)


def _stored_body(occurrence: ClaimedOccurrence, job: DeliveryJob) -> bytes:
    """The message body around the stored text: the payload itself, or a schedule's envelope of it.

    The envelope is written here field by field in `event_envelope`'s order and compact encoding, with
    the stored text as its `payload` (tests/reminders/test_stored_payload.py checks it decodes to the
    same value).
    """
    if job.schedule_key is None:
        return job.payload_json
    head = event_envelope(
        schedule_key=job.schedule_key,
        idempotency_key=occurrence.idempotency_key,
        fire_at=occurrence.fire_at,
        payload=None,
    )
    del head["payload"]
    return json.dumps(head, separators=(",", ":"))[:-1].encode() + b',"payload":' + job.payload_json + b"}"


def _delivery(occurrence: ClaimedOccurrence, job: DeliveryJob, payload: Any, body: bytes | None) -> Delivery:
    return Delivery(
        occurrence_id=occurrence.id,
        idempotency_key=occurrence.idempotency_key,
        job_key=job.key,
        fire_at=occurrence.fire_at,
        attempt=occurrence.attempts,
        target=job.target,
        payload=payload,
        secret=job.http_secret,
        body=body,
    )
