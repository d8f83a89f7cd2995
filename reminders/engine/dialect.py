"""The one place the reminders app asks which database it runs on, and what SQLite does instead.

PostgreSQL serves production, CI and the benchmark: several hosts, concurrent workers. SQLite is the
embedded default: one host, one writer at a time. Where the difference is one Django describes (row locks
a concurrent claimer skips: the claim, reminders/engine/occurrences.py), the caller asks
`connection.features`; each facility below is PostgreSQL's own, named for what it gives, with its SQLite
twin said beside it, so a caller's branch reads as the facility it needs.
"""

from __future__ import annotations

from datetime import datetime

from django.db import connection
from django.utils import timezone

from reminders import queries


def _postgresql() -> bool:
    return connection.vendor == "postgresql"


def database_now() -> datetime:
    """The database's clock: `clock_timestamp()`, not `now()`, which inside a transaction stands still at
    its start. SQLite serves one host by definition: there the database's clock is the local clock."""
    if not _postgresql():
        return timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(queries.CLOCK_NOW)
        (at,) = cursor.fetchone()
    return at


def wakes_on_notify() -> bool:
    """LISTEN/NOTIFY (reminders/engine/wakeup.py): a write wakes a waiting scan, so a scan may claim ahead
    and wait for instants (reminders/engine/lookahead.py). SQLite has no channel to wait on: it polls and
    holds nothing ahead."""
    return _postgresql()


def streams_copy() -> bool:
    """COPY ... FROM STDIN through psycopg's cursor: the bulk insert streams its rows. SQLite: the ORM's
    `bulk_create`."""
    return _postgresql()


def speaks_postgresql() -> bool:
    """The reads reminders/queries.py writes in PostgreSQL's SQL: one index range per priority level
    (`generate_series` and `LATERAL`), array parameters (`= ANY(%s)`), `EXTRACT(EPOCH ...)`,
    `percentile_cont`. Their callers (the status page, the metric gauges, the schedule heads) keep the
    ORM's twin beside each for SQLite, whose tables are small (development, one process)."""
    return _postgresql()
