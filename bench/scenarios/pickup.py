"""3f. Instant pickup: a job POSTed for an instant already due, from the 201 to its message on its queue.

A real worker and beat run as in the lateness scenario; the jobs are POSTed through the real API view (DRF,
in this process, on the run's database), one at a time and spaced out, so each one is picked up on its own:
what is measured is the wake-up (NOTIFY after commit, LISTEN in the worker), not a batch.
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime
from typing import Any

from bench.harness import PAYLOAD, Harness, quantile

# Between two posts: long enough for the previous one to be on its queue, so none waits behind another.
SPACING_SECONDS = 0.1


def run_posted(h: Harness) -> dict[str, Any]:
    """POST `posted_jobs` jobs due now; returns p50/p99/max of (arrival on the queue - 201 received)."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission
    from django_celery_beat.models import IntervalSchedule, PeriodicTask
    from rest_framework.test import APIClient

    from reminders.beat import ensure_periodic_tasks
    from reminders.models import QueueGrant

    count = h.sizes.posted_jobs
    ensure_periodic_tasks(IntervalSchedule, PeriodicTask)
    queue = h.queue_name("posted")
    h.declare(queue)
    user, _ = get_user_model().objects.get_or_create(username="bench-posted")
    # An integration caller of the scheduler API, granted the queue it posts to.
    user.user_permissions.add(Permission.objects.get(codename="use_scheduler_api"))
    QueueGrant.objects.get_or_create(user=user, pattern=queue)
    client = APIClient()
    client.force_authenticate(user)
    answered: dict[str, float] = {}
    with h.consumer(queue) as consumer:
        worker = h.worker("posted-worker")
        beat = h.beat("posted-beat")
        h.wait_for_log("posted-beat", "beat: Starting", timeout=30, proc=beat)
        time.sleep(2.0)  # the worker is in its scan loop, waiting
        for i in range(count):
            key = f"bench-posted-{i}"
            body = {
                "key": key,
                "schedules": [datetime.now(UTC).isoformat().replace("+00:00", "Z")],
                "callback": {"type": "rabbitmq", "data": {"queue": queue, "payload": PAYLOAD}},
            }
            response = client.post("/api/jobs/", body, format="json")
            answered[key] = time.time()
            if response.status_code != 201:
                raise RuntimeError(f"POST /api/jobs/ answered {response.status_code}: {response.content!r}")
            time.sleep(SPACING_SECONDS)
        consumer.wait_for(count, until=time.monotonic() + 10)
        h.stop(beat)
        h.stop(worker)
    delays = []
    for at, message in consumer.arrivals.received:
        key = str((message.properties.get("application_headers") or {}).get("job_key"))
        if key in answered:
            delays.append(at - answered[key])
    delays.sort()
    values = delays + [math.inf] * max(0, count - len(delays))
    h.delete_queue(queue)
    return {
        "expected": count,
        "received": len(delays),
        "p50": quantile(values, 0.50),
        "p99": quantile(values, 0.99),
        "max": values[-1] if values else math.nan,
    }
