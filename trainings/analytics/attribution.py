"""Which reminder an answer counts for, and what that says about each reminder and each player. Pure.

Attribution: an answer counts for the last reminder the player *received* before it, that is the last
push of the same training and kind that a device or an inbox accepted (its earliest accepted send) at or
before the answer's time. An answer with no such reminder is an answer nobody was reminded for. A push
that was published but reached no device is sent, never received, and gets no credit.

Time to answer is measured from that acceptance, and kept in bands (`BAND_EDGES`): whole minutes within
the first hour, wider bands after, so a median is exact to the minute inside the hour and to its band
beyond. "Within m minutes" includes an answer given exactly m minutes after (the 15 / 60 min counts and the
curve alike), so a band holds (edge i-1, edge i] and the curve at an edge counts every band up to it.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

# Upper edges (minutes, inclusive) of the time-to-answer bands; the band after the last edge is open.
BAND_EDGES: tuple[int, ...] = (*range(1, 61), 75, 90, 120, 180, 240, 360, 720, 1440, 2880, 4320)
WITHIN_SHORT = timedelta(minutes=15)
WITHIN_LONG = timedelta(minutes=60)


def band_of(delay: timedelta) -> int:
    """The band of a time to answer: band i holds (edge i-1, edge i] minutes (band 0: [0, 1])."""
    return bisect.bisect_left(BAND_EDGES, max(delay.total_seconds(), 0.0) / 60)


def band_bounds(band: int) -> tuple[int, int | None]:
    """(low, high) minutes of a band; high is None for the open last band."""
    low = BAND_EDGES[band - 1] if band else 0
    return low, BAND_EDGES[band] if band < len(BAND_EDGES) else None


def median_band(bands: Mapping[int, int]) -> tuple[int, int | None] | None:
    """The band holding the median answer (the ceil(n/2)-th fastest), None without answers."""
    total = sum(bands.values())
    if not total:
        return None
    wanted, seen = math.ceil(total / 2), 0
    for band in sorted(bands):
        seen += bands[band]
        if seen >= wanted:
            return band_bounds(band)
    raise AssertionError("unreachable: the counts add up to the total")


def answered_by(bands: Mapping[int, int]) -> list[tuple[int, int]]:
    """(minutes, answers given within that many minutes, inclusive) at each band's upper edge: the
    time-to-answer curve, on the same rule as the 15 / 60 min counts."""
    out, seen = [], 0
    for band, edge in enumerate(BAND_EDGES):
        seen += bands.get(band, 0)
        out.append((edge, seen))
    return out


@dataclass(frozen=True)
class Reminder:
    """One published push of a rule's reminder to one player."""

    training: Any
    player: int
    kind: str
    rule: str  # the rule's slug; "" when the rule has gone
    offset: str  # e.g. "90m"
    reached_at: datetime | None  # the first acceptance by a device or an inbox; None: never reached
    last: bool  # the rule's last offset (the latest instant it reminds at)


@dataclass(frozen=True)
class Answer:
    training: Any
    player: int
    kind: str
    at: datetime


@dataclass
class OffsetTally:
    """A rule offset's reminders (or, with rule and offset "", the answers nobody was reminded for)."""

    sent: int = 0
    reached: int = 0
    answered: int = 0  # answers credited to these reminders (or unreminded answers)
    within_15: int = 0
    within_60: int = 0
    in_window: int = 0  # credited answers given before the kind's window closed
    bands: Counter[int] = field(default_factory=Counter)  # time to answer, by band

    def add(self, other: OffsetTally) -> None:
        self.sent += other.sent
        self.reached += other.reached
        self.answered += other.answered
        self.within_15 += other.within_15
        self.within_60 += other.within_60
        self.in_window += other.in_window
        self.bands.update(other.bands)


@dataclass
class PlayerTally:
    """How a player answered the (training, kind) pairs they were asked, one count per pair."""

    before_reminder: int = 0  # answered in the window before any reminder reached them
    after_reminder: int = 0  # answered in the window after a reminder that was not the rule's last
    after_last: int = 0  # answered in the window only after the rule's last reminder
    never: int = 0  # reminded (a push published), no answer before the window closed

    def add(self, other: PlayerTally) -> None:
        self.before_reminder += other.before_reminder
        self.after_reminder += other.after_reminder
        self.after_last += other.after_last
        self.never += other.never

    @property
    def asked(self) -> int:
        return self.before_reminder + self.after_reminder + self.after_last + self.never


OffsetKey = tuple[str, str, str]  # (kind, rule slug, offset)
PlayerKey = tuple[int, str]  # (player, kind)
UNREMINDED = ("", "")  # (rule, offset) of the answers nobody was reminded for


def tally(
    reminders: Iterable[Reminder], answers: Iterable[Answer], closes: Mapping[tuple[Any, str], datetime]
) -> tuple[dict[OffsetKey, OffsetTally], dict[PlayerKey, PlayerTally]]:
    """The figures of a set of trainings' reminders and answers. `closes[(training, kind)]`: when the
    kind's window closed for that training (an answer later than that is not "in the window")."""
    offsets: dict[OffsetKey, OffsetTally] = {}
    players: dict[PlayerKey, PlayerTally] = {}
    sent: dict[tuple[Any, int, str], list[Reminder]] = {}
    for reminder in reminders:
        row = offsets.setdefault((reminder.kind, reminder.rule, reminder.offset), OffsetTally())
        row.sent += 1
        row.reached += reminder.reached_at is not None
        sent.setdefault((reminder.training, reminder.player, reminder.kind), []).append(reminder)
    answered: set[tuple[Any, int, str]] = set()
    for answer in answers:
        pair = (answer.training, answer.player, answer.kind)
        answered.add(pair)
        close = closes.get((answer.training, answer.kind))
        in_window = close is None or answer.at <= close
        received = [r for r in sent.get(pair, ()) if r.reached_at is not None and r.reached_at <= answer.at]
        credited = max(received, key=lambda r: r.reached_at or answer.at, default=None)
        key = (
            (answer.kind, *UNREMINDED) if credited is None else (answer.kind, credited.rule, credited.offset)
        )
        row = offsets.setdefault(key, OffsetTally())
        row.answered += 1
        row.in_window += in_window
        if credited is not None and credited.reached_at is not None:
            delay = answer.at - credited.reached_at
            row.within_15 += delay <= WITHIN_SHORT
            row.within_60 += delay <= WITHIN_LONG
            row.bands[band_of(delay)] += 1
        player = players.setdefault((answer.player, answer.kind), PlayerTally())
        if not in_window:
            player.never += bool(sent.get(pair))
        elif credited is None:
            player.before_reminder += 1
        elif credited.last:
            player.after_last += 1
        else:
            player.after_reminder += 1
    for (training, player_id, kind), _ in sent.items():
        if (training, player_id, kind) not in answered:
            players.setdefault((player_id, kind), PlayerTally()).never += 1
    return offsets, players
