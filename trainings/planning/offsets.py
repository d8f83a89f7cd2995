"""Reminder offsets ("90m", "6h", "3d") and the instants they give for a training. Pure functions.

Time rule (DESIGN.md leaves the choice to us):
- minutes and hours are exact durations: "90m before a 10:00 start" is 90 real minutes before it, even
  across a DST change;
- days are wall-clock days in the training's IANA zone: "1d before a training on Monday 10:00
  Europe/Paris" is Sunday 10:00 in Paris, whatever the UTC offset on either day. That is what a player
  reading "tomorrow at 10:00" expects. A wall-clock time that does not exist (spring forward gap) moves
  forward by the gap (02:30 -> 03:30); an ambiguous one (autumn fold) takes its first occurrence.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache, lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from django.core.exceptions import ValidationError

_OFFSET = re.compile(r"^([1-9][0-9]{0,4})([mhd])$")
_UNIT_NAMES = {"m": "min", "h": "h", "d": "d"}
_UNIT_MINUTES = {"m": 1, "h": 60, "d": 1440}
# A bound that keeps every rule's reach finite; the rule-change rescan relies on it.
MAX_OFFSET = timedelta(days=30)


class OffsetError(ValueError):
    pass


@dataclass(frozen=True, order=True)
class Offset:
    value: int
    unit: str  # "m", "h" or "d"

    @classmethod
    def parse(cls, text: str) -> Offset:
        match = _OFFSET.match(text.strip()) if isinstance(text, str) else None
        if match is None:
            raise OffsetError(f"{text!r} is not an offset such as '90m', '6h' or '3d'")
        offset = cls(int(match.group(1)), match.group(2))
        if offset.approximate() > MAX_OFFSET:
            raise OffsetError(f"{text!r} is longer than {MAX_OFFSET.days} days")
        return offset

    def approximate(self) -> timedelta:
        """The length as an exact duration (a day counted as 24 h): for ordering and bounds only."""
        return timedelta(minutes=self.value * _UNIT_MINUTES[self.unit])

    def __str__(self) -> str:
        return f"{self.value}{self.unit}"

    def human(self) -> str:
        return f"{self.value} {_UNIT_NAMES[self.unit]}"


def parse_offsets(texts: Iterable[str]) -> list[Offset]:
    """Parse and de-duplicate, shortest first; raises OffsetError naming the first bad item."""
    return sorted({Offset.parse(text) for text in texts}, key=lambda o: (o.approximate(), o.unit))


def offsets_from_text(text: str) -> list[str]:
    """Offsets as a person types them, "90m, 75m 15m", as the stored list ["90m", "75m", "15m"] (each item
    checked by `parse_offsets`/`validate_offsets`, not here)."""
    return [part for part in text.replace(",", " ").split() if part]


@lru_cache(maxsize=256)
def parse_offsets_cached(texts: tuple[str, ...]) -> tuple[Offset, ...]:
    """`parse_offsets` of a rule's stored list, remembered: every training's scheduling reads each rule's
    offsets, and they rarely change (an error is raised again each time, never cached)."""
    return tuple(parse_offsets(texts))


def parse_stored_offsets(value: object) -> list[Offset]:
    """A rule's stored offsets parsed (remembered when they are a list of texts; anything else gets the
    error validation gives)."""
    if isinstance(value, list) and all(isinstance(text, str) for text in value):
        return list(parse_offsets_cached(tuple(value)))
    return parse_offsets(value)  # type: ignore[arg-type]


def offset_between(anchor: datetime, moment: datetime) -> Offset:
    """How far `anchor` is from `moment`, as a push says it: rounded to minutes below two hours, hours
    below two days, else days (at least one minute)."""
    minutes = max(1, round(abs((anchor - moment).total_seconds()) / 60))
    if minutes < 120:
        return Offset(minutes, "m")
    if minutes < 2 * 1440:
        return Offset(round(minutes / 60), "h")
    return Offset(round(minutes / 1440), "d")


def shift(anchor: datetime, offset: Offset, *, sign: int, zone: ZoneInfo) -> datetime:
    """`anchor` moved by `offset` (sign -1 = before, +1 = after), as an aware UTC instant."""
    if anchor.tzinfo is None:
        raise ValueError("naive datetime (a time zone is required)")
    if offset.unit != "d":
        return (anchor + sign * offset.approximate()).astimezone(UTC)
    local = anchor.astimezone(zone).replace(tzinfo=None) + sign * timedelta(days=offset.value)
    # fold=0: an ambiguous wall time takes its first instant; a missing one is read with the offset in
    # force before the gap, which lands it after the gap once normalised through UTC.
    return local.replace(tzinfo=zone, fold=0).astimezone(UTC)


@cache
def _zones() -> frozenset[str]:
    return frozenset(available_timezones())


def is_time_zone(name: str) -> bool:
    if name not in _zones():
        return False
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


def validate_time_zone(value: str) -> None:
    """A model field's validator: an IANA zone name."""
    if not is_time_zone(value):
        raise ValidationError(f"{value!r} is not an IANA time zone name (e.g. Europe/Paris).")


def validate_offsets(value: object) -> None:
    if not isinstance(value, list) or not value:
        raise ValidationError("a non-empty list of offsets such as ['90m', '6h', '3d'].")
    try:
        parse_offsets(value)
    except OffsetError as exc:
        raise ValidationError(str(exc)) from None


def validate_offset(value: str) -> None:
    """A model field's validator: one offset ("2h", "90m", "1d"), e.g. when a team's coaches hear of a
    training (trainings/digest/)."""
    try:
        Offset.parse(value)
    except OffsetError as exc:
        raise ValidationError(str(exc)) from None
