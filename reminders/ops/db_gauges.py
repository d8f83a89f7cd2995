"""The gauges read from the database at scrape time: due backlog, oldest due age, last scan per worker.

They describe shared state, not one process, so no process keeps them: every scrape asks PostgreSQL, with
statements that stay bounded however many future rows there are (one index range scan per priority level,
each stopping at now() and at REMINDERS_METRICS_BACKLOG_CAP rows; tests/ops/test_metrics_plan.py checks the
plan). The backlog gauge therefore saturates at that cap per priority level.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.conf import settings
from django.db import connection
from django.db.models import Min
from django.db.models.functions import Now
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from reminders import queries
from reminders.engine.dialect import speaks_postgresql
from reminders.models import Occurrence, OccurrenceStatus, WorkerHeartbeat


def due_backlog() -> dict[bool, tuple[int, float]]:
    """{throttled: (due rows, age in seconds of the oldest)}; both keys always present."""
    cap = settings.REMINDERS_METRICS_BACKLOG_CAP
    found: dict[bool, tuple[int, float]] = {False: (0, 0.0), True: (0, 0.0)}
    if speaks_postgresql():
        with connection.cursor() as cursor:
            cursor.execute(queries.DUE_BACKLOG, {"cap": cap})
            for throttled, count, age in cursor.fetchall():
                found[bool(throttled)] = (int(count), max(float(age or 0), 0.0))
        return found
    # SQLite (development): one process, small tables.
    for throttled in (False, True):
        due = Occurrence.objects.filter(
            status=OccurrenceStatus.SCHEDULED, throttle__isnull=not throttled, next_attempt_at__lte=Now()
        )
        count = due[:cap].count()
        oldest = due.aggregate(oldest=Min("next_attempt_at"))["oldest"]
        age = 0.0
        if oldest is not None:
            age = max((timezone.now() - oldest).total_seconds(), 0.0)
        found[throttled] = (count, age)
    return found


class DatabaseCollector(Collector):
    """Yields the database gauges; `reminders_database_up` 0 (and nothing else) when the database fails."""

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("reminders_database_up", "1 if the scrape could read the database.")
        try:
            backlog = due_backlog()
            workers = list(
                WorkerHeartbeat.objects.order_by("-scan_finished_at").values_list(
                    "worker", "scan_finished_at"
                )[:100]
            )
        except Exception:
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        size = GaugeMetricFamily(
            "reminders_due_backlog",
            "Occurrences due now and not claimed yet (at most REMINDERS_METRICS_BACKLOG_CAP per priority).",
            labels=["throttled"],
        )
        age = GaugeMetricFamily(
            "reminders_oldest_due_age_seconds",
            "How long the oldest due, unclaimed occurrence has been due (database clock); 0 when none.",
            labels=["throttled"],
        )
        for throttled, (count, oldest) in backlog.items():
            label = "true" if throttled else "false"
            size.add_metric([label], count)
            age.add_metric([label], oldest)
        scan = GaugeMetricFamily(
            "reminders_scan_last_success_timestamp_seconds",
            "When each worker last finished a due scan (Unix time, database clock).",
            labels=["worker"],
        )
        for worker, finished_at in workers:
            scan.add_metric([worker], finished_at.timestamp())
        yield from (size, age, scan)
