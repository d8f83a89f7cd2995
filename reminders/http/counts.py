"""The limits' counters: one row per limit and caller in the service's own database, one upsert a request.

A limit is a rate, "<n>/<s|m|h|d>", counted per (scope, ident): the scope names the limit (`ip`, `token`,
`link`, `ready`), the ident whom it counts (an address, or a digest of a token or a link: a credential is
never stored as it is). Each is a row of `RequestCount`, and a request is counted by one statement
(`queries.REQUEST_COUNT`): atomic, so concurrent requests in every process on every host share one exact
count, and a row per key, so no one's count can be pushed out by junk (there is no capacity to fill, as a
cache has). The caller decides what is worth a row: a link is counted only once its signature holds, so
forged tokens fall under the per-address limit alone.

Windows are fixed and start with a caller's first request (the first after its last window ended), by
the clock of the host that counts it (hosts keep theirs in step with NTP): at most n requests from then
until a period later, and a refused request waits for that end (Retry-After). Started per caller, windows
do not all turn at once on the minute, and a burst is never split by a turn it did not cause. A caller's
next window reuses its row; rows whose window ended are deleted by the hourly purge task
(`request_counts_purge`, beat's "reminders: purge old occurrences"), not by a request: the table holds
about the callers of the last hour, and no request pays for the clean-up.

On PostgreSQL the table is UNLOGGED (its migration): a count writes no WAL and commits without waiting
for a disk flush; a crash of PostgreSQL, or a failover to a standby, empties it, which starts every window
afresh: the one thing a limit may lose.
"""

from __future__ import annotations

import hashlib
import math
import re
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from common.prepared import prepared_one
from reminders import queries

_RATE = re.compile(r"^\s*(\d+)\s*/\s*(s|sec|second|m|min|minute|h|hour|d|day)\s*$")
_PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_IDENT_MAX = 64  # RequestCount.ident's max_length


@lru_cache(maxsize=64)
def parse_rate(rate: str) -> tuple[int, int]:
    """ "100/s" -> (100, 1); a malformed rate stops the process instead of silently not limiting."""
    match = _RATE.match(rate)
    if not match:
        raise ImproperlyConfigured(f"throttle rate {rate!r} is not '<n>/<s|m|h|d>'")
    return int(match.group(1)), _PERIODS[match.group(2)[0]]


def digest(credential: str) -> str:
    """What a token or a link is counted under: 128 bits of its SHA-256, never the credential itself."""
    return hashlib.sha256(credential.encode("utf-8", "surrogatepass")).hexdigest()[:32]


@dataclass(frozen=True)
class Refused:
    """A request over its limit: how long until its window ends (Retry-After, whole seconds)."""

    scope: str
    wait: float

    @property
    def retry_after(self) -> int:
        return max(1, math.ceil(self.wait))


def request_count(*, scope: str, ident: str, rate: str) -> Refused | None:
    """Count one request of `ident` under the limit `scope` at `rate`; None if it is within the limit,
    else how long it must wait. A refused request is not counted (its window is full already)."""
    limit, period = parse_rate(rate)
    now_ms = int(time.time() * 1000)
    if len(ident) > _IDENT_MAX:
        ident = digest(ident)
    params = {"scope": scope, "ident": ident, "now": now_ms, "expires": now_ms + period * 1000,
              "limit": limit}  # fmt: skip
    row = _run_one(queries.REQUEST_COUNT, params)
    if row is not None:
        hits, expires = row
        if hits <= limit:
            return None
    else:  # refused without a write: the window's end is read
        found = _run_one(queries.REQUEST_COUNT_EXPIRES, {"scope": scope, "ident": ident})
        expires = now_ms + period * 1000 if found is None else found[0]
    return Refused(scope, max(expires - now_ms, 0) / 1000)


def _run_one(sql: str, params: dict[str, Any]) -> tuple[Any, ...] | None:
    """One statement's first row: prepared on PostgreSQL (a count runs on every limited request), through
    Django's cursor elsewhere."""
    if connection.vendor == "postgresql":
        return prepared_one(connection, sql, params)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return None if row is None else tuple(row)


def request_counts_purge() -> int:
    """Delete the rows whose window has ended (the hourly purge); how many."""
    with connection.cursor() as cursor:
        cursor.execute(queries.REQUEST_COUNTS_PURGE, {"now": int(time.time() * 1000)})
        return max(cursor.rowcount, 0)
