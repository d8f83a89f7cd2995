"""Quiet hours: a window of local wall-clock time (e.g. 22:00-07:00) in which a player is not pushed.

The window is the player's own when set, else their team's, read in the player's zone (the training's when
the player's is not a valid zone). It may cross midnight.

Each night's window is one continuous stretch of real time: from the first moment the clock shows the start
(or a later time) to the last moment it shows a time before the end. On the nights clocks change that
gives (docs/quiet-hours.md has the cases):

- a start or an end in a repeated hour (fall back): the window starts at the first copy of the start and
  ends at the second copy of the end (the first, for an end at the very first repeated time, since the
  time before it shows only once), so it is an hour longer in real time and never cut in two;
- a start or an end in a skipped hour (spring forward): it is the jump itself (02:30 on a night that goes
  from 02:00 to 03:00 is 03:00), the first moment the clock shows a later time.

A push fired inside a window is held until the first moment outside every window: that window's end,
always after the push fired.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo


@dataclass(frozen=True)
class QuietHours:
    start: time
    end: time
    zone: ZoneInfo

    def window(self, night: date) -> tuple[datetime, datetime] | None:
        """The window beginning on the local date `night`, as UTC instants [start, end); None if empty."""
        if self.start == self.end:
            return None
        end_day = night + timedelta(days=1) if self.start > self.end else night
        return (
            _reached(datetime.combine(night, self.start), self.zone, first=True),
            _reached(datetime.combine(end_day, self.end), self.zone, first=False),
        )

    def release_at(self, instant: datetime) -> datetime | None:
        """The first moment at or after `instant` outside every window (always after it), or None when
        `instant` is outside. Usually the end of the window holding it; when a clock change makes that
        end the start of the next night's window (03:00-02:59 on a night 02:00 jumps to 03:00), that
        window's end."""
        release = None
        for _ in range(4):  # two windows touch only across a clock change: a chain is short
            end = self._end_of_window_holding(instant)
            if end is None:
                break
            release = instant = end
        return release

    def _end_of_window_holding(self, instant: datetime) -> datetime | None:
        day = instant.astimezone(self.zone).date()
        windows = (self.window(night) for night in (day - timedelta(days=1), day))
        return max((w[1] for w in windows if w is not None and w[0] <= instant < w[1]), default=None)


def _reached(wall: datetime, zone: ZoneInfo, *, first: bool) -> datetime:
    """The UTC instant the clock in `zone` shows the naive `wall` time: of a repeated time, the first copy
    (`first`) or the second; of a skipped time, the jump over it (the first moment showing a later time)."""
    early = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    late = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    if early == late:
        return early
    if _shown_twice(wall, zone):
        # An end: the last moment a time before it shows is in the second pass, unless the end is the
        # first repeated time itself (02:00 when 03:00 goes back to 02:00: 01:59 shows only once).
        second = not first and _shown_twice(wall - timedelta(seconds=1), zone)
        return max(early, late) if second else min(early, late)
    # Skipped: fold 0 reads it with the offset before the jump (a UTC instant after it), fold 1 with the
    # offset after (before it); the jump lies between, on a whole second.
    before, after = int(min(early, late).timestamp()), int(max(early, late).timestamp())
    offset_after = max(early, late).astimezone(zone).utcoffset()
    while after - before > 1:
        middle = (before + after) // 2
        if datetime.fromtimestamp(middle, zone).utcoffset() == offset_after:
            after = middle
        else:
            before = middle
    return datetime.fromtimestamp(after, UTC)


def _shown_twice(wall: datetime, zone: ZoneInfo) -> bool:
    """Whether the clock in `zone` shows this naive time twice (in the hour a fall-back repeats)."""
    early = wall.replace(tzinfo=zone, fold=0)
    late = wall.replace(tzinfo=zone, fold=1)
    return (
        early.utcoffset() != late.utcoffset()
        and early.astimezone(UTC).astimezone(zone).replace(tzinfo=None) == wall
    )


def quiet_hours_for(*, player: object, team: object, zone: ZoneInfo) -> QuietHours | None:
    """The player's window if they set one, else the team's, else none."""
    for owner in (player, team):
        start, end = getattr(owner, "quiet_start", None), getattr(owner, "quiet_end", None)
        if start is not None and end is not None:
            return QuietHours(start, end, zone)
    return None
