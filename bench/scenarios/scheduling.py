"""1. Scheduling throughput: occurrences stored per second, through the service layer.

- service layer, many jobs x few instants: one `job_upsert` per training-sized job (22 instants), each in
  its own transaction, as an API request or a training save would do it;
- bulk: `job_upsert` with the most instants the API accepts per job (REMINDERS_MAX_SCHEDULES), until the
  bulk size is reached (1 M occurrences, 100 k with --quick). There is no separate bulk API: this is it.
Alternatives on the same reminders: one django-celery-beat ClockedSchedule + one-off PeriodicTask per
reminder through the ORM (what a beat user writes), and Celery `apply_async(eta=...)`.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import connection, transaction

from bench.harness import PAYLOAD, Harness, timed
from bench.report import Row, Section


def run(h: Harness) -> Section:
    from reminders.models import CallbackType, Occurrence
    from reminders.services import Callback, job_upsert

    s = h.sizes
    section = Section("scheduling")
    h.truncate_engine()
    queue = h.queue_name("sched")
    callback = Callback(type=CallbackType.RABBITMQ, target=queue, payload=PAYLOAD)
    base = datetime.now(UTC).replace(microsecond=0) + timedelta(days=2)

    # Service layer: many jobs x 22 instants (the trainings' 6 + 12 + 4 reminders).
    with timed() as t_service:
        for j in range(s.service_jobs):
            start = base + timedelta(minutes=j)
            job_upsert(
                key=f"svc-{j}",
                schedules=[start + timedelta(minutes=15 * i) for i in range(s.service_instants)],
                callback=callback,
            )
    service_occ = s.service_jobs * s.service_instants
    service_rate = service_occ / t_service[0]

    # Bulk: the most instants per job the API accepts.
    per_job = min(s.bulk_instants, settings.REMINDERS_MAX_SCHEDULES)
    jobs = -(-s.bulk_jobs * s.bulk_instants // per_job)
    with timed() as t_bulk:
        for j in range(jobs):
            start = base + timedelta(days=1, seconds=j)
            job_upsert(
                key=f"bulk-{j}",
                schedules=[start + timedelta(seconds=i) for i in range(per_job)],
                callback=callback,
            )
    bulk_occ = jobs * per_job
    bulk_rate = bulk_occ / t_bulk[0]
    stored = Occurrence.objects.count()
    assert stored == service_occ + bulk_occ, (stored, service_occ, bulk_occ)
    h.truncate_engine()
    copy_jobs = min(jobs, 30 if h.quick else 100)  # a rate: a tenth of the bulk size is plenty
    copy_rate = _copy_reference(h, copy_jobs, per_job, base)
    h.truncate_engine()

    beat_rate, beat_delete_rate = _beat_create(h, s.beat_create, base)
    eta_rate = _eta_publish(h, s.eta_publish, base)

    section.rows += [
        Row(
            f"1a schedule, service layer ({s.service_jobs:,} jobs x {s.service_instants})",
            service_rate,
            beat_rate,
            "beat Clocked+PeriodicTask / reminder",
            "occ/s",
            service_rate / beat_rate,
            "vs beat",
            note=f"{service_occ:,} occurrences in {t_service[0]:.1f} s, one job_upsert (own transaction) "
            "per job; "
            f"beat: {s.beat_create:,} reminders through the ORM, deleting them: {beat_delete_rate:,.0f}/s",
        ),
        Row(
            f"1b schedule, bulk ({bulk_occ:,} occ, {per_job} per job_upsert)",
            bulk_rate,
            eta_rate,
            "Celery apply_async(eta)",
            "occ/s",
            bulk_rate / eta_rate,
            "vs ETA",
            "≥ 20,000 occ/s",
            bulk_rate >= 20_000,
            note=f"{bulk_occ:,} occurrences in {t_bulk[0]:.1f} s; no separate bulk API, so job_upsert with "
            f"REMINDERS_MAX_SCHEDULES={settings.REMINDERS_MAX_SCHEDULES} instants; "
            f"ETA: {s.eta_publish:,} publishes",
        ),
        Row(
            "1c reference: the bulk rows by COPY",
            copy_rate,
            bulk_rate,
            "job_upsert bulk",
            "occ/s",
            copy_rate / bulk_rate,
            "COPY/job_upsert",
            note=f"{copy_jobs * per_job:,} rows; what a COPY-based bulk path could reach: one "
            "Job.objects.create + COPY of its occurrences per transaction, same columns and indexes "
            "(not an engine API)",
        ),
    ]
    section.data = {
        "service": {"occurrences": service_occ, "seconds": t_service[0], "rate": service_rate},
        "bulk": {"occurrences": bulk_occ, "per_job": per_job, "seconds": t_bulk[0], "rate": bulk_rate},
        "beat_create_rate": beat_rate,
        "beat_delete_rate": beat_delete_rate,
        "eta_publish_rate": eta_rate,
        "copy_reference_rate": copy_rate,
        "bars": {
            "schedule: service layer": service_rate,
            "schedule: bulk job_upsert": bulk_rate,
            "schedule: beat Clocked+PeriodicTask": beat_rate,
            "schedule: Celery apply_async(eta)": eta_rate,
        },
    }
    return section


def _copy_reference(h: Harness, jobs: int, per_job: int, base: datetime) -> float:
    """The same jobs and occurrences written with COPY: the database's own floor for this insert."""
    from reminders.models import CallbackType, Job, new_idempotency_key

    queue = h.queue_name("copy")
    columns = "job_id, fire_at, next_attempt_at, priority, status, attempts, last_error, idempotency_key"
    with timed() as t_copy:
        for j in range(jobs):
            start = base + timedelta(days=1, seconds=j)
            with transaction.atomic():
                job = Job.objects.create(
                    key=f"copy-{j}", callback_type=CallbackType.RABBITMQ, target=queue, payload=PAYLOAD
                )
                raw = connection.connection
                assert raw is not None
                with (
                    raw.cursor() as cursor,
                    cursor.copy(
                        f"COPY reminders_occurrence ({columns}, job_version, created_at) FROM STDIN"
                    ) as copy,
                ):
                    now = datetime.now(UTC)
                    for i in range(per_job):
                        fire_at = start + timedelta(seconds=i)
                        copy.write_row(
                            (job.pk, fire_at, fire_at, 5, "scheduled", 0, "", new_idempotency_key(), 1, now)
                        )
    return jobs * per_job / t_copy[0]


def _beat_create(h: Harness, count: int, base: datetime) -> tuple[float, float]:
    """What a beat user writes per reminder: a ClockedSchedule and a one-off PeriodicTask, then delete."""
    from django_celery_beat.models import ClockedSchedule, PeriodicTask

    created: list[int] = []
    with timed() as t_create:
        for i in range(count):
            with transaction.atomic():
                fire_at = base + timedelta(seconds=i)
                clocked = ClockedSchedule.objects.create(clocked_time=fire_at)
                task = PeriodicTask.objects.create(
                    name=f"bench-sched-{i}",
                    task="bench.publish_reminder",
                    clocked=clocked,
                    one_off=True,
                    kwargs=json.dumps(
                        {"queue": "x", "key": f"k{i}", "fire_at": fire_at.isoformat(), "payload": {}}
                    ),
                )
                created.append(task.pk)
    with timed() as t_delete:
        for task in PeriodicTask.objects.filter(pk__in=created):
            clocked_id = task.clocked_id
            task.delete()
            ClockedSchedule.objects.filter(pk=clocked_id).delete()
    return count / t_create[0], count / t_delete[0]


def _eta_publish(h: Harness, count: int, base: datetime) -> float:
    """Celery ETA: one task message per reminder, published to a queue no worker reads (then deleted)."""
    from bench.tasks import publish_reminder

    queue = h.queue_name("eta-sched")
    h.declare(queue)
    start = time.perf_counter()
    for i in range(count):
        fire_at = base + timedelta(seconds=i)
        publish_reminder.apply_async(
            kwargs={"queue": "x", "key": f"k{i}", "fire_at": fire_at.isoformat(), "payload": PAYLOAD},
            eta=fire_at,
            queue=queue,
        )
    rate = count / (time.perf_counter() - start)
    h.delete_queue(queue)
    connection.close()
    return rate
