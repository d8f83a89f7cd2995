"""3. Fire lateness: how long after its fire time a reminder is on its queue, read by a real consumer.

This project: occurrences due evenly at `lateness_rate`/s for `lateness_seconds` (and again at
`lateness_fast_rate`/s), pre-scheduled in the table, delivered by real `celery -A config worker -c 1` and
`celery -A config beat` processes (beat starts the scan task every second; on PostgreSQL the scan claims
REMINDERS_LOOKAHEAD_SECONDS ahead and publishes each row at its instant, reminders/engine/lookahead.py).

django-celery-beat: one ClockedSchedule + one-off PeriodicTask per reminder, a real beat process. Beat sends
each task message straight to the reminder's queue (PeriodicTask.queue), so no worker hop is counted
against it: this is beat's best case.

Celery ETA: one `apply_async(eta=fire_at)` per reminder, a real worker (-c 1) holding them until due; the
task publishes the reminder through the project's own RabbitMQ transport; at 1,000/s like ours.

Beat runs at a load it survives (fewer reminders per second); the table says which. 3f/3g: a job POSTed
for "now", from the 201 to its queue (bench/scenarios/pickup.py). Beat's
cost grows with the number of enabled tasks it holds, not only with the rate, so every system also holds
`pending` reminders due a few minutes later (the --quick run's 1,000 due + 4,000 pending = the full run's
5,000 beat tasks, all within beat's five-minute look-ahead).
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.harness import PAYLOAD, Harness, quantile
from bench.processes import Consumer
from bench.report import Row, Section
from bench.scenarios.pickup import SPACING_SECONDS, run_posted

SPACING_MS = round(SPACING_SECONDS * 1000)
# Pending reminders fall due from a minute after the measured window, over two minutes: inside beat's
# five-minute look-ahead (django-celery-beat loads only clocked tasks due within SCHEDULE_SYNC_MAX_INTERVAL),
# so beat holds them as it would in a busy hour, and never reached while we measure.
PENDING_AFTER = 60
PENDING_SPREAD = 120


def _pending(first: datetime, seconds: int, count: int) -> list[datetime]:
    start = first + timedelta(seconds=seconds + PENDING_AFTER)
    return [start + timedelta(seconds=i * PENDING_SPREAD / count) for i in range(count)]


def _stats(lateness: list[float], expected: int) -> dict[str, Any]:
    values = sorted(lateness) + [math.inf] * max(0, expected - len(lateness))
    cdf = [quantile(values, q / 400) for q in range(401)]
    return {
        "expected": expected,
        "received": len(lateness),
        "p50": quantile(values, 0.50),
        "p90": quantile(values, 0.90),
        "p99": quantile(values, 0.99),
        "max": values[-1] if values else math.nan,
        "min": values[0] if values else math.nan,
        "cdf": [x for x in cdf if math.isfinite(x)],
    }


@contextlib.contextmanager
def _collector_off() -> Iterator[None]:
    """No garbage collection in this process while reminders fall due.

    The consumer thread stamps each arrival in this process, which holds Django, the fills and every message
    received: a full collection paused it for hundreds of milliseconds (a late arrival of a message published
    on time). Collected before, so nothing is left over, and right after, so what the window left is not
    collected during the next measurement.
    """
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()
        gc.collect()


def _wait(consumer: Consumer, expected: int, last_fire: datetime, grace: float) -> None:
    until = time.monotonic() + max(0.0, (last_fire - datetime.now(UTC)).total_seconds()) + grace
    consumer.wait_for(expected, until=until)


def run_ours(h: Harness) -> dict[str, Any]:
    h.truncate_engine()
    stats = measure_ours(h, "late", rate=h.sizes.lateness_rate, seconds=h.sizes.lateness_seconds)
    h.truncate_engine()
    return stats


def measure_ours(
    h: Harness, tag: str, *, rate: int, seconds: int, during: Callable[[], Any] | None = None
) -> dict[str, Any]:
    """Lateness of `rate`/s reminders for `seconds`, on whatever the table already holds.

    `during`, if given, is entered (as a context manager factory) while the reminders fall due: the scale
    scenario creates schedules there. Only this run's rows are removed afterwards.
    """
    from django.db import connection
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    from reminders.beat import ensure_periodic_tasks

    s = h.sizes
    n = rate * seconds
    ensure_periodic_tasks(IntervalSchedule, PeriodicTask)
    queue = h.queue_name(f"{tag}-ours")
    h.declare(queue)
    jobs = h.insert_jobs(tag, max(1, n // 22), queue=queue)
    load = during() if during else contextlib.nullcontext()
    with h.consumer(queue) as consumer:
        worker = h.worker(f"{tag}-worker")
        beat = h.beat(f"{tag}-beat")
        h.wait_for_log(f"{tag}-beat", "beat: Starting", timeout=30, proc=beat)
        with _collector_off():
            first = datetime.now(UTC) + timedelta(seconds=3)
            h.insert_occurrences(tag, jobs, n, first=first, step_seconds=1 / rate)
            if s.pending:
                later = first + timedelta(seconds=seconds + PENDING_AFTER)
                h.insert_occurrences(
                    f"{tag}-pending", jobs, s.pending, first=later, step_seconds=PENDING_SPREAD / s.pending
                )
            last = first + timedelta(seconds=(n - 1) / rate)
            with load as extra:
                _wait(consumer, n, last, grace=15)
        h.stop(beat)
        h.stop(worker)
    stats = _stats(consumer.arrivals.lateness(), n)
    stats.update(
        load=f"{rate:,}/s for {seconds} s" + (f" + {s.pending:,} pending" if s.pending else ""),
        rate=rate,
        during=extra,
    )
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM reminders_occurrence WHERE idempotency_key LIKE %s", [f"bench-{tag}-%"])
        cursor.execute("DELETE FROM reminders_job WHERE key LIKE %s", [f"bench-{tag}-%"])
    h.delete_queue(queue)
    return stats


def _competitor_load(h: Harness, name: str, reminders: int, seconds: float) -> tuple[int, float, str]:
    """A competitor's run: its reminder count, their rate over `seconds`, and a fresh declared queue."""
    queue = h.queue_name(name)
    h.declare(queue)
    return reminders, reminders / seconds, queue


def run_beat(h: Harness) -> dict[str, Any]:
    from django.db import connection
    from django_celery_beat.models import ClockedSchedule, PeriodicTask, PeriodicTasks

    from reminders.beat import PURGE_TASK_NAME, SCAN_TASK_NAME

    s = h.sizes
    n, rate, queue = _competitor_load(h, "late-beat", s.beat_reminders, s.beat_seconds)
    PeriodicTask.objects.filter(name__in=[SCAN_TASK_NAME, PURGE_TASK_NAME]).update(enabled=False)
    lead = 5.0 if h.quick else 8.0
    first = datetime.now(UTC) + timedelta(seconds=lead)
    fires = [first + timedelta(seconds=i / rate) for i in range(n)]
    later = _pending(first, s.beat_seconds, s.pending)
    clocks = ClockedSchedule.objects.bulk_create([ClockedSchedule(clocked_time=f) for f in fires + later])
    PeriodicTask.objects.bulk_create(
        [
            PeriodicTask(
                name=f"bench-late-{i}",
                task="bench.publish_reminder",
                clocked=clock,
                one_off=True,
                queue=queue,
                kwargs=json.dumps(
                    {"queue": queue, "key": f"beat-{i}", "fire_at": f.isoformat(), "payload": PAYLOAD}
                ),
                headers=json.dumps({"fire_at": f.isoformat()}),
            )
            for i, (f, clock) in enumerate(zip(fires + later, clocks, strict=True))
        ],
        batch_size=1000,
    )
    PeriodicTasks.update_changed()
    with h.consumer(queue) as consumer:
        beat = h.beat("beat-competitor")
        started = h.wait_for_log("beat-competitor", "beat: Starting", timeout=30, proc=beat)
        with _collector_off():
            _wait(consumer, n, fires[-1], grace=max(30.0, s.beat_seconds))
        h.stop(beat)
    stats = _stats(consumer.arrivals.lateness(), n)
    stats.update(
        load=f"{n:,} over {s.beat_seconds} s ({rate:,.0f}/s)"
        + (f" + {s.pending:,} pending" if s.pending else ""),
        rate=rate,
        beat_start_seconds=started,
        lead=lead,
    )
    # In SQL: the ORM deletes beat tasks one by one with signals (about a hundred per second).
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM django_celery_beat_periodictask WHERE name LIKE 'bench-late-%%'")
        cursor.execute("DELETE FROM django_celery_beat_clockedschedule")
    PeriodicTask.objects.filter(name__in=[SCAN_TASK_NAME, PURGE_TASK_NAME]).update(enabled=True)
    PeriodicTasks.update_changed()
    h.delete_queue(queue)
    return stats


def run_eta(h: Harness) -> dict[str, Any]:
    from bench.tasks import publish_reminders_eta

    s = h.sizes
    n, rate, queue = _competitor_load(h, "late-eta", s.eta_reminders, s.eta_seconds)
    h.delete_queue(h.celery_queue)  # no leftover scan kicks may occupy the worker
    with h.consumer(queue) as consumer:
        worker = h.worker("eta-worker")
        # Every task is published before the first falls due (300-800 apply_async a second here), so
        # what is measured is the worker's timer, not the publishing.
        lead = 3.0 + (n + s.pending) / 300
        first = datetime.now(UTC) + timedelta(seconds=lead)
        fires = [first + timedelta(seconds=i / rate) for i in range(n)]
        later = _pending(first, s.eta_seconds, s.pending)
        publish_seconds = publish_reminders_eta(sorted(fires + later), queue=queue, key="eta")
        with _collector_off():
            _wait(consumer, n, fires[-1], grace=max(30.0, s.eta_seconds))
        h.stop(worker)
    stats = _stats(consumer.arrivals.lateness(), n)
    stats.update(
        load=f"{n:,} over {s.eta_seconds} s ({rate:,.0f}/s)", rate=rate, publish_seconds=publish_seconds
    )
    h.delete_queue(queue)
    h.delete_queue(h.celery_queue)
    return stats


def run_ours_fast(h: Harness) -> dict[str, Any]:
    h.truncate_engine()
    stats = measure_ours(h, "fast", rate=h.sizes.lateness_fast_rate, seconds=h.sizes.lateness_fast_seconds)
    h.truncate_engine()
    return stats


def run(h: Harness) -> Section:
    section = Section("lateness")
    results = []
    for phase in (run_ours, run_ours_fast, run_beat, run_eta, run_posted):
        start = time.perf_counter()
        results.append(phase(h))
        stats = results[-1]
        print(
            f"  {phase.__name__}: {stats['received']:,}/{stats['expected']:,} received, "
            f"p50 {stats['p50']:.4f} s, p99 {stats['p99']:.4f} s ({time.perf_counter() - start:.0f} s)",
            flush=True,
        )
    ours, fast, beat, eta, posted = results
    section.data = {
        "ours": {k: v for k, v in ours.items() if k != "cdf"},
        "ours_fast": {k: v for k, v in fast.items() if k != "cdf"},
        "beat": {k: v for k, v in beat.items() if k != "cdf"},
        "eta": {k: v for k, v in eta.items() if k != "cdf"},
        "posted": posted,
        "cdf": {
            f"this project, {ours['load']}": ours["cdf"],
            f"this project, {fast['load']}": fast["cdf"],
            f"django-celery-beat, {beat['load']}": beat["cdf"],
            f"Celery ETA, {eta['load']}": eta["cdf"],
        },
    }
    section.rows += _rows(ours, fast, beat, eta, posted)
    return section


def _ratio(a: float, b: float) -> float | None:
    return a / b if b and math.isfinite(a) and math.isfinite(b) else None


def _rows(
    ours: dict[str, Any],
    fast: dict[str, Any],
    beat: dict[str, Any],
    eta: dict[str, Any],
    posted: dict[str, Any],
) -> list[Row]:
    got = f"received {ours['received']:,}/{ours['expected']:,}"
    got += f"; beat {beat['received']:,}/{beat['expected']:,}; ETA {eta['received']:,}/{eta['expected']:,}"
    load = f"@{ours['rate']:,}/s"
    vs_eta = f"ETA @{eta['rate']:,.0f}/s"
    vs_beat = f"beat @{beat['rate']:,.0f}/s"
    return [
        Row(f"3a lateness p50 {load}", ours["p50"], eta["p50"], vs_eta, "s", _ratio(eta["p50"], ours["p50"]),
            "ETA/ours", "≤ 5 ms", ours["p50"] <= 0.005, note=got),
        Row(f"3b lateness p99 {load}", ours["p99"], eta["p99"], vs_eta, "s", _ratio(eta["p99"], ours["p99"]),
            "ETA/ours", "≤ 25 ms", ours["p99"] <= 0.025,
            note=f"ETA tasks published in {eta['publish_seconds']:.1f} s before the first fell due"),
        Row(f"3c lateness max {load}", ours["max"], eta["max"], vs_eta, "s", _ratio(eta["max"], ours["max"]),
            "ETA/ours", "≤ 100 ms", ours["max"] <= 0.100),
        Row(f"3d lateness p99 @{fast['rate']:,}/s", fast["p99"], eta["p99"], vs_eta, "s",
            _ratio(eta["p99"], fast["p99"]), "ETA/ours", "≤ 100 ms", fast["p99"] <= 0.100,
            note=f"p50 {fast['p50'] * 1000:.1f} ms, max {fast['max'] * 1000:.0f} ms; "
            f"received {fast['received']:,}/{fast['expected']:,}"),
        # No ratio against beat: beat only keeps up at a fraction of this load, and a p99 measured at
        # another rate compares nothing. Its figures at the rate it survives are information.
        Row(f"3e django-celery-beat alone {vs_beat}", beat["p99"], None, "", "s", None, "", "", None,
            note=f"p99 at the rate beat survives, not a comparison; beat p50 {beat['p50']:.3f} s; start to "
            f"'Starting' {beat['beat_start_seconds']:.1f} s; first fire {beat['lead']:.0f} s after the tasks "
            "were written"),
        Row("3f posted due now → on queue p50", posted["p50"], None, "", "s", None, "", "≤ 20 ms",
            posted["p50"] <= 0.020, note=f"after the API's 201; {posted['received']}/{posted['expected']} "
            f"POSTs one at a time, {SPACING_MS} ms apart"),
        Row("3g posted due now → on queue p99", posted["p99"], None, "", "s", None, "", "≤ 100 ms",
            posted["p99"] <= 0.100, note=f"max {posted['max'] * 1000:.0f} ms"),
    ]  # fmt: skip
