"""Quiet hours: a window of local wall-clock time (e.g. 22:00-07:00) in which a player is not pushed.

The window is the player's own when set, else their team's, read in the player's zone (the training's when
the player's is not a valid zone). It may cross midnight. Its end is a wall-clock time, so on a night whose
clocks change the window is an hour shorter or longer in real time; an end that does not exist that night
(inside a spring-forward gap) moves forward by the gap.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo


@dataclass(frozen=True)
class QuietHours:
    start: time
    end: time
    zone: ZoneInfo

    def release_at(self, instant: datetime) -> datetime | None:
        """When the window holding `instant` ends, or None when `instant` is outside it."""
        local = instant.astimezone(self.zone)
        wall = local.time().replace(tzinfo=None)
        if self.start == self.end:
            return None  # an empty window
        crosses_midnight = self.start > self.end
        inside = (
            (wall >= self.start or wall < self.end) if crosses_midnight else self.start <= wall < self.end
        )
        if not inside:
            return None
        end_day = (
            local.date() + timedelta(days=1) if crosses_midnight and wall >= self.start else local.date()
        )
        return _wall_to_utc(datetime.combine(end_day, self.end), self.zone)


def _wall_to_utc(wall: datetime, zone: ZoneInfo) -> datetime:
    """A local wall time as an aware UTC instant (fold 0: an ambiguous time is its first occurrence, a
    time inside a gap moves forward by the gap, as offsets do in trainings/offsets.py)."""
    return wall.replace(tzinfo=zone).astimezone(UTC)


def quiet_hours_for(*, player: object, team: object, zone: ZoneInfo) -> QuietHours | None:
    """The player's window if they set one, else the team's, else none."""
    for owner in (player, team):
        start, end = getattr(owner, "quiet_start", None), getattr(owner, "quiet_end", None)
        if start is not None and end is not None:
            return QuietHours(start, end, zone)
    return None
