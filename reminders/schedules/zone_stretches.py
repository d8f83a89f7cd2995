"""A time zone cut into stretches of constant UTC offset, so a crontab can be read in wall time.

`stretch_at(zone, instant)` answers which offset holds and where it changes; reminders.schedules.cron walks
a cron
line through them one stretch at a time (see `CronTimeline`).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

TICK = timedelta(microseconds=1)
EARLIEST, LATEST = datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Stretch:
    """[start, end) in UTC during which the zone keeps one UTC offset; `offset_before` is the one in
    force just before `start` (equal to `offset` where a stretch only begins at a new year)."""

    start: datetime
    end: datetime
    offset: timedelta
    offset_before: timedelta


def wall_time(instant: datetime, offset: timedelta) -> datetime:
    """The naive wall-clock time of the UTC `instant` under `offset`."""
    return (instant + offset).replace(tzinfo=None)


def _offset(zone: ZoneInfo, instant: datetime) -> timedelta:
    offset = instant.astimezone(zone).utcoffset()
    assert offset is not None
    return offset


def stretch_at(zone: ZoneInfo, instant: datetime) -> Stretch:
    """The stretch of constant offset that holds `instant` (cut at each new year, see `_boundaries`)."""
    bounds = _boundaries(zone, instant.year)
    index = bisect_right(bounds, instant) - 1
    start = bounds[index]
    end = bounds[index + 1] if index + 1 < len(bounds) else _new_year(instant.year + 1)
    before = _offset(zone, start - TICK) if start > EARLIEST else _offset(zone, start)
    return Stretch(start, end, _offset(zone, start), before)


def _new_year(year: int) -> datetime:
    """New Year's instant in UTC; past year 9999, the last instant a datetime holds."""
    return datetime(year, 1, 1, tzinfo=UTC) if year <= datetime.max.year else LATEST


@lru_cache(maxsize=1024)
def _boundaries(zone: ZoneInfo, year: int) -> tuple[datetime, ...]:
    """New Year (UTC) and every instant in `year` at which the zone's UTC offset changes, in order.

    Found hour by hour, then to the second by bisection (tzdata changes fall on whole seconds and are
    never less than an hour apart); cached, since the search is slow next to a lookup."""
    year_start, next_year = _new_year(year), _new_year(year + 1)
    # A zone's wall time on the last day of year 9999 may not fit in a datetime: stop a day short there.
    scan_end = next_year if next_year < LATEST else next_year - timedelta(days=1)
    found = [year_start]
    hour = timedelta(hours=1)
    previous, moment = _offset(zone, year_start), year_start
    while moment < scan_end:
        earlier, moment = moment, (moment + hour if scan_end - moment > hour else scan_end)
        offset = _offset(zone, moment)
        if offset != previous:
            low, high = int(earlier.timestamp()), int(moment.timestamp())
            while high - low > 1:
                middle = (low + high) // 2
                if _offset(zone, datetime.fromtimestamp(middle, UTC)) == offset:
                    high = middle
                else:
                    low = middle
            if high < next_year.timestamp():
                found.append(datetime.fromtimestamp(high, UTC))
            previous = offset
    return tuple(found)
