"""The limits' counters: one row per limit and caller in the service's own database, one upsert a request.

A limit is a rate, "<n>/<s|m|h|d>", counted per (scope, ident): the scope names the limit (`ip`, `token`,
`link`, `ready`), the ident whom it counts (an address, or a digest of a token or a link: a credential is
never stored as it is). Each is a row of `RequestCount`, and a request is counted under all its limits
(an answer link's address and link) by one statement (`queries.REQUEST_COUNT`): atomic, so concurrent
requests in every process on every host share one exact
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

from common.prepared import prepared_all
from reminders import queries
from reminders.engine.dialect import prepares

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
class Limit:
    """One limit a request is counted under: its scope, whom it counts (`ident`) and its rate."""

    scope: str
    ident: str
    rate: str


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
    return requests_count([Limit(scope, ident, rate)])


def requests_count(limits: list[Limit]) -> Refused | None:
    """Count one request under each of `limits` (one statement for all, e.g. an address's and a link's);
    None if it is within every one, else the refusal that waits longest. A limit already reached is not
    counted; the others are, as each of DRF's throttles counts a request another one refuses."""
    now_ms = int(time.time() * 1000)
    ordered = sorted(limits, key=lambda limit: limit.scope)  # one lock order for every statement
    params: list[Any] = []
    ceilings: dict[str, tuple[int, int]] = {}
    for limit in ordered:
        ceiling, period = parse_rate(limit.rate)
        ident = limit.ident if len(limit.ident) <= _IDENT_MAX else digest(limit.ident)
        params += [limit.scope, ident, now_ms, now_ms + period * 1000, ceiling]
        ceilings[limit.scope] = (ceiling, period)
    counted = {scope: (hits, expires) for scope, hits, expires in _run(_statement(len(ordered)), params)}
    refusals = []
    for limit in ordered:
        ceiling, period = ceilings[limit.scope]
        hits, expires = counted.get(limit.scope, (None, None))
        if hits is not None and hits <= ceiling:
            continue
        if expires is None:  # refused without a write: its window's end is read
            ident = limit.ident if len(limit.ident) <= _IDENT_MAX else digest(limit.ident)
            found = _run(queries.REQUEST_COUNT_EXPIRES, [limit.scope, ident])
            expires = found[0][0] if found else now_ms + period * 1000
        refusals.append(Refused(limit.scope, max(expires - now_ms, 0) / 1000))
    return max(refusals, key=lambda refused: refused.wait, default=None)


@lru_cache(maxsize=8)
def _statement(rows: int) -> str:
    return queries.REQUEST_COUNT.format(values=", ".join([queries.REQUEST_COUNT_ROW] * rows))


def _run(sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    """One statement's rows: prepared on PostgreSQL (a count runs on every limited request), through
    Django's cursor elsewhere."""
    if prepares():
        return prepared_all(connection, sql, params)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [tuple(row) for row in cursor.fetchall()]


def request_counts_purge() -> int:
    """Delete the rows whose window has ended (the hourly purge); how many."""
    with connection.cursor() as cursor:
        cursor.execute(queries.REQUEST_COUNTS_PURGE, {"now": int(time.time() * 1000)})
        return max(cursor.rowcount, 0)
