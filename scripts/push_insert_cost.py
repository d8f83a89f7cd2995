"""What inserting a fired reminder's push rows costs, in the worker and in PostgreSQL: the one JSON array
parameter the worker sends (trainings/queries.py, `pushes_insert_json`) against UNNEST of one typed array
per column, and the JSON form without `guardian_id`'s index. 1,000 rows a statement into a scratch copy of
`trainings_push` (its indexes, not its foreign keys), the forms alternated, medians of the rounds;
docs/benchmarks.md has the figures.

    DATABASE_URL=postgres://... python scripts/push_insert_cost.py

The database must be migrated (`manage.py migrate`); the scratch tables are dropped at the end.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django

django.setup()

from django.db import connection  # noqa: E402

ROWS, ROUNDS = 1000, 16
COLUMNS = (("key", "varchar(300)"), ("occurrence_key", "varchar(255)"), ("occurrence_id", "bigint"),
           ("training_id", "uuid"), ("player_id", "bigint"), ("guardian_id", "bigint"), ("rule_id", "bigint"),
           ("kind", "varchar(10)"), ("offset", "varchar(10)"), ("language", "varchar(10)"),
           ("title", "varchar(300)"), ("body", "text"), ("fire_at", "timestamptz"),
           ("expires_at", "timestamptz"), ("status", "varchar(10)"), ("release_at", "timestamptz"),
           ("status_reason", "varchar(200)"))  # fmt: skip
NAMES = ", ".join(f'"{name}"' for name, _ in COLUMNS)
STATUS = next(i for i, (name, _) in enumerate(COLUMNS) if name == "status")


def _json_sql(table: str) -> str:
    picks = ", ".join(f"(r->>{i})::{kind}" for i, (_, kind) in enumerate(COLUMNS))
    return (
        f"INSERT INTO {table} ({NAMES}, created_at, sent_at) SELECT {picks}, %s, "  # noqa: S608
        f"CASE WHEN r->>{STATUS} = 'sent' THEN %s::timestamptz END "
        "FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS t(r, n) ORDER BY n "
        "ON CONFLICT DO NOTHING RETURNING key, id"
    )


def _unnest_sql(table: str) -> str:
    arrays = ", ".join(f"%s::{kind.split('(')[0]}[]" for _, kind in COLUMNS)
    picks = ", ".join(f'u."{name}"' for name, _ in COLUMNS)
    return (
        f"INSERT INTO {table} ({NAMES}, created_at, sent_at) SELECT {picks}, %s, "  # noqa: S608
        "CASE WHEN u.status = 'sent' THEN %s::timestamptz END "
        f"FROM unnest({arrays}) WITH ORDINALITY AS u({NAMES}, n) ORDER BY n "
        "ON CONFLICT DO NOTHING RETURNING key, id"
    )


def _rows(tag: str, now: dt.datetime) -> list[list[Any]]:
    training = str(uuid.uuid4())
    fire, expires = now.isoformat(), (now + dt.timedelta(hours=1)).isoformat()
    return [[f"{tag}-{i // 20}:{i}", f"{tag}-{i // 20}", i // 20, training, 100_000 + i, None, 7, "pre",
             "PT90M", "en", "Training reminder", "Your training starts at 18:00: answer the questionnaire",
             fire, expires, "sent", None, ""] for i in range(ROWS)]  # fmt: skip


def main() -> None:
    now = dt.datetime.now(dt.UTC)
    forms = {
        "json": "scratch_push_all",
        "unnest": "scratch_push_all",
        "json, no guardian_id index": "scratch_push_less",
    }
    cpu: dict[str, list[float]] = {form: [] for form in forms}
    wall: dict[str, list[float]] = {form: [] for form in forms}
    with connection.cursor() as cursor:
        for table in set(forms.values()):
            cursor.execute(f"DROP TABLE IF EXISTS {table}")
            cursor.execute(f"CREATE TABLE {table} (LIKE trainings_push INCLUDING ALL)")
        cursor.execute("DROP INDEX scratch_push_less_guardian_id_idx")
        try:
            for n in range(ROUNDS):
                for form, table in forms.items():
                    rows = _rows(f"r{n}", now)
                    cursor.execute(f"TRUNCATE {table}")
                    began, began_cpu = time.perf_counter(), time.process_time()
                    if form == "unnest":
                        cursor.execute(_unnest_sql(table), [now, now, *map(list, zip(*rows, strict=True))])
                    else:
                        cursor.execute(_json_sql(table), [now, now, json.dumps(rows, separators=(",", ":"))])
                    assert len(cursor.fetchall()) == ROWS
                    wall[form].append((time.perf_counter() - began) * 1000)
                    cpu[form].append((time.process_time() - began_cpu) * 1000)
        finally:
            for table in set(forms.values()):
                cursor.execute(f"DROP TABLE IF EXISTS {table}")
    print(f"{ROWS:,} rows a statement, {ROUNDS} alternated rounds (the first two left out), medians:")
    print(f"{'form':28} {'statement ms':>13} {'client CPU ms':>14} {'server ms (the rest)':>21}")
    for form in forms:
        w, c = statistics.median(wall[form][2:]), statistics.median(cpu[form][2:])
        print(f"{form:28} {w:13.2f} {c:14.2f} {w - c:21.2f}")


if __name__ == "__main__":
    main()
