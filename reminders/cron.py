"""Schedule expressions and their timelines: which instants a recurring schedule fires at.

Four forms (seed 001):

- a 5-field crontab (``*/15 9-17 * * MON-FRI``), evaluated in the schedule's IANA zone by cronsim, which
  follows Debian cron through DST changes: a job at a specific time that falls in the skipped hour runs at
  the first valid minute after it (``30 2 * * *`` in Europe/Paris fires at 03:00 on the spring-forward
  day), a specific time in the repeated hour runs once (the first copy), and jobs with a granularity of an
  hour or less (``*/15 * * * *``) fire on real time, so they fire in both copies of the repeated hour;
- a nickname: ``@hourly``, ``@daily``/``@midnight``, ``@weekly``, ``@monthly``, ``@yearly``/``@annually``
  (the cron lines they stand for, in the schedule's zone);
- ``@every <duration>`` (``90s``, ``15m``, ``1h30m``, ``2d``): exact durations from an anchor, the
  schedule's start if it has one (the first fire is the start itself), otherwise the moment the expression
  was set (the first fire is one period later, as in seed 001). At least ``MIN_EVERY_SECONDS``;
- ``@at <unix seconds>``: a single instant.

A timeline only answers "the first instant strictly after t" (`next_after`), so the next fire is always
computed from the previous fire, never from the time a delivery happened.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from cronsim import CronSim, CronSimError

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
# A cron line that matches nothing for this long (``0 0 30 2 *``) is refused: cronsim itself gives up
# after 50 years, and a schedule that never fires is a caller's mistake worth a 400.
_HORIZON = timedelta(days=366 * 5)


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
    expression: str
    zone: ZoneInfo

    def next_after(self, instant: datetime) -> datetime | None:
        fire = self._walk(from_=instant, after=instant)
        settled = None if fire is None else self._past_last_change(instant, fire)
        if fire is not None and settled is not None:
            # cronsim steps whole hours in real time when the minute field is a wildcard; across a change
            # of half an hour (Lord Howe) it lands on :30 and steps over the fires at :00 and :15 that
            # follow. A walk that starts after the change has nothing to cross: keep the earlier answer.
            again = self._walk(from_=settled, after=instant)
            if again is not None and again < fire:
                fire = again
        return fire

    def _walk(self, *, from_: datetime, after: datetime) -> datetime | None:
        # cronsim works on wall-clock fields, and for fixed-time lines it drops the `fold` of the start:
        # started inside the second copy of a repeated hour, its first answer can be the first copy, an
        # instant *before* the start. Asking again from there moves on; the loop ends within a few steps.
        for fire in CronSim(self.expression, from_.astimezone(self.zone)):
            fire_utc = fire.astimezone(UTC)
            if fire_utc > after:
                return fire_utc
        return None

    def _past_last_change(self, start: datetime, end: datetime) -> datetime | None:
        """Where a walk can start (exclusive) that sees every wall time after the last UTC-offset change in
        (start, end] without crossing it or stepping from a half hour: the top of the first whole wall hour
        after the change and after any repeated window. None if the offset does not change."""
        offset_end = end.astimezone(self.zone).utcoffset()
        if start.astimezone(self.zone).utcoffset() == offset_end:
            return None
        low, high = start, end  # offset(low) differs from offset_end; offset(high) is offset_end
        while high - low > timedelta(seconds=1):
            middle = low + (high - low) / 2
            if middle.astimezone(self.zone).utcoffset() == offset_end:
                high = middle
            else:
                low = middle
        before = low.astimezone(self.zone).utcoffset()
        assert before is not None and offset_end is not None
        resume = (high + max(before - offset_end, timedelta(0))).astimezone(self.zone)
        if resume.minute or resume.second:
            top = resume.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)  # wall time
            resume = top.astimezone(UTC).astimezone(self.zone)
        return resume.astimezone(UTC) - timedelta(seconds=1)

    def at_or_before(self, instant: datetime) -> datetime | None:
        """The latest fire not after `instant` (cronsim's reverse walk; callers check it going forward)."""
        start = (instant.replace(microsecond=0) + timedelta(seconds=1)).astimezone(self.zone)
        for fire in CronSim(self.expression, start, reverse=True):
            fire_utc = fire.astimezone(UTC)
            if fire_utc <= instant:
                return fire_utc
        return None


@dataclass(frozen=True)
class EveryTimeline:
    period: timedelta
    anchor: datetime
    anchor_fires: bool

    def next_after(self, instant: datetime) -> datetime | None:
        if instant < self.anchor:
            return self.anchor if self.anchor_fires else self.anchor + self.period
        periods = (instant - self.anchor) // self.period + 1
        return (self.anchor + periods * self.period).astimezone(UTC)

    def at_or_before(self, instant: datetime) -> datetime | None:
        first = self.anchor if self.anchor_fires else self.anchor + self.period
        if instant < first:
            return None
        return (self.anchor + ((instant - self.anchor) // self.period) * self.period).astimezone(UTC)


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


def timeline_for(expression: str, *, zone: str, anchor: datetime, anchor_fires: bool = False) -> Timeline:
    """Parse `expression` and return its timeline; raises ExpressionError naming what is wrong.

    `anchor` only matters for ``@every``: the instant the period counts from (see the module docstring).
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
        return EveryTimeline(period=period, anchor=anchor.astimezone(UTC), anchor_fires=anchor_fires)
    if lowered.startswith("@at"):
        value = text[len("@at") :].strip()
        if not value.isdigit():
            raise ExpressionError(f"@at takes unix seconds (e.g. @at 1767225600), not {value!r}.")
        try:
            return AtTimeline(instant=datetime.fromtimestamp(int(value), tz=UTC))
        except (OverflowError, OSError, ValueError):
            raise ExpressionError(f"@at {value} is out of range.") from None
    if lowered.startswith("@"):
        if lowered not in NICKNAMES:
            known = ", ".join([*NICKNAMES, "@every <duration>", "@at <unix seconds>"])
            raise ExpressionError(f"unknown nickname {text!r} (known: {known}).")
        text = NICKNAMES[lowered]
    fields = text.split()
    if len(fields) != 5:
        raise ExpressionError(f"a crontab has 5 fields (minute hour day month weekday); {len(fields)} given.")
    timeline = CronTimeline(expression=text, zone=tz)
    probe = datetime(2025, 1, 1, tzinfo=UTC)
    try:
        first = timeline.next_after(probe)
    except CronSimError as exc:
        raise ExpressionError(f"invalid crontab {text!r}: {exc}.") from None
    if first is None or first - probe > _HORIZON:
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
