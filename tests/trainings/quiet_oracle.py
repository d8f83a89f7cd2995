"""An independent oracle for quiet hours: minute by minute, read the wall clock and keep, per night, the
first and last minute it shows a time inside the window. The window of a night is from the first such
minute to one minute after the last (every zone here changes its clocks on a whole minute)."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

MINUTE = dt.timedelta(minutes=1)


def transitions(zone: ZoneInfo, year: int) -> list[dt.datetime]:
    """The instants (UTC) at which `zone` changes its offset in `year`."""
    found = []
    at = dt.datetime(year, 1, 1, tzinfo=dt.UTC)
    end = dt.datetime(year + 1, 1, 1, tzinfo=dt.UTC)
    step = dt.timedelta(hours=6)
    while at < end:
        if at.astimezone(zone).utcoffset() != (at + step).astimezone(zone).utcoffset():
            low, high = 0, int(step / MINUTE)  # minutes after `at`
            while high - low > 1:
                middle = (low + high) // 2
                if (at + middle * MINUTE).astimezone(zone).utcoffset() == at.astimezone(zone).utcoffset():
                    low = middle
                else:
                    high = middle
            found.append(at + high * MINUTE)
        at += step
    return found


def night_of(wall: dt.datetime, start: dt.time, end: dt.time) -> dt.date | None:
    """The local date the window holding this wall time began on, or None when outside by the clock."""
    clock = wall.time()
    if start == end:
        return None
    if start < end:
        return wall.date() if start <= clock < end else None
    if clock >= start:
        return wall.date()
    if clock < end:
        return wall.date() - dt.timedelta(days=1)
    return None


def windows(
    start: dt.time, end: dt.time, zone: ZoneInfo, since: dt.datetime, until: dt.datetime
) -> dict[dt.date, tuple[dt.datetime, dt.datetime]]:
    """Every night's window met between `since` and `until` (UTC, whole minutes) as [first, last + 1 min)."""
    found: dict[dt.date, tuple[dt.datetime, dt.datetime]] = {}
    at = since
    while at < until:
        night = night_of(at.astimezone(zone).replace(tzinfo=None), start, end)
        if night is not None:
            first, _ = found.get(night, (at, at))
            found[night] = (first, at + MINUTE)
        at += MINUTE
    return found


def release(
    instant: dt.datetime, found: dict[dt.date, tuple[dt.datetime, dt.datetime]]
) -> dt.datetime | None:
    """The first moment at or after `instant` outside every window of the oracle's, or None when
    `instant` is outside them all."""
    ends = [end for first, end in found.values() if first <= instant < end]
    if not ends:
        return None
    later = max(ends)
    return release(later, found) or later
