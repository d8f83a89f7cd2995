"""Rates shared by every process on every host through the database: a quota of so many a minute per key
(a push provider's project), handed out second by second, and a pause its provider asked for.

Each second (Unix time) of a minute gets its share of the minute's quota (`allowance`), so the seconds of
any minute add up to the quota exactly and the sends are spread over the minute rather than spent in its
first seconds. A process takes a part of the current second's share in one statement on the key's row
(`DatabaseRates.take`): the row is rewritten in place, a new second resets it, and what a second leaves
unused is not carried over. The processes' clocks are the hosts' own (keep them synchronized, as NTP does).

`LocalRates` is the same within one process, for callers inside a test's transaction (another thread's
connection would not see it) and for a single gateway without a database to share.
"""

from __future__ import annotations

import threading
from typing import Protocol

from django.db import connection

from common.models import SharedRate

__all__ = ["DatabaseRates", "LocalRates", "Rates", "allowance"]


def allowance(per_minute: int, second: int) -> int:
    """The share of second `second` (Unix time) in a quota of `per_minute`: the 60 seconds of a minute add
    up to it exactly."""
    k = second % 60
    return (k + 1) * per_minute // 60 - k * per_minute // 60


class Rates(Protocol):
    threaded: bool  # take() blocks on the database: call it off the event loop

    def take(self, key: str, per_minute: int, want: int, now: float) -> tuple[int, float]:
        """Up to `want` of the current second's share of `key`: (granted, seconds to wait when none was)."""
        ...

    def pause(self, key: str, until: float) -> None:
        """Nothing more of `key` until `until` (Unix time) for anyone."""
        ...


# One statement per take: the share left in this second (all of it in a new second), at most `want`;
# `granted` keeps what this take got, since RETURNING sees only the new row. Nothing while paused, or
# when another process's clock already moved the row to a later second.
_TAKE = """
UPDATE common_sharedrate SET
    granted = CASE WHEN slot = %s THEN (CASE WHEN %s - used < %s THEN %s - used ELSE %s END)
                   ELSE (CASE WHEN %s < %s THEN %s ELSE %s END) END,
    used = CASE WHEN slot = %s THEN used + (CASE WHEN %s - used < %s THEN %s - used ELSE %s END)
                ELSE (CASE WHEN %s < %s THEN %s ELSE %s END) END,
    slot = %s
 WHERE key = %s AND paused_until <= %s AND (slot < %s OR (slot = %s AND used < %s))
RETURNING granted
"""
_STATE = "SELECT slot, paused_until FROM common_sharedrate WHERE key = %s"
_PAUSE = """
UPDATE common_sharedrate SET paused_until = CASE WHEN paused_until < %s THEN %s ELSE paused_until END
 WHERE key = %s
"""


class DatabaseRates:
    """The shared rates on the default database, each statement committed on its own (autocommit): call
    it from a thread of its own, outside any transaction."""

    threaded = True

    def __init__(self) -> None:
        self._known: set[str] = set()  # keys whose row exists

    def take(self, key: str, per_minute: int, want: int, now: float) -> tuple[int, float]:
        second = int(now)
        share = allowance(per_minute, second)
        if key not in self._known:
            SharedRate.objects.bulk_create([SharedRate(key=key)], ignore_conflicts=True)
            self._known.add(key)
        s, a, w = second, share, want
        params: list[int | float | str] = [
            s,
            a,
            w,
            a,
            w,
            a,
            w,
            a,
            w,
            s,
            a,
            w,
            a,
            w,
            a,
            w,
            a,
            w,
            s,
            key,
            now,
            s,
            s,
            a,
        ]
        with connection.cursor() as cursor:
            cursor.execute(_TAKE, params)
            row = cursor.fetchone()
            if row is not None and row[0] > 0:
                return int(row[0]), 0.0
            cursor.execute(_STATE, [key])
            state = cursor.fetchone()
        slot, paused_until = (state[0], state[1]) if state else (second, 0.0)
        if paused_until > now:
            return 0, paused_until - now
        return 0, max(slot + 1 - now, 0.001)  # the next second's share

    def pause(self, key: str, until: float) -> None:
        with connection.cursor() as cursor:
            cursor.execute(_PAUSE, [until, until, key])


class LocalRates:
    """The same rates within this process only."""

    threaded = False

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[str, list[float]] = {}  # key -> [slot, used, paused_until]

    def take(self, key: str, per_minute: int, want: int, now: float) -> tuple[int, float]:
        second = int(now)
        with self._lock:
            row = self._rows.setdefault(key, [0, 0, 0.0])
            if row[2] > now:
                return 0, row[2] - now
            if row[0] != second:
                row[0], row[1] = second, 0
            granted = min(want, allowance(per_minute, second) - int(row[1]))
            if granted <= 0:
                return 0, max(second + 1 - now, 0.001)
            row[1] += granted
            return granted, 0.0

    def pause(self, key: str, until: float) -> None:
        with self._lock:
            row = self._rows.setdefault(key, [0, 0, 0.0])
            row[2] = max(row[2], until)
