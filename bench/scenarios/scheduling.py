"""1. Scheduling throughput: occurrences stored per second, through the service layer.

- service layer, many jobs x few instants: one `job_upsert` per training-sized job (22 instants), each in
  its own transaction, as an API request or a training save would do it;
- bulk: `jobs_bulk_upsert` (what `POST /api/jobs/bulk/` calls): 1,000 jobs x 100 instants per call, one
  transaction each, until the bulk size is reached (1 M occurrences, 100 k with --quick);
- per job: `job_upsert` with 1,000 instants (REMINDERS_MAX_SCHEDULES) per job, a tenth of the bulk size.
Alternatives on the same reminders: one django-celery-beat ClockedSchedule + one-off PeriodicTask per
reminder through the ORM (what a beat user writes), and Celery `apply_async(eta=...)`.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import connection, transaction

from bench.harness import PAYLOAD, Harness, timed
from bench.report import Row, Section

BULK_JOBS_PER_CALL = 1000
BULK_INSTANTS_PER_JOB = 100


def run(h: Harness) -> Section:
    from reminders.jobs import Callback, JobSpec, job_upsert, jobs_bulk_upsert
    from reminders.models import CallbackType, Occurrence

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

    # Bulk: the bulk API, 100,000 instants per call.
    bulk_target = s.bulk_jobs * s.bulk_instants
    calls = max(1, bulk_target // (BULK_JOBS_PER_CALL * BULK_INSTANTS_PER_JOB))
    offsets = [timedelta(seconds=i) for i in range(BULK_INSTANTS_PER_JOB)]
    with timed() as t_bulk:
        for c in range(calls):
            specs = []
            for j in range(BULK_JOBS_PER_CALL):
                start = base + timedelta(days=1, minutes=c, seconds=j)
                specs.append(
                    JobSpec(key=f"bulk-{c}-{j}", schedules=[start + o for o in offsets], callback=callback)
                )
            jobs_bulk_upsert(specs=specs)
    bulk_occ = calls * BULK_JOBS_PER_CALL * BULK_INSTANTS_PER_JOB
    bulk_rate = bulk_occ / t_bulk[0]

    # Per job: job_upsert with the most instants the API accepts per job.
    per_job = min(s.bulk_instants, settings.REMINDERS_MAX_SCHEDULES)
    per_job_jobs = max(1, bulk_occ // per_job // 10)
    with timed() as t_per_job:
        for j in range(per_job_jobs):
            start = base + timedelta(days=3, seconds=j)
            job_upsert(
                key=f"per-job-{j}",
                schedules=[start + timedelta(seconds=i) for i in range(per_job)],
                callback=callback,
            )
    per_job_occ = per_job_jobs * per_job
    per_job_rate = per_job_occ / t_per_job[0]
    stored = Occurrence.objects.count()
    assert stored == service_occ + bulk_occ + per_job_occ, (stored, service_occ, bulk_occ, per_job_occ)
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
            f"1b schedule, bulk API ({bulk_occ:,} occ, {BULK_JOBS_PER_CALL:,} jobs x {BULK_INSTANTS_PER_JOB} "
            "per call)",
            bulk_rate,
            eta_rate,
            "Celery apply_async(eta)",
            "occ/s",
            bulk_rate / eta_rate,
            "vs ETA",
            "≥ 20,000 occ/s",
            bulk_rate >= 20_000,
            note=f"{bulk_occ:,} occurrences in {t_bulk[0]:.1f} s through jobs_bulk_upsert (one INSERT of the "
            f"jobs and one COPY of their occurrences per call); ETA: {s.eta_publish:,} publishes",
        ),
        Row(
            f"1c schedule, one job_upsert per {per_job:,} instants",
            per_job_rate,
            eta_rate,
            "Celery apply_async(eta)",
            "occ/s",
            per_job_rate / eta_rate,
            "vs ETA",
            note=f"{per_job_occ:,} occurrences in {t_per_job[0]:.1f} s, one transaction per job",
        ),
    ]
    section.data = {
        "service": {"occurrences": service_occ, "seconds": t_service[0], "rate": service_rate},
        "bulk": {"occurrences": bulk_occ, "seconds": t_bulk[0], "rate": bulk_rate},
        "per_job": {
            "occurrences": per_job_occ,
            "per_job": per_job,
            "seconds": t_per_job[0],
            "rate": per_job_rate,
        },
        "beat_create_rate": beat_rate,
        "beat_delete_rate": beat_delete_rate,
        "eta_publish_rate": eta_rate,
        "bars": {
            "schedule: service layer": service_rate,
            "schedule: bulk API": bulk_rate,
            "schedule: job_upsert x 1,000": per_job_rate,
            "schedule: beat Clocked+PeriodicTask": beat_rate,
            "schedule: Celery apply_async(eta)": eta_rate,
        },
    }
    return section


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
    from bench.tasks import publish_reminders_eta

    queue = h.queue_name("eta-sched")
    h.declare(queue)
    fires = (base + timedelta(seconds=i) for i in range(count))
    rate = count / publish_reminders_eta(fires, queue="x", key="k", task_queue=queue)
    h.delete_queue(queue)
    connection.close()
    return rate
