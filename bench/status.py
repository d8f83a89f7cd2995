"""`python -m bench.status [--rows N]`: the operator status page against a 5 M-row occurrence table.

Fills the DATABASE_URL database (PostgreSQL; it must be a scratch one, the rows stay until --clean) with
N occurrences shaped like a busy day: mostly future ones, a due backlog, an hour of deliveries at about
170/s, a day of failures with a handful of distinct errors, and some cancelled and old delivered rows.
Then it times `engine_status()` and the whole page (`GET /admin/status/` through the test client), and
writes the EXPLAIN (ANALYZE, BUFFERS) of every statement of the page to bench/status_explain.txt.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import django

TARGET_MS = 200.0
# Share of the rows per kind (the rest are future scheduled rows).
SHAPE = {
    "due": 0.01,  # scheduled, due in the last 10 minutes (a backlog of 50,000 at 5 M)
    "delivered_hour": 0.12,  # delivered over the last hour (600,000 at 5 M)
    "delivered_old": 0.10,  # delivered 1 to 6 days ago
    "failed": 0.004,  # failed over the last 24 h (20,000 at 5 M)
    "cancelled": 0.02,
    "retrying": 0.002,  # scheduled again after a failed attempt, due over the next 10 minutes (10,000 at 5 M)
}


def _fill(rows: int) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM reminders_occurrence")
        (present,) = cursor.fetchone()
        if present >= rows:
            print(f"{present} occurrences already there")
            return
        cursor.execute(
            "INSERT INTO reminders_job (key, callback_type, target, payload, http_secret, priority, version,"
            " batch_size, created_at, updated_at) SELECT 'bench-status-' || i, 'rabbitmq', 'bench.status',"
            " '{}'::jsonb, '', i % 10, 1, 1, now(), now() FROM generate_series(1, 1000) AS i"
            " ON CONFLICT (key) DO NOTHING"
        )
        cursor.execute("SELECT min(id) FROM reminders_job WHERE key LIKE 'bench-status-%%'")
        (first_job,) = cursor.fetchone()
        counts = {kind: int(rows * share) for kind, share in SHAPE.items()}
        counts["future"] = rows - sum(counts.values())
        # (kind, status, fire_at, next_attempt_at, delivered_at, finished_at, last_error) as SQL of i and n.
        shapes = {
            "future": ("scheduled", "now() + (i * 2592000.0 / n) * interval '1 second'", "fire", "NULL",
                       "NULL", "''"),
            "due": ("scheduled", "now() - (i * 600.0 / n) * interval '1 second'", "fire", "NULL", "NULL",
                    "''"),
            "delivered_hour": ("delivered", "now() - (i * 3600.0 / n) * interval '1 second'", "fire",
                               "fire + ((i % 50) * interval '1 millisecond')",
                               "fire + ((i % 50) * interval '1 millisecond')", "''"),
            "delivered_old": ("delivered",
                              "now() - interval '1 day' - (i * 432000.0 / n) * interval '1 second'", "fire",
                              "fire + interval '3 milliseconds'", "fire + interval '3 milliseconds'", "''"),
            "failed": ("failed", "now() - (i * 86400.0 / n) * interval '1 second'", "fire", "NULL",
                       "fire + interval '1 minute'", "'HTTP ' || (500 + i % 4) || ' from the endpoint'"),
            "cancelled": ("cancelled", "now() - (i * 86400.0 / n) * interval '1 second'", "fire", "NULL",
                          "fire", "'cancelled'"),
            "retrying": ("scheduled", "now() - (i * 3600.0 / n) * interval '1 second'",
                         "now() + (i * 600.0 / n) * interval '1 second'", "NULL", "NULL",
                         "'HTTP ' || (502 + i % 3) || ' from the endpoint (attempt ' || (1 + i % 4) || ')'"),
        }  # fmt: skip
        for kind, n in counts.items():
            status, fire, next_at, delivered, finished, error = shapes[kind]
            started = time.perf_counter()
            cursor.execute(
                f"""
                INSERT INTO reminders_occurrence (job_id, fire_at, next_attempt_at, priority, status,
                    attempts, delivered_at, finished_at, last_error, idempotency_key, job_version,
                    batch_index, created_at)
                SELECT {first_job} + i % 1000, fire, {next_at.replace("/ n)", f"/ {n})")}, (i % 10)::smallint,
                       '{status}', CASE WHEN '{kind}' = 'retrying' THEN 1 + i % 4
                                        WHEN '{status}' = 'scheduled' THEN 0 ELSE 1 END,
                       {delivered}, {finished}, {error}, '{kind}-' || i, 1, 0, now()
                  FROM (SELECT i, {fire.replace("/ n)", f"/ {n})")} AS fire
                          FROM generate_series(1, {n}) AS i) AS g
                """
            )
            print(f"  {kind}: {n} rows in {time.perf_counter() - started:.1f} s", flush=True)
        # The push side of the page: an hour of the gateway's per-minute record, a few gateway heartbeats.
        cursor.execute(
            "INSERT INTO delivery_pushminute (minute, accepted, not_reached) SELECT date_trunc('minute',"
            " now()) - m * interval '1 minute', 9000 + m, m % 7 FROM generate_series(0, 59) AS m"
            " ON CONFLICT DO NOTHING"
        )
        cursor.execute(
            "INSERT INTO delivery_gatewayheartbeat (name, seen_at) SELECT 'bench-status-' || g, now() - g *"
            " interval '1 hour' FROM generate_series(1, 20) AS g ON CONFLICT (name) DO NOTHING"
        )
        cursor.execute("VACUUM ANALYZE reminders_occurrence")


def _time(label: str, fn: object, reps: int) -> dict[str, float]:
    timings = []
    for rep in range(reps + 1):
        started = time.perf_counter()
        fn()  # type: ignore[operator]
        if rep:  # the first warms the caches
            timings.append((time.perf_counter() - started) * 1000)
    result = {"median_ms": statistics.median(timings), "max_ms": max(timings)}
    print(f"{label}: median {result['median_ms']:.1f} ms, max {result['max_ms']:.1f} ms over {reps} runs")
    return result


def _orm_sql(queryset: Any) -> tuple[str, list[Any]]:
    sql, params = queryset.query.sql_with_params()
    return sql, list(params)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.status", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--clean", action="store_true", help="delete the bench rows and exit")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.utils import timezone

    from delivery.models import GatewayHeartbeat, PushMinute
    from reminders.ops.figures import engine_status, status_queries
    from trainings.admin.status_page import gateway_liveness, push_queue_depth, pushes_per_minute

    if connection.vendor != "postgresql":
        print("needs DATABASE_URL=postgres://... (a scratch database)", file=sys.stderr)
        return 2
    if args.clean:
        with connection.cursor() as cursor:
            jobs = "SELECT id FROM reminders_job WHERE key LIKE 'bench-status-%%'"
            cursor.execute(f"DELETE FROM reminders_occurrence WHERE job_id IN ({jobs})")
            cursor.execute("DELETE FROM reminders_job WHERE key LIKE 'bench-status-%%'")
        return 0
    _fill(args.rows)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM reminders_occurrence")
        (total,) = cursor.fetchone()
    print(f"occurrences in the table: {total}")
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    user, _ = get_user_model().objects.get_or_create(
        username="bench-status", defaults={"is_staff": True, "is_superuser": True}
    )
    client = Client()
    client.force_login(user)
    engine = _time("engine_status()", engine_status, args.reps)
    status = engine_status()
    parts = {
        "push_queue_depth()": _time("push_queue_depth() (a broker round trip)", push_queue_depth, args.reps),
        "gateway_liveness()": _time("gateway_liveness()", gateway_liveness, args.reps),
        "pushes_per_minute()": _time(
            "pushes_per_minute()", lambda: pushes_per_minute(status.per_minute), args.reps
        ),
    }
    page = _time("GET /admin/status/", lambda: client.get("/admin/status/"), args.reps)
    print(
        f"retrying={[(g.error, g.count) for g in status.retrying]}\n"
        f"due={status.due} in_flight={status.in_flight} oldest={status.oldest_due_at} "
        f"lateness={status.lateness} failures={[(g.error, g.count) for g in status.failures]}"
    )
    out = [
        f"# EXPLAIN (ANALYZE, BUFFERS) of the status page's statements, {total} occurrences "
        f"({timezone.now():%Y-%m-%d %H:%M} UTC)",
        f"# engine_status(): median {engine['median_ms']:.1f} ms; GET /admin/status/: median "
        f"{page['median_ms']:.1f} ms, max {page['max_ms']:.1f} ms (target < {TARGET_MS:.0f} ms)",
        "# " + "; ".join(f"{name}: median {t['median_ms']:.1f} ms" for name, t in parts.items()),
        f"# retrying: {sum(g.count for g in status.retrying)} in {len(status.retrying)} groups (of a sample)",
    ]
    with connection.cursor() as cursor:
        queries: dict[str, tuple[str, Any]] = {
            **status_queries(now=timezone.now()),
            # trainings/admin/status_page.py: the gateway's last delivery, on the primary key.
            "gateway_last": ("SELECT recorded_at FROM delivery_pushsend ORDER BY id DESC LIMIT 1", {}),
            # trainings/admin/status_page.py, written out by the ORM: the newest gateway heartbeat (its
            # index's first entry) and the hour of pushes per minute (primary key range).
            "gateway_heartbeat": _orm_sql(
                GatewayHeartbeat.objects.order_by("-seen_at").values_list("name", "seen_at")[:1]
            ),
            "push_minutes": _orm_sql(
                PushMinute.objects.filter(
                    minute__gte=status.per_minute[0].minute, minute__lte=status.per_minute[-1].minute
                )
            ),
        }
        for name, (sql, params) in queries.items():
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
            out += ["", f"## {name}", *(row[0] for row in cursor.fetchall())]
    path = Path(__file__).with_name("status_explain.txt")
    path.write_text("\n".join(out) + "\n")
    print(f"wrote {path}")
    return 0 if page["median_ms"] < TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
