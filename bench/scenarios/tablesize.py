"""4. Claim cost and 5. worker memory, against the number of future occurrences in the table.

One table grows through the sizes (10 k, 1 M, 5 M future rows; 10 k, 200 k, 1 M with --quick), filled
with `INSERT ... SELECT generate_series` and vacuumed/analysed as autovacuum would. At each size:

- claim: 1,000 due rows are added, `occurrences_claim_due(limit=1000)` is timed, the claimed rows are
  removed; repeated, the first (cache warm-up) dropped, median and p90 reported; the EXPLAIN ANALYZE plan of
  the claim statement is printed to show which index it uses and how many rows it touches;
- memory (at the memory sizes): a fresh `celery -A config worker -c 1` drains a fixed due set (kicked once,
  re-kicking itself while a backlog remains) and its peak RSS is read: the sum of VmHWM over the main
  process and its pool child (the scan runs in the child, ETA requests are held in the main process).

The Celery ETA worker for comparison (also -c 1, prefork) receives the same kind of reminders as ETA tasks
due in two hours, holds them, and its peak RSS is read the same way once the queue has handed it every
message (see `_eta_worker_rss` for its prefetch).
"""

from __future__ import annotations

import statistics
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.harness import Harness, peak_rss_kib, rss_kib
from bench.report import Row, Section


class FutureTable:
    """Tops the table up to a number of future (scheduled, due in days) occurrences."""

    def __init__(self, h: Harness) -> None:
        self.h = h
        self.rows = 0
        self.jobs = h.insert_jobs("future", 1000, queue=h.queue_name("future"))
        self.first = datetime.now(UTC) + timedelta(days=1)

    def fill_to(self, size: int) -> float:
        from django.db import connection

        start = time.perf_counter()
        if size > self.rows:
            # 30 days of future, whatever the size.
            step = 30 * 86400 / max(size, 1)
            self.h.insert_occurrences(
                "future", self.jobs, size - self.rows, first=self.first, step_seconds=step, offset=self.rows
            )
            self.rows = size
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE reminders_occurrence")
        return time.perf_counter() - start


def _claim_cost(h: Harness, size: int, reps: int) -> dict[str, Any]:
    from django.conf import settings
    from django.db import connection, transaction
    from django.utils import timezone

    from reminders.engine.occurrences import claim_statement_postgres, occurrences_claim_due

    due_jobs = h.insert_jobs(f"due-{size}", 50, queue=h.queue_name("due"))
    timings: list[float] = []
    for rep in range(reps + 1):
        h.insert_occurrences(
            f"due-{size}-{rep}",
            due_jobs,
            1000,
            first=datetime.now(UTC) - timedelta(seconds=60),
            step_seconds=0.05,
        )
        start = time.perf_counter()
        claim = occurrences_claim_due(now=timezone.now(), limit=1000, lease_seconds=60)
        elapsed = time.perf_counter() - start
        assert len(claim.occurrences) == 1000, len(claim.occurrences)
        if rep:  # the first one warms the caches
            timings.append(elapsed * 1000)
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM reminders_occurrence WHERE lease_token = %s", [claim.token])

    # The plan, on 1,000 due rows, executed and rolled back.
    h.insert_occurrences(
        f"due-{size}-plan", due_jobs, 1000, first=datetime.now(UTC) - timedelta(seconds=60), step_seconds=0.05
    )
    now = timezone.now()
    sql, params = claim_statement_postgres(
        token=uuid.uuid4(),
        until=now + timedelta(seconds=60),
        due=now,
        aged=now - timedelta(seconds=settings.REMINDERS_PRIORITY_AGING_SECONDS),
        limit=1000,
        aged_limit=100,
    )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
        plan = [row[0] for row in cursor.fetchall()]
        transaction.set_rollback(True)
    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM reminders_occurrence WHERE idempotency_key LIKE %s", [f"bench-due-{size}-%"]
        )
        cursor.execute("DELETE FROM reminders_job WHERE key LIKE %s", [f"bench-due-{size}-%"])
    timings.sort()
    return {
        "size": size,
        "median_ms": statistics.median(timings),
        "p90_ms": timings[min(len(timings) - 1, round(0.9 * (len(timings) - 1)))],
        "min_ms": timings[0],
        "timings_ms": timings,
        "plan": plan,
        "index_lines": [
            line.strip() for line in plan if "Index" in line or "Seq Scan" in line or "Execution" in line
        ],
    }


def _worker_rss(h: Harness, size: int, due: int) -> dict[str, Any]:
    """A fresh worker drains `due` occurrences with `size` future rows in the table; its peak RSS."""
    from reminders.models import Occurrence, OccurrenceStatus
    from reminders.tasks import scan_due

    queue = h.queue_name(f"mem-{size}")
    h.declare(queue)
    jobs = h.insert_jobs(f"mem-{size}", max(1, due // 22), queue=queue)
    h.insert_occurrences(
        f"mem-{size}", jobs, due, first=datetime.now(UTC) - timedelta(seconds=30), step_seconds=10 / due
    )
    name = f"memory-worker-{size}"
    worker = h.worker(name)
    idle_kib = rss_kib(worker.pid)
    start = time.perf_counter()
    scan_due.apply_async(expires=60)
    delivered = 0
    while time.perf_counter() - start < 300:
        delivered = Occurrence.objects.filter(
            status=OccurrenceStatus.DELIVERED, idempotency_key__startswith=f"bench-mem-{size}-"
        ).count()
        if delivered >= due:
            break
        time.sleep(0.5)
    elapsed = time.perf_counter() - start
    time.sleep(1.5)  # a last scan may still be polling; let it finish inside the measurement
    peak = peak_rss_kib(worker.pid)
    h.stop(worker)
    on_queue, _ = h.queue_depth(queue)
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM reminders_occurrence WHERE idempotency_key LIKE %s", [f"bench-mem-{size}-%"]
        )
        cursor.execute("DELETE FROM reminders_job WHERE key LIKE %s", [f"bench-mem-{size}-%"])
    h.delete_queue(queue)
    return {
        "future_rows": size,
        "due": due,
        "delivered": delivered,
        "on_queue": on_queue,
        "seconds": elapsed,
        "peak_kib": peak,
        "idle_kib": idle_kib,
    }


def _eta_worker_rss(h: Harness, held: int) -> dict[str, Any]:
    """A Celery worker (-c 1) holding `held` ETA reminders due in two hours; its peak RSS."""
    from bench.tasks import publish_reminders_eta

    h.delete_queue(h.celery_queue)
    name = f"eta-memory-worker-{held}"
    # A prefetch big enough to hold them all (65,535, the AMQP maximum; Celery lifts it past that as ETA
    # tasks arrive). With the project's multiplier of 1 the worker raises its prefetch by one ETA task per
    # event-loop wake-up and took about one message every two seconds: it never came to hold them.
    worker = h.worker(name, "--prefetch-multiplier", "65535")
    idle_kib = rss_kib(worker.pid)
    fire = datetime.now(UTC) + timedelta(hours=2)
    start = time.perf_counter()
    fires = (fire + timedelta(milliseconds=i) for i in range(held))
    publish_seconds = publish_reminders_eta(fires, queue="x", key="etamem")
    ready = held
    while time.perf_counter() - start < 600:
        ready, _ = h.queue_depth(h.celery_queue)
        if ready == 0:
            break
        time.sleep(0.5)
    # The last messages are still being turned into requests: wait for RSS to settle.
    last, stable_since = rss_kib(worker.pid), time.perf_counter()
    while time.perf_counter() - stable_since < 2 and time.perf_counter() - start < 660:
        time.sleep(0.25)
        now_kib = rss_kib(worker.pid)
        if abs(now_kib - last) > 256:
            last, stable_since = now_kib, time.perf_counter()
    peak = peak_rss_kib(worker.pid)
    received = held - ready
    h.stop(worker, grace=3)
    h.delete_queue(h.celery_queue)
    return {
        "held": held,
        "received": received,
        "publish_seconds": publish_seconds,
        "seconds": time.perf_counter() - start,
        "peak_kib": peak,
        "idle_kib": idle_kib,
    }


def run(h: Harness, *, claim: bool, memory: bool) -> list[Section]:
    s = h.sizes
    h.truncate_engine()
    table = FutureTable(h)
    claims: list[dict[str, Any]] = []
    workers: list[dict[str, Any]] = []
    fills: dict[int, float] = {}
    sizes = sorted(set((s.claim_sizes if claim else []) + (s.memory_sizes if memory else [])))
    for size in sizes:
        fills[size] = table.fill_to(size)
        print(f"  table: {size:,} future occurrences (filled in {fills[size]:.1f} s)", flush=True)
        if claim and size in s.claim_sizes:
            result = _claim_cost(h, size, s.claim_reps)
            claims.append(result)
            print(
                f"    claim of 1,000: median {result['median_ms']:.2f} ms, p90 {result['p90_ms']:.2f} ms",
                flush=True,
            )
            for line in result["index_lines"]:
                print(f"      plan: {line}", flush=True)
        if memory and size in s.memory_sizes:
            result = _worker_rss(h, size, s.memory_due)
            workers.append(result)
            print(
                f"    worker peak RSS {result['peak_kib'] / 1024:.1f} MiB ({result['delivered']:,} delivered)"
            )
    h.truncate_engine()

    sections: list[Section] = []
    if claim:
        section = Section("claim")
        small, large = claims[0], claims[-1]
        ratio = large["median_ms"] / small["median_ms"]
        section.rows.append(
            Row(
                f"4 claim 1,000 due, {large['size']:,} vs {small['size']:,} future",
                large["median_ms"],
                small["median_ms"],
                f"at {small['size']:,}",
                "ms",
                ratio,
                f"{large['size']:,}/{small['size']:,}",
                "≤ 1.5x",
                ratio <= 1.5,
                note="median of {} claims per size; medians: {}; plan at {:,}: {}".format(
                    s.claim_reps,
                    ", ".join(f"{c['size']:,}: {c['median_ms']:.2f} ms" for c in claims),
                    large["size"],
                    " / ".join(large["index_lines"][:3]),
                ),
            )
        )
        section.data = {
            "sizes": [c["size"] for c in claims],
            "median_ms": [c["median_ms"] for c in claims],
            "p90_ms": [c["p90_ms"] for c in claims],
            "runs": claims,
            "fill_seconds": fills,
        }
        sections.append(section)
    if memory:
        section = Section("memory")
        eta = [_eta_worker_rss(h, held) for held in s.eta_memory_sizes]
        small, large = workers[0], workers[-1]
        ratio = large["peak_kib"] / small["peak_kib"]
        biggest_eta = eta[-1]
        mib = 1024.0
        section.rows += [
            Row(
                f"5a worker peak RSS, {large['future_rows']:,} vs {small['future_rows']:,} future",
                large["peak_kib"] / mib,
                small["peak_kib"] / mib,
                f"at {small['future_rows']:,}",
                "MiB",
                ratio,
                f"{large['future_rows']:,}/{small['future_rows']:,}",
                "≤ 1.10x",
                ratio <= 1.10,
                note=f"worker -c 1 (main + pool child) draining {s.memory_due:,} due occurrences each time",
            ),
            Row(
                f"5b worker RSS vs Celery ETA worker holding {biggest_eta['held']:,}",
                large["peak_kib"] / mib,
                biggest_eta["peak_kib"] / mib,
                f"ETA, {biggest_eta['held']:,} held",
                "MiB",
                biggest_eta["peak_kib"] / large["peak_kib"],
                "ETA/ours",
                note="ETA worker peaks: "
                + ", ".join(
                    f"{e['held']:,} held (received {e['received']:,}): {e['peak_kib'] / mib:.1f} MiB"
                    for e in eta
                )
                + "; 1 M ETA reminders are not attempted (publishing and fetching them takes many minutes)",
            ),
        ]
        bars = {f"this project, {w['future_rows']:,} future": w["peak_kib"] / mib for w in workers}
        bars.update({f"Celery ETA, {e['held']:,} held": e["peak_kib"] / mib for e in eta})
        section.data = {"ours": workers, "eta": eta, "bars": bars}
        sections.append(section)
    return sections
