"""The engine's raw SQL: one named statement per purpose, each completed by one builder.

The claim is assembled by `claim_statement_postgres` (reminders/engine/occurrences.py; the statement the
plan test EXPLAINs), the inserts by `occurrences_insert` and `occurrences_insert_idempotent`
(reminders/engine/inserts.py). Table names and bounds are constants; every value is a bound parameter.
"""

from __future__ import annotations

from reminders.models import PRIORITY_MAX, PRIORITY_MIN, Job, Occurrence, Schedule, ThrottlePolicy

OCCURRENCE_TABLE = Occurrence._meta.db_table
SCHEDULE_TABLE = Schedule._meta.db_table
JOB_TABLE = Job._meta.db_table
THROTTLE_TABLE = ThrottlePolicy._meta.db_table


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


# Lease up to %(limit)s due rows (scheduled -> claimed, new token, attempts + 1) and return them.
# One index range scan per priority level, highest first; each level stops at `now`, so the claim never
# touches future rows (see occurrence_due_idx). SKIP LOCKED sits inside each level so a concurrent claimer's
# locked rows are passed over rather than waited on. The outer LIMIT stops pulling (and locking) early.
# Anti-starvation (seed 003): a share of every batch (%(aged_limit)s) first goes to rows due before
# %(aged)s, oldest first whatever their priority; the rest is strict priority. `= ANY(ARRAY(...))` makes
# the id list an InitPlan, so the UPDATE finds its rows through the primary key whatever the planner
# estimates (`IN (subquery)` was planned as a hash join over a full table scan). `{scope}` is one of the
# CLAIM_SCOPE_* below. fire_at and next_attempt_at (the instant a look-ahead claim holds the row until) come
# back as exact epoch microseconds (cheaper to parse than timestamptz).
_CLAIMED = "id, priority, next_attempt_at"
_AGED_RANGES = due_ranges(
    _CLAIMED, scope="{scope}", until="%(aged)s", limit="%(aged_limit)s", alias="a", lock=True
)
CLAIM_DUE = f"""
UPDATE {OCCURRENCE_TABLE} AS o
   SET status = 'claimed', lease_token = %(token)s, claimed_until = %(until)s, attempts = o.attempts + 1
 WHERE o.id = ANY(ARRAY(
    SELECT c.id FROM (
        (SELECT a.id, 0 AS part, a.priority AS level, a.next_attempt_at AS due
           FROM {_AGED_RANGES}
          ORDER BY a.next_attempt_at
          LIMIT %(aged_limit)s)
        UNION ALL
        (SELECT d.id, 1, d.priority, d.next_attempt_at
           FROM {due_ranges(_CLAIMED, scope="{scope}", until="%(due)s", limit="%(limit)s", lock=True)}
          LIMIT %(limit)s)
    ) AS c
     GROUP BY c.id
     ORDER BY min(c.part), max(c.level) DESC, min(c.due), c.id
     LIMIT %(limit)s))
RETURNING o.id, o.job_id, (EXTRACT(EPOCH FROM o.fire_at) * 1000000)::bigint, o.attempts, o.idempotency_key,
          o.priority, (EXTRACT(EPOCH FROM o.next_attempt_at) * 1000000)::bigint
"""  # noqa: S608 - table and bounds are constants, values are bound parameters
# The generic claim takes unthrottled rows only; a throttle policy's claim takes only that policy's rows.
CLAIM_SCOPE_UNTHROTTLED = "throttle_id IS NULL"
CLAIM_SCOPE_THROTTLED = "throttle_id = %(throttle)s"

# Stream new scheduled rows, each with a fresh idempotency key (several times faster than INSERT batches).
COPY_COLUMNS = (
    "job_id, fire_at, next_attempt_at, priority, status, attempts, last_error, idempotency_key, job_version, "
    "batch_index, throttle_id, created_at"
)
COPY_OCCURRENCES = f"COPY {OCCURRENCE_TABLE} ({COPY_COLUMNS}) FROM STDIN"

# Insert a schedule's fire point under its deterministic ids: an existing id is left alone, except that
# a cancelled one is revived (cancelled -> scheduled). `{values}` is one INSERT_IDEMPOTENT_ROW per row.
INSERT_IDEMPOTENT = f"""
INSERT INTO {OCCURRENCE_TABLE} (job_id, fire_at, next_attempt_at, priority, job_version, batch_index,
                                throttle_id, idempotency_key, created_at, status, attempts, last_error)
VALUES {{values}}
ON CONFLICT (idempotency_key) DO UPDATE SET
    status = 'scheduled', next_attempt_at = excluded.next_attempt_at, priority = excluded.priority,
    job_version = excluded.job_version, throttle_id = excluded.throttle_id, attempts = 0,
    finished_at = NULL, last_error = ''
WHERE {OCCURRENCE_TABLE}.status = 'cancelled'
"""  # noqa: S608 - table names are constants, values are bound parameters
INSERT_IDEMPOTENT_ROW = "(%s, %s, %s, %s, %s, %s, %s, %s, %s, 'scheduled', 0, '')"

# Held rows right before they are published (reminders/engine/timer.py): which are still claimed, by which
# lease,
# and each one's version beside its job's current one.
HELD_CURRENT = f"""
SELECT o.id, o.lease_token, o.job_version, j.version
  FROM {OCCURRENCE_TABLE} AS o
  JOIN {JOB_TABLE} AS j ON j.id = o.job_id
 WHERE o.id = ANY(%s) AND o.status = 'claimed'
"""  # noqa: S608 - table names are constants

# (schedule id, fire_at, version) of the rows among %s that are their schedule's current fire point; one
# array parameter keeps it at milliseconds for a 20,000-row batch (an IN list costs ~10x more).
SCHEDULE_HEADS = f"""
SELECT DISTINCT s.id, o.fire_at, o.job_version
  FROM {OCCURRENCE_TABLE} AS o
  JOIN {SCHEDULE_TABLE} AS s ON s.job_id = o.job_id AND s.next_fire_at = o.fire_at
 WHERE o.id = ANY(%s)
"""  # noqa: S608 - table names are constants
