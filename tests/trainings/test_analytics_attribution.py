"""Attribution and the time-to-answer bands, without a database: which reminder an answer counts for,
where 15 and 60 minutes fall, and the median's band."""

from __future__ import annotations

import datetime as dt

from trainings.analytics.attribution import (
    Answer,
    Reminder,
    band_bounds,
    band_of,
    median_band,
    tally,
)
from trainings.analytics.figures import OffsetFigures

S = dt.datetime(2026, 3, 1, 18, tzinfo=dt.UTC)
MIN = dt.timedelta(minutes=1)


def _reminder(offset: int, reached: dt.datetime | None, *, player: int = 1, last: bool = False) -> Reminder:
    return Reminder("t", player, "PRE", "pre", f"{offset}m", reached, last)


def test_an_answer_counts_for_the_last_reminder_received_before_it() -> None:
    reminders = [_reminder(90, S - 90 * MIN), _reminder(75, S - 75 * MIN), _reminder(60, S - 58 * MIN)]
    offsets, players = tally(reminders, [Answer("t", 1, "PRE", S - 59 * MIN)], {("t", "PRE"): S})
    # 60's push was due before the answer but reached the phone after it: 75 gets the credit, at 16 min.
    assert offsets[("PRE", "pre", "75m")].answered == 1
    assert offsets[("PRE", "pre", "75m")].within_15 == 0
    assert offsets[("PRE", "pre", "75m")].within_60 == 1
    assert offsets[("PRE", "pre", "60m")].answered == 0
    assert players[(1, "PRE")].after_reminder == 1


def test_an_unreached_reminder_gets_no_credit() -> None:
    offsets, players = tally([_reminder(90, None)], [Answer("t", 1, "PRE", S - 80 * MIN)], {})
    assert offsets[("PRE", "pre", "90m")].sent == 1
    assert offsets[("PRE", "pre", "90m")].reached == 0
    assert offsets[("PRE", "", "")].answered == 1  # nobody reminded
    assert players[(1, "PRE")].before_reminder == 1


def test_fifteen_and_sixty_minutes_are_inclusive() -> None:
    reminders = [_reminder(90, S - 90 * MIN, player=1), _reminder(90, S - 90 * MIN, player=2)]
    answers = [Answer("t", 1, "PRE", S - 75 * MIN), Answer("t", 2, "PRE", S - 30 * MIN)]
    offsets, _ = tally(reminders, answers, {})
    row = offsets[("PRE", "pre", "90m")]
    assert (row.within_15, row.within_60) == (1, 2)


def test_the_bands_are_whole_minutes_in_the_first_hour() -> None:
    assert band_of(dt.timedelta(seconds=59)) == 0
    assert band_of(dt.timedelta(minutes=1)) == 0  # within 1 min, inclusive
    assert band_of(dt.timedelta(minutes=1, seconds=1)) == 1
    assert band_bounds(band_of(dt.timedelta(minutes=14, seconds=59))) == (14, 15)
    assert band_bounds(band_of(dt.timedelta(minutes=15))) == (14, 15)
    assert band_bounds(band_of(dt.timedelta(minutes=100))) == (90, 120)
    assert band_bounds(band_of(dt.timedelta(days=5))) == (4320, None)


def test_the_median_is_the_middle_answers_band() -> None:
    assert median_band({}) is None
    assert median_band({3: 1, 7: 1, 20: 1}) == (7, 8)
    assert median_band({3: 2, 7: 2}) == (3, 4)  # the lower middle of an even count


def test_the_curve_counts_an_answer_at_exactly_m_minutes_like_the_15_and_60_counts() -> None:
    reminders = [_reminder(90, S - 90 * MIN, player=p) for p in (1, 2, 3)]
    answers = [Answer("t", 1, "PRE", S - 75 * MIN), Answer("t", 2, "PRE", S - 30 * MIN),
               Answer("t", 3, "PRE", S - 89 * MIN)]  # fmt: skip
    offsets, _ = tally(reminders, answers, {})
    row = OffsetFigures("PRE", "pre", "90m", last=True, figures=offsets[("PRE", "pre", "90m")])
    curve = dict(row.curve())
    assert (row.figures.within_15, row.figures.within_60) == (2, 3)
    assert curve[1] == 1 / 3  # the answer at exactly 1 min is in
    assert curve[15] == row.figures.within_15 / 3
    assert curve[60] == row.figures.within_60 / 3
    assert curve[14] == 1 / 3
