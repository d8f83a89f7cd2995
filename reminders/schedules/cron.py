"""Schedule expressions and their timelines: which instants a recurring schedule fires at (seed 001).

Forms: a 5-field crontab, a nickname (``@hourly`` … ``@yearly``), ``@every <duration>`` (exact durations
from the schedule's start, else from when it was set) and ``@at <unix seconds>``. Crontabs follow Debian
cron across DST in the schedule's zone (see `CronTimeline`); cronsim parses and matches the fields. A
timeline only answers `next_after(t)`, so the next fire comes from the previous one, never from when a
delivery happened, and it ends where years 1-9999 end.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from cronsim import CronSim, CronSimError

from reminders.schedules.zone_stretches import EARLIEST, LATEST, TICK, Stretch, stretch_at, wall_time

MIN_EVERY_SECONDS = 10
MAX_EVERY_SECONDS = 366 * 86400
NICKNAMES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
_UNIT_SECONDS = (86400, 3600, 60, 1)


class ExpressionError(ValueError):
    """The expression or the zone cannot be used; the message says why."""


class Timeline(Protocol):
    def next_after(self, instant: datetime) -> datetime | None:
        """The first fire strictly after `instant` (aware), in UTC; None when the timeline has ended."""
        ...

    def at_or_before(self, instant: datetime) -> datetime | None:
        """The latest fire not after `instant`, in UTC; None when there is none."""
        ...


@dataclass(frozen=True)
class CronTimeline:
    """A crontab in a zone, evaluated one constant-offset stretch of time at a time.

    Debian cron's DST rules: a specific time (minute and hour fields not starting with ``*``) in a skipped
    hour runs once, at the jump; in a repeated hour, once (the first copy); every other line runs on real
    time (``*/15`` fires in both copies of a repeated hour and not in a skipped one).
    Between two UTC-offset changes the zone's wall clock is a fixed shift of UTC, so cronsim on naive
    wall times is exact there. The rules for the changes themselves are applied here rather than left to
    cronsim's zone handling, which loops for ever in a repeated window that crosses an hour (Chatham
    repeats 02:45-03:45) and steps over fires after a half-hour change (Lord Howe)."""

    expression: str
    zone: ZoneInfo
    # What cronsim is given: `expression` with its one-value stepped ranges rewritten (see `_as_debian`).
    _cronsim: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_cronsim", _as_debian(self.expression))
        # Parses the fields now (CronSimError), which also refuses a day that none of the chosen months
        # has (``0 0 30 2 *``) without searching for it.
        CronSim(self._cronsim, datetime(2000, 1, 1))

    def next_after(self, instant: datetime) -> datetime | None:
        try:
            return self._next_after(instant.astimezone(UTC))
        except OverflowError:
            return None  # its wall time would be past year 9999

    def at_or_before(self, instant: datetime) -> datetime | None:
        try:
            return self._at_or_before(instant.astimezone(UTC))
        except OverflowError:
            return None  # its wall time would be before year 1

    def _next_after(self, instant: datetime) -> datetime | None:
        stretch = stretch_at(self.zone, instant)
        after = instant
        give_up = instant + _GIVE_UP if instant < LATEST - _GIVE_UP else LATEST
        while stretch.start < give_up:
            if stretch.start > instant and self._fires_at_jump(stretch):
                return stretch.start
            for wall in CronSim(self._cronsim, wall_time(after, stretch.offset)):
                fire = (wall - stretch.offset).replace(tzinfo=UTC)
                if fire >= stretch.end:
                    break
                if not self._second_copy(wall, stretch):
                    return fire
            else:
                return None  # nothing for 50 years
            if stretch.end == LATEST:
                return None
            after = stretch.end - TICK
            stretch = stretch_at(self.zone, stretch.end)
        return None

    def _at_or_before(self, instant: datetime) -> datetime | None:
        stretch = stretch_at(self.zone, instant)
        upto = instant
        give_up = instant - _GIVE_UP if instant > EARLIEST + _GIVE_UP else EARLIEST
        while stretch.end > give_up:
            # cronsim's reverse walk answers strictly before a whole-second start: one second past the
            # whole second of `upto` includes `upto` itself.
            start = wall_time(upto, stretch.offset).replace(microsecond=0) + timedelta(seconds=1)
            for wall in CronSim(self._cronsim, start, reverse=True):
                fire = (wall - stretch.offset).replace(tzinfo=UTC)
                if fire < stretch.start:
                    break
                if not self._second_copy(wall, stretch):
                    return fire
            else:
                return None
            if self._fires_at_jump(stretch):
                return stretch.start
            if stretch.start == EARLIEST:
                return None
            upto = stretch.start - TICK
            stretch = stretch_at(self.zone, upto)
        return None

    @property
    def _fixed_time(self) -> bool:
        """Debian cron's "job at a specific time" (minute and hour not starting with ``*``, as cronsim
        decides it): it runs once in a repeated hour and after a skipped one; other lines run on real
        time, in both copies of a repeated hour and not at all in a skipped one."""
        minute, hour = self.expression.split()[:2]
        return not minute.startswith("*") and not hour.startswith("*")

    def _second_copy(self, wall: datetime, stretch: Stretch) -> bool:
        """Is `wall` (read in `stretch`) a repeat of a wall time the clock showed before it fell back?"""
        return self._fixed_time and wall < wall_time(stretch.start, stretch.offset_before)

    def _fires_at_jump(self, stretch: Stretch) -> bool:
        """Does a specific-time job fall in the wall time skipped where `stretch` begins? Then it runs
        once, at the jump (``30 2 * * *`` runs at 03:00 in Paris on the spring-forward day)."""
        if not self._fixed_time or stretch.offset <= stretch.offset_before:
            return False
        skipped_from = wall_time(stretch.start, stretch.offset_before)
        first = next(CronSim(self._cronsim, skipped_from - timedelta(seconds=1)), None)
        return first is not None and first < wall_time(stretch.start, stretch.offset)


_MONTH_NAMES = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
_DAY_NAMES = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]
# Per field (minute, hour, day, month, weekday): the names it takes, and the number the first stands for.
_FIELD_NAMES: tuple[tuple[Sequence[str], int], ...] = (
    ((), 0),
    ((), 0),
    ((), 0),
    (_MONTH_NAMES, 1),
    (_DAY_NAMES, 0),
)
_STEPPED_RANGE = re.compile(r"^([0-9A-Za-z]+)-([0-9A-Za-z]+)/([0-9]+)$")


def _as_debian(expression: str) -> str:
    """`expression` with each one-value range with a step (``6-6/2``, ``MON-MON/3``) reduced to its value.

    Debian cron reads ``a-a/s`` as ``{a}``; cronsim 2.8 reads any one-item term before ``/`` as a start and
    runs it to the field's maximum (``0 0 1 6-6/2 *`` fired in June, August, October and December). Only
    terms whose two ends name the same value are touched; a zero step is left for cronsim to refuse."""
    fields = expression.split()
    if len(fields) != 5:
        return expression
    for position, (names, base) in enumerate(_FIELD_NAMES):
        terms = fields[position].split(",")
        for index, term in enumerate(terms):
            match = _STEPPED_RANGE.match(term)
            if match is None or int(match[3]) == 0:
                continue
            start, end = (_field_value(match[k], names, base) for k in (1, 2))
            if start is not None and start == end:
                terms[index] = match[1]
        fields[position] = ",".join(terms)
    return " ".join(fields)


def _field_value(token: str, names: Sequence[str], base: int) -> int | None:
    """The number a field token stands for (names count from `base`: JAN is 1, SUN is 0)."""
    if token.isdigit():
        return int(token)
    upper = token.upper()
    return names.index(upper) + base if upper in names else None


# cronsim gives up after 50 years without a match; so do the stretch walks. Far enough for any line that
# fires at all: the Gregorian calendar repeats its dates and weekdays every 28 years within a century, and
# 50 years also spans the skipped leap day of 2100 (February 29 on a Sunday: 2032, then 2060).
_GIVE_UP = timedelta(days=366 * 51)


@dataclass(frozen=True)
class EveryTimeline:
    """Exact periods from `anchor`; like a cron timeline, it ends where `zone`'s calendar does."""

    period: timedelta
    anchor: datetime
    anchor_fires: bool
    zone: ZoneInfo

    def next_after(self, instant: datetime) -> datetime | None:
        try:
            if instant < self.anchor:
                fire = self.anchor if self.anchor_fires else self.anchor + self.period
            else:
                fire = self.anchor + ((instant - self.anchor) // self.period + 1) * self.period
        except OverflowError:
            return None  # past year 9999 in UTC
        return _in_calendar(fire.astimezone(UTC), self.zone)

    def at_or_before(self, instant: datetime) -> datetime | None:
        try:
            first = self.anchor if self.anchor_fires else self.anchor + self.period
        except OverflowError:
            return None
        if instant < first:
            return None
        fire = self.anchor + ((instant - self.anchor) // self.period) * self.period
        return _in_calendar(fire.astimezone(UTC), self.zone)


def _in_calendar(fire: datetime, zone: ZoneInfo) -> datetime | None:
    """`fire`, or None when its wall time in `zone` is outside years 1-9999 (so it cannot be shown
    or computed from there: the timeline has ended)."""
    try:
        fire.astimezone(zone)
    except OverflowError:
        return None
    return fire


@dataclass(frozen=True)
class AtTimeline:
    instant: datetime

    def next_after(self, instant: datetime) -> datetime | None:
        return self.instant if self.instant > instant else None

    def at_or_before(self, instant: datetime) -> datetime | None:
        return self.instant if self.instant <= instant else None


def parse_zone(name: str) -> ZoneInfo:
    """An IANA zone; only names in the tz database (not file paths or "localtime")."""
    if name not in _zone_names():
        raise ExpressionError(f"unknown time zone {name!r} (use an IANA name such as Europe/Paris).")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ExpressionError(
            f"unknown time zone {name!r} (use an IANA name such as Europe/Paris)."
        ) from None


@cache
def _zone_names() -> frozenset[str]:
    return frozenset(available_timezones())


def parse_duration(text: str) -> timedelta:
    """``1h30m`` -> 5400 s. Units d, h, m, s, largest first, each at most once."""
    match = _DURATION.match(text.strip().lower())
    if not text.strip() or match is None:
        raise ExpressionError(f"{text!r} is not a duration (use e.g. 90s, 15m, 1h30m, 2d).")
    seconds = sum(int(part or 0) * unit for part, unit in zip(match.groups(), _UNIT_SECONDS, strict=True))
    return timedelta(seconds=seconds)


def timeline_for(
    expression: str,
    *,
    zone: str,
    anchor: datetime,
    anchor_fires: bool = False,
    fires_after: datetime | None = None,
) -> Timeline:
    """Parse `expression` and return its timeline; raises ExpressionError naming what is wrong.

    `anchor` only matters for ``@every``: the instant the period counts from (see the module docstring).
    With `fires_after` (validation of what a person sends, e.g. now), a crontab with no fire after that
    instant within cronsim's 50 years is refused as never firing. A stored schedule's timeline is built
    without it, so a chain step never repeats that search.
    """
    tz = parse_zone(zone)
    text = " ".join(expression.split())
    if not text:
        raise ExpressionError("the expression is empty.")
    lowered = text.lower()
    if lowered.startswith("@every"):
        period = parse_duration(text[len("@every") :])
        seconds = period.total_seconds()
        if seconds < MIN_EVERY_SECONDS:
            raise ExpressionError(f"@every must be at least {MIN_EVERY_SECONDS}s ({int(seconds)}s given).")
        if seconds > MAX_EVERY_SECONDS:
            raise ExpressionError(f"@every must be at most {MAX_EVERY_SECONDS // 86400}d.")
        return EveryTimeline(period=period, anchor=anchor.astimezone(UTC), anchor_fires=anchor_fires, zone=tz)
    if lowered.startswith("@at"):
        value = text[len("@at") :].strip()
        if not value.isdigit():
            raise ExpressionError(f"@at takes unix seconds (e.g. @at 1767225600), not {value!r}.")
        try:
            at = datetime.fromtimestamp(int(value), tz=UTC)
        except (OverflowError, OSError, ValueError):
            raise ExpressionError(f"@at {value} is out of range.") from None
        if _in_calendar(at, tz) is None:
            raise ExpressionError(f"@at {value} is past the year 9999 in {zone}.")
        return AtTimeline(instant=at)
    if lowered.startswith("@"):
        if lowered not in NICKNAMES:
            known = ", ".join([*NICKNAMES, "@every <duration>", "@at <unix seconds>"])
            raise ExpressionError(f"unknown nickname {text!r} (known: {known}).")
        text = NICKNAMES[lowered]
    fields = text.split()
    if len(fields) != 5:
        raise ExpressionError(f"a crontab has 5 fields (minute hour day month weekday); {len(fields)} given.")
    try:
        timeline = CronTimeline(expression=text, zone=tz)
    except CronSimError as exc:
        raise ExpressionError(f"invalid crontab {text!r}: {exc}.") from None
    if fires_after is not None and timeline.next_after(fires_after) is None:
        raise ExpressionError(f"the crontab {text!r} never fires.")
    return timeline


def upcoming(
    timeline: Timeline, *, after: datetime, count: int, until: datetime | None = None
) -> list[datetime]:
    """The next `count` fires strictly after `after` (fewer when the timeline or `until` ends first)."""
    fires: list[datetime] = []
    instant = after
    while len(fires) < count:
        fire = timeline.next_after(instant)
        if fire is None or (until is not None and fire > until):
            break
        fires.append(fire)
        instant = fire
    return fires
