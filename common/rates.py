"""Rates shared by every process on every host through the database: a quota of so many a minute per key
(a push provider's project), handed out second by second, and a pause its provider asked for.

Each second (Unix time) of a minute gets its share of the minute's quota (`allowance`), so the seconds of any
minute add up to the quota exactly and the sends are spread over the minute rather than spent in its first
seconds. A process takes a part of the current second's share on the key's row (`DatabaseRates.take`: a read
and a compare-and-set write): the row is rewritten in place, a new second resets it, and what a second leaves
unused is not carried over. The processes' clocks are the hosts' own (keep them synchronized, as NTP does).

`LocalRates` is the same within one process, for callers inside a test's transaction (another thread's
connection would not see it) and for a single gateway without a database to share.
"""

from __future__ import annotations

import threading
from typing import Protocol

from common.models import SharedRate

__all__ = ["DatabaseRates", "LocalRates", "Rates", "allowance"]


def allowance(per_minute: int, second: int) -> int:
    """The share of second `second` (Unix time) in a quota of `per_minute`: the 60 seconds of a minute add
    up to it exactly."""
    k = second % 60
    return (k + 1) * per_minute // 60 - k * per_minute // 60


def _grant(
    slot: int, used: int, paused_until: float, share: int, want: int, now: float
) -> tuple[int, float, int]:
    """One take on a key's (slot, used, paused_until): (granted, seconds to wait when none was, what the
    current second had used before it)."""
    second = int(now)
    if paused_until > now:
        return 0, paused_until - now, 0
    if slot > second:  # another host's clock is ahead: its next second, then
        return 0, max(slot + 1 - now, 0.001), 0
    taken = used if slot == second else 0
    granted = min(want, share - taken)
    if granted <= 0:
        return 0, max(second + 1 - now, 0.001), taken
    return granted, 0.0, taken


class Rates(Protocol):
    threaded: bool  # take() blocks on the database: call it off the event loop

    def take(self, key: str, per_minute: int, want: int, now: float) -> tuple[int, float]:
        """Up to `want` of the current second's share of `key`: (granted, seconds to wait when none was)."""
        ...

    def pause(self, key: str, until: float) -> None:
        """Nothing more of `key` until `until` (Unix time) for anyone."""
        ...


class DatabaseRates:
    """The shared rates on the default database, without a transaction: a take reads the key's row and
    writes it back only if no other process wrote it meanwhile (compare and set on its second and count),
    so it is atomic on PostgreSQL and SQLite alike. Call it from a thread of its own, outside any
    transaction."""

    threaded = True

    def __init__(self) -> None:
        self._known: set[str] = set()  # keys whose row exists

    def take(self, key: str, per_minute: int, want: int, now: float) -> tuple[int, float]:
        second = int(now)
        share = allowance(per_minute, second)
        if key not in self._known:
            SharedRate.objects.bulk_create([SharedRate(key=key)], ignore_conflicts=True)
            self._known.add(key)
        rows = SharedRate.objects.filter(key=key)
        for _ in range(10):  # another process took in between: read again
            slot, used, paused_until = rows.values_list("slot", "used", "paused_until").get()
            granted, wait, taken = _grant(slot, int(used), paused_until, share, want, now)
            if not granted:
                return 0, wait
            if rows.filter(slot=slot, used=used, paused_until__lte=now).update(
                slot=int(now), used=taken + granted
            ):
                return granted, 0.0
        return 0, 0.005

    def pause(self, key: str, until: float) -> None:
        SharedRate.objects.filter(key=key, paused_until__lt=until).update(paused_until=until)


class LocalRates:
    """The same rates within this process only (every instance shares them)."""

    threaded = False
    _lock = threading.Lock()
    _rows: dict[str, list[float]] = {}  # key -> [slot, used, paused_until]

    def take(self, key: str, per_minute: int, want: int, now: float) -> tuple[int, float]:
        second = int(now)
        with self._lock:
            row = self._rows.setdefault(key, [0, 0, 0.0])  # slot, used, paused_until
            granted, wait, taken = _grant(int(row[0]), int(row[1]), row[2], allowance(per_minute, second),
                                          want, now)  # fmt: skip
            if granted:
                row[0], row[1] = second, taken + granted
            return granted, wait

    def pause(self, key: str, until: float) -> None:
        with self._lock:
            row = self._rows.setdefault(key, [0, 0, 0.0])
            row[2] = max(row[2], until)
