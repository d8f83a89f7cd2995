"""When the coaches' kinds fire for a training: from its team's settings (`Team.digest_before`,
`Team.digest_morning_at`), not from a rule's offsets, so each team sets its own times. Pure functions of
a training and its team (imported by trainings/planning/kinds.py, which the models read: no model import
here).

Each instant comes with the offset before the start that gives it, like a rule's: the fire path checks an
occurrence is still wanted by that pair, and a push records its offset.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from trainings.planning.offsets import Offset, OffsetError, is_time_zone, shift


def digest_instants(training: Any) -> list[tuple[datetime, Offset]]:
    """The digest `Team.digest_before` before the start (none when the team set none)."""
    text = training.team.digest_before
    if not text:
        return []
    try:
        offset = Offset.parse(text)
    except OffsetError:
        return []
    return [(shift(training.start, offset, sign=-1, zone=training.zone), offset)]


def morning_instants(training: Any) -> list[tuple[datetime, Offset]]:
    """The morning summary at `Team.digest_morning_at` in the team's zone on the training's day there, as
    whole minutes before the start; none when the team set none or the training starts before it."""
    at = training.team.digest_morning_at
    if at is None:
        return []
    zone = ZoneInfo(training.team.time_zone) if is_time_zone(training.team.time_zone) else training.zone
    day = training.start.astimezone(zone).date()
    morning = datetime.combine(day, at).replace(tzinfo=zone, fold=0).astimezone(UTC)
    minutes = int((training.start - morning).total_seconds() // 60)
    if minutes < 1:
        return []
    offset = Offset(minutes, "m")
    return [(shift(training.start, offset, sign=-1, zone=zone), offset)]


def never(training: Any) -> list[tuple[datetime, Offset]]:
    """A kind that fires on an event (a late decline), never at an instant of its own."""
    return []
