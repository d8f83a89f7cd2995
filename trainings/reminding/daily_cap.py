"""The daily cap: a team's `daily_push_cap` pushes per player per calendar day, counted in the zone of the
person reminded (the player, or each guardian of theirs on their own), at most; a further non-critical
reminder that day is held back, recorded `skipped` with the reason, which the coach's grid and timeline
show (docs/escalation.md).

What counts: every push the person had that day (by its fire time) that was not withdrawn or skipped,
critical ones and other teams' included; a critical reminder is never held back by the cap. The count is
read at fire time in one query for a due chunk; two chunks firing the same person's reminders at the same
instant on two workers may each see the other's not yet committed, so the cap can be passed by the
pushes of one instant (never by a later one). The coach's "remind now" is not capped: a coach asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, time, timedelta
from typing import Protocol
from zoneinfo import ZoneInfo

from trainings.models import Push, PushStatus, ReminderRule, Training
from trainings.planning.offsets import is_time_zone
from trainings.reminding.rendering import Addressee, PushRow

_COUNTED_OUT = (PushStatus.WITHDRAWN, PushStatus.SKIPPED)
_GOING = (str(PushStatus.PENDING), str(PushStatus.HELD), str(PushStatus.SENT))
_Person = tuple[int, int | None]  # (player, guardian)


class _Firing(Protocol):
    training: Training | None
    rule: ReminderRule | None
    recipients: Sequence[Addressee]
    pushes: list[PushRow]
    critical: bool


def _day(at: datetime, zone: ZoneInfo) -> tuple[date, datetime, datetime]:
    """The calendar day of `at` in `zone` and its bounds (a 23 or 25 hour day across a clock change)."""
    day = at.astimezone(zone).date()
    start = datetime.combine(day, time.min, zone)
    return day, start, datetime.combine(day + timedelta(days=1), time.min, zone)


def daily_cap_apply(firings: Sequence[_Firing]) -> int:
    """Replace, in each firing, the pushes past their team's cap by skipped ones with the reason; returns
    how many. One query, only when a firing's team has a cap."""
    capped = [f for f in firings if f.training is not None and f.training.team.daily_push_cap is not None]
    if not capped:
        return 0
    watched = {(push.player_id, push.guardian_id) for f in capped for push in f.pushes}
    # Each watched person's days, in their zone, for the pushes of the chunk (capped or counting).
    days: dict[_Person, dict[date, tuple[datetime, datetime, str]]] = {}
    chunk: list[tuple[datetime, str, _Person, date, _Firing, int]] = []
    for f in firings:
        if f.training is None:
            continue
        for index, (person, push) in enumerate(zip(f.recipients, f.pushes, strict=True)):
            who = (push.player_id, push.guardian_id)
            if who not in watched:
                continue
            zone = ZoneInfo(person.time_zone) if is_time_zone(person.time_zone) else f.training.zone
            day, start, end = _day(push.fire_at, zone)
            days.setdefault(who, {}).setdefault(day, (start, end, zone.key))
            chunk.append((push.fire_at, push.key, who, day, f, index))
    bounds = [bound for per_day in days.values() for bound in per_day.values()]
    keys = {push.key for f in firings for push in f.pushes}
    counted: dict[tuple[_Person, date], int] = {}
    rows = (
        Push.objects.filter(
            player_id__in={who[0] for who in days},
            fire_at__gte=min(start for start, _, _ in bounds),
            fire_at__lt=max(end for _, end, _ in bounds),
        )
        .exclude(status__in=_COUNTED_OUT)
        .values_list("player_id", "guardian_id", "fire_at", "key")
    )
    for player_id, guardian_id, fire_at, key in rows:
        if key in keys:  # an earlier attempt of this chunk's own occurrence: counted below
            continue
        who = (player_id, guardian_id)
        for day, (start, end, _) in days.get(who, {}).items():
            if start <= fire_at < end:
                counted[who, day] = counted.get((who, day), 0) + 1
    held = 0
    for _, _, who, day, f, index in sorted(chunk, key=lambda item: (item[0], item[1])):
        push = f.pushes[index]
        if push.status not in _GOING:
            continue  # skipped for quiet hours already: neither sent nor counted
        cap = f.training.team.daily_push_cap if f.training is not None else None
        already = counted.get((who, day), 0)
        if cap is not None and not f.critical and already >= cap:
            f.pushes[index] = push._replace(
                status=str(PushStatus.SKIPPED),
                release_at=None,
                status_reason=f"held back: daily push cap of {cap} reached for {day:%Y-%m-%d} "
                f"({days[who][day][2]})",
            )
            held += 1
            continue
        counted[who, day] = already + 1
    return held
