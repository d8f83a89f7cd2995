"""The reminders app's raw SQL statements, one named constant per purpose with the comment above it
saying what it does (procrastinate keeps its `sql/queries.sql` the same way); the ORM does the rest.

The engine's statements come first (the bulk insert, the timer's re-read, schedule heads; the claim and
the idempotent insert, which move a status, are their owner's, reminders/engine/occurrences.py), then the
operator's (status figures, scan record, metric gauges), then the one-liners (ping, clock, wake-up), then
the API's (a user's permissions, a token with its user: read on every authenticated request), then the
limits' counters (one upsert per request and limit, on PostgreSQL and SQLite alike). The
per-priority walk over due rows is written once (`due_ranges`, and `due_scopes` for every throttle
scope). Table names come from the models and bounds are constants; every value is a bound parameter.
tests/test_sql_homes.py fails when another module of the app executes SQL text of its own.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from rest_framework.authtoken.models import Token

from reminders.models import (
    PRIORITY_MAX,
    PRIORITY_MIN,
    Job,
    Occurrence,
    RequestCount,
    ScanMinute,
    Schedule,
    ThrottlePolicy,
)

OCCURRENCE_TABLE = Occurrence._meta.db_table
SCHEDULE_TABLE = Schedule._meta.db_table
JOB_TABLE = Job._meta.db_table
THROTTLE_TABLE = ThrottlePolicy._meta.db_table
SCAN_TABLE = ScanMinute._meta.db_table
COUNT_TABLE = RequestCount._meta.db_table


def due_ranges(
    select: str, *, scope: str, until: str, limit: str, alias: str = "d", lock: bool = False
) -> str:
    """The per-priority walk every reader of due rows shares: one index range per priority level, highest
    first, each stopping at `until` and at `limit` rows, as `generate_series(...) AS p(level) CROSS JOIN
    LATERAL (...) AS <alias>`. `scope` is the throttle condition (it picks occurrence_due_idx or
    occurrence_throttled_due_idx); `lock` adds SKIP LOCKED inside each level (the claim). A plain range on
    next_attempt_at would walk every scheduled row, future ones included."""
    skip_locked = "\n                FOR UPDATE SKIP LOCKED" if lock else ""
    return f"""generate_series({PRIORITY_MAX}, {PRIORITY_MIN}, -1) AS p(level)
          CROSS JOIN LATERAL (
             SELECT {select} FROM {OCCURRENCE_TABLE}
              WHERE status = 'scheduled' AND {scope} AND priority = p.level AND next_attempt_at <= {until}
              ORDER BY next_attempt_at
              LIMIT {limit}{skip_locked}
          ) AS {alias}"""  # noqa: S608 - constants and placeholders; every value is a bound parameter


def due_scopes(select: str, *, until: str, limit: str) -> str:
    """`due_ranges` over every throttle scope, as the claims walk them: unthrottled rows
    (occurrence_due_idx), then each throttle policy's (occurrence_throttled_due_idx), as
    `(SELECT false AS throttled, d.* ...) UNION ALL (SELECT true, d.* ...)`."""
    unthrottled = due_ranges(select, scope="throttle_id IS NULL", until=until, limit=limit)
    throttled = due_ranges(select, scope="throttle_id = t.id", until=until, limit=limit)
    return (
        f"(SELECT false AS throttled, d.* FROM {unthrottled}) "  # noqa: S608 - constants
        f"UNION ALL (SELECT true, d.* FROM {THROTTLE_TABLE} AS t CROSS JOIN {throttled})"
    )


# Stream new scheduled rows, each with a fresh idempotency key (several times faster than INSERT batches).
COPY_COLUMNS = (
    "job_id, fire_at, next_attempt_at, priority, status, attempts, last_error, idempotency_key, job_version, "
    "batch_index, throttle_id, created_at"
)
COPY_OCCURRENCES = f"COPY {OCCURRENCE_TABLE} ({COPY_COLUMNS}) FROM STDIN"

# Held rows right before they are published (reminders/engine/timer.py): which are still claimed, by which
# lease, and each one's version beside its job's current one.
HELD_CURRENT = f"""
SELECT o.id, o.lease_token, o.job_version, j.version
  FROM {OCCURRENCE_TABLE} AS o
  JOIN {JOB_TABLE} AS j ON j.id = o.job_id
 WHERE o.id = ANY(%s) AND o.status = 'claimed'
"""  # noqa: S608 - table names are constants

# (schedule id, fire_at, version) of the rows among %s that are their schedule's current fire point; one
# array parameter rather than an IN list, which costs more for a large batch.
SCHEDULE_HEADS = f"""
SELECT DISTINCT s.id, o.fire_at, o.job_version
  FROM {OCCURRENCE_TABLE} AS o
  JOIN {SCHEDULE_TABLE} AS s ON s.job_id = o.job_id AND s.next_fire_at = o.fire_at
 WHERE o.id = ANY(%s)
"""  # noqa: S608 - table names are constants


# --- The operator's status page (reminders/ops/figures.py) ------------------------------------------------
# Every one is bounded, so the page costs the same with 5 M or 30 M rows; the comment names the index.

# Failures and retries are grouped by the first ERROR_PREFIX characters of their error.
ERROR_PREFIX = 200

# Add one scan run's totals to its minute's row (concurrent workers add, never overwrite).
SCAN_RECORD = f"""
INSERT INTO {SCAN_TABLE} (minute, scans, claimed, delivered, retried, failed, last_scan_at, last_worker)
VALUES (%s, 1, %s, %s, %s, %s, %s, %s)
ON CONFLICT (minute) DO UPDATE SET
    scans = {SCAN_TABLE}.scans + 1,
    claimed = {SCAN_TABLE}.claimed + excluded.claimed,
    delivered = {SCAN_TABLE}.delivered + excluded.delivered,
    retried = {SCAN_TABLE}.retried + excluded.retried,
    failed = {SCAN_TABLE}.failed + excluded.failed,
    last_scan_at = excluded.last_scan_at,
    last_worker = excluded.last_worker
"""  # noqa: S608 - the table name is a constant

# Due and not delivered, up to %(cap)s: one bounded range per scope and level (`due_scopes`).
DUE_COUNT = f"""
SELECT count(*) FROM ({due_scopes("1 AS one", until="%(now)s", limit="%(cap)s")} LIMIT %(cap)s) AS due
"""  # noqa: S608
# The oldest of them: the first entry of each range (same indexes), the least of those.
OLDEST_DUE = f"""
SELECT min(next_attempt_at) FROM ({due_scopes("next_attempt_at", until="%(now)s", limit="1")}) AS firsts
"""  # noqa: S608
# In flight, up to %(cap)s: occurrence_lease_idx holds exactly the claimed rows (an index-only count).
IN_FLIGHT = f"""
SELECT count(*) FROM (SELECT 1 FROM {OCCURRENCE_TABLE} WHERE status = 'claimed' LIMIT %(cap)s) AS c
"""  # noqa: S608
# Lateness p50, p99 and sample size since %(since)s: occurrence_purge_idx (finished_at, rows delivered/
# cancelled/skipped), walked backwards from now; a delivered row's finished_at is its delivered_at.
LATENESS = f"""
SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY late), percentile_cont(0.99) WITHIN GROUP (ORDER BY late),
       count(*)
  FROM (SELECT EXTRACT(EPOCH FROM (delivered_at - fire_at)) AS late FROM {OCCURRENCE_TABLE}
         WHERE status IN ('delivered', 'cancelled', 'skipped') AND status = 'delivered'
           AND finished_at >= %(since)s
         ORDER BY finished_at DESC LIMIT %(sample)s) AS s
"""  # noqa: S608
# Failures since %(since)s grouped by error: occurrence_failed_idx (finished_at, failed rows only), the
# latest %(sample)s of them.
FAILURES = f"""
SELECT substr(last_error, 1, {ERROR_PREFIX}) AS error, count(*) AS n, max(finished_at) AS last_at
  FROM (SELECT last_error, finished_at FROM {OCCURRENCE_TABLE}
         WHERE status = 'failed' AND finished_at >= %(since)s
         ORDER BY finished_at DESC LIMIT %(sample)s) AS f
 GROUP BY 1 ORDER BY n DESC, last_at DESC LIMIT %(groups)s
"""  # noqa: S608
# Retrying now, grouped by error: occurrence_retrying_idx (next_attempt_at, rows scheduled again after a
# failed attempt or an expired lease), the %(sample)s next to be tried.
RETRYING = f"""
SELECT substr(last_error, 1, {ERROR_PREFIX}) AS error, count(*) AS n, min(fire_at), min(next_attempt_at)
  FROM (SELECT last_error, fire_at, next_attempt_at FROM {OCCURRENCE_TABLE}
         WHERE status = 'scheduled' AND attempts > 0
         ORDER BY next_attempt_at LIMIT %(sample)s) AS r
 GROUP BY 1 ORDER BY n DESC, 3 LIMIT %(groups)s
"""  # noqa: S608
# The ORM's reads of the scan record, written out for EXPLAIN (bench/status.py), both on the primary key
# (minute). The minutes between %(start)s and %(end)s:
SCAN_MINUTES = f"SELECT * FROM {SCAN_TABLE} WHERE minute >= %(start)s AND minute <= %(end)s"  # noqa: S608
# The latest minute:
SCAN_LAST = f"SELECT * FROM {SCAN_TABLE} ORDER BY minute DESC LIMIT 1"  # noqa: S608

# --- Metric gauges read at scrape time (reminders/ops/db_gauges.py) ---------------------------------------

# {throttled: (due rows up to %(cap)s per range, age of the oldest)}: the first row of each range is its
# oldest, so min() is exact.
DUE_BACKLOG = f"""
WITH due AS ({due_scopes("next_attempt_at", until="now()", limit="%(cap)s")})
SELECT throttled, count(*), EXTRACT(EPOCH FROM now() - min(next_attempt_at)) FROM due GROUP BY throttled
"""  # noqa: S608 - table name and bounds are constants, the cap is a bound parameter

# --- One-liners -------------------------------------------------------------------------------------------

# The readiness check's round trip (reminders/ops/health.py).
DATABASE_PING = "SELECT 1"
# The database's own clock, not the transaction's start (reminders/engine/clock.py).
CLOCK_NOW = "SELECT clock_timestamp()"
# The channel a worker listens on for rows due within the look-ahead (reminders/engine/wakeup.py).
DUE_CHANNEL = "reminders_due"
# Wake the listening workers (sent after commit, coalesced); the channel is the parameter.
DUE_NOTIFY = "SELECT pg_notify(%s, '')"
# Listen for those wake-ups.
DUE_LISTEN = f"LISTEN {DUE_CHANNEL}"

_OWN = get_user_model()._meta.get_field("user_permissions")
_GROUPS = get_user_model()._meta.get_field("groups")
_GRANTS = Group._meta.get_field("permissions")
# Every permission a user holds, their own and their groups', as (app label, codename): one statement
# where Django's ModelBackend runs two (reminders/http/permissions_backend.py). %(user)s is the user's id.
USER_PERMISSIONS = f"""
    SELECT ct.app_label, p.codename
      FROM {Permission._meta.db_table} AS p
      JOIN {ContentType._meta.db_table} AS ct ON ct.id = p.content_type_id
     WHERE p.id IN (
           SELECT {_OWN.m2m_reverse_name()} FROM {_OWN.m2m_db_table()}
            WHERE {_OWN.m2m_column_name()} = %(user)s
            UNION ALL
           SELECT g.{_GRANTS.m2m_reverse_name()}
             FROM {_GRANTS.m2m_db_table()} AS g
             JOIN {_GROUPS.m2m_db_table()} AS m
               ON m.{_GROUPS.m2m_reverse_name()} = g.{_GRANTS.m2m_column_name()}
            WHERE m.{_GROUPS.m2m_column_name()} = %(user)s)"""  # noqa: S608 - names from the models

TOKEN_FIELDS = [field.attname for field in Token._meta.concrete_fields]
USER_FIELDS = [field.attname for field in get_user_model()._meta.concrete_fields]
_TOKEN_COLUMNS = ", ".join(f't."{field.column}"' for field in Token._meta.concrete_fields)
_USER_COLUMNS = ", ".join(f'u."{field.column}"' for field in get_user_model()._meta.concrete_fields)
_TOKEN_USER = Token._meta.get_field("user")
# An API token and its user, for the API's token authentication (reminders/http/token_auth.py): the
# token's columns (TOKEN_FIELDS), then the user's (USER_FIELDS). %(key)s is the token's key.
TOKEN_WITH_USER = f"""
    SELECT {_TOKEN_COLUMNS}, {_USER_COLUMNS}
      FROM {Token._meta.db_table} AS t
      JOIN {get_user_model()._meta.db_table} AS u
        ON u."{_TOKEN_USER.target_field.column}" = t."{_TOKEN_USER.column}"
     WHERE t."{Token._meta.pk.column}" = %(key)s"""  # noqa: S608 - names from the models

# --- The limits' counters (reminders/http/counts.py): the same statements on PostgreSQL and SQLite -------

# Count one request under each of its limits, one REQUEST_COUNT_ROW per limit in `{values}` (scope,
# ident, now, the window's end were one to start now, the limit; all unix milliseconds), and return
# (scope, hits, window end) of each limit it is within: the first request, or the first after its window
# ended, starts a window of hits 1; a request in the window adds 1 only while the hits are under the
# limit, so a limit already reached returns no row and writes nothing. One statement: concurrent counts of
# one key queue on its row (the upsert's conflict), so none is lost, in every process on every host; the
# rows come in scope order, so two statements lock shared rows in one order.
REQUEST_COUNT = f"""
    INSERT INTO {COUNT_TABLE} AS c (scope, ident, window_start, expires, ceiling, hits)
    VALUES {{values}}
    ON CONFLICT (scope, ident) DO UPDATE SET
        hits = CASE WHEN c.expires <= excluded.window_start THEN 1 ELSE c.hits + 1 END,
        window_start = CASE WHEN c.expires <= excluded.window_start
                            THEN excluded.window_start ELSE c.window_start END,
        expires = CASE WHEN c.expires <= excluded.window_start THEN excluded.expires ELSE c.expires END,
        ceiling = excluded.ceiling
    WHERE c.expires <= excluded.window_start OR c.hits < excluded.ceiling
    RETURNING scope, hits, expires"""  # noqa: S608 - the table's name from the model; values are bound
REQUEST_COUNT_ROW = "(%s, %s, %s, %s, %s, 1)"
# The end of a refused request's window (its Retry-After), by the primary key (scope, ident).
REQUEST_COUNT_EXPIRES = f"SELECT expires FROM {COUNT_TABLE} WHERE scope = %s AND ident = %s"  # noqa: S608
# Delete the windows that ended before %(now)s (requestcount_expires_idx).
REQUEST_COUNTS_PURGE = f"DELETE FROM {COUNT_TABLE} WHERE expires < %(now)s"  # noqa: S608
