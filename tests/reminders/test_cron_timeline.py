"""Timelines of schedule expressions: property tests across zones and expressions, and the DST weeks.

The oracle for "what cron does" is Debian cron's rule, which cronsim documents: a job at a specific time
(minute and hour fields not starting with `*`) runs once in a repeated hour (the first copy) and, when
its time falls in a skipped hour, once at the jump; every other line runs on real time: each real minute
whose wall-clock time matches fires, so both copies of a repeated hour and none of a skipped one.
"""

from __future__ import annotations

import datetime as dt
import itertools
from functools import cache
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reminders.schedules.cron import (
    MIN_EVERY_SECONDS,
    CronTimeline,
    ExpressionError,
    parse_duration,
    timeline_for,
    upcoming,
)

UTC = dt.UTC
PARIS = ZoneInfo("Europe/Paris")
MINUTE = dt.timedelta(minutes=1)
ZONES = [
    "UTC",
    "Europe/Paris",
    "Europe/London",
    "America/New_York",
    "America/Sao_Paulo",
    "America/Santiago",
    "America/St_Johns",
    "Australia/Sydney",
    "Australia/Lord_Howe",  # 30-minute DST shift
    "Pacific/Chatham",  # +12:45 / +13:45
    "Asia/Kolkata",
    "Asia/Tehran",
    "Africa/Casablanca",
    "Pacific/Apia",
    "Europe/Chisinau",
    "America/Havana",  # DST changes at midnight
]
MINUTES = ["*", "*/15", "0", "30", "0,30", "5-10", "*/7", "59"]
HOURS = ["*", "2", "*/6", "1-3", "9-17", "0", "23", "*/2"]
DAYS = ["*", "1", "15", "28", "*/10"]
MONTHS = ["*", "*/3", "3,10", "1-6"]
WEEKDAYS = ["*", "1-5", "0", "SUN", "6"]

expressions = st.builds(
    lambda *fields: " ".join(fields),
    st.sampled_from(MINUTES),
    st.sampled_from(HOURS),
    st.sampled_from(DAYS),
    st.sampled_from(MONTHS),
    st.sampled_from(WEEKDAYS),
) | st.sampled_from(["@hourly", "@daily", "@weekly", "@monthly", "@yearly"])


@cache
def _transitions(zone_name: str, year: int) -> tuple[dt.datetime, ...]:
    """The UTC instants in `year` where the zone's offset changes: found day by day, then hour by hour in a
    day that changed, then to the minute (no zone here changes its offset twice within a day)."""
    zone = ZoneInfo(zone_name)
    found = []
    day = dt.datetime(year, 1, 1, tzinfo=UTC)
    previous = day.astimezone(zone).utcoffset()
    while day.year == year:
        if (day + dt.timedelta(days=1)).astimezone(zone).utcoffset() == previous:
            day += dt.timedelta(days=1)
            continue
        instant = day
        for _ in range(24):
            instant += dt.timedelta(hours=1)
            offset = instant.astimezone(zone).utcoffset()
            if offset != previous:
                change = instant - dt.timedelta(minutes=59)
                while change.astimezone(zone).utcoffset() != offset:
                    change += dt.timedelta(minutes=1)
                found.append(change)
                previous = offset
        day += dt.timedelta(days=1)
    return tuple(found)


def _offset_changes_between(zone_name: str, start: dt.datetime, end: dt.datetime) -> bool:
    """Does the zone's UTC offset change in (start, end]?"""
    return any(
        start < change <= end
        for year in range(start.year, end.year + 1)
        for change in _transitions(zone_name, year)
    )


def _fixed_time(expression: str) -> bool:
    minute, hour = expression.split()[:2]
    return not minute.startswith("*") and not hour.startswith("*")


@st.composite
def starts(draw: st.DrawFn, zone_name: str) -> dt.datetime:
    """Mostly a few days before one of the zone's DST changes; otherwise anywhere in 2020-2030."""
    year = draw(st.integers(2020, 2030))
    changes = _transitions(zone_name, year)
    if changes and draw(st.booleans()):
        near = draw(st.sampled_from(changes))
        return near - dt.timedelta(minutes=draw(st.integers(0, 3 * 24 * 60)))
    return dt.datetime(year, 1, 1, tzinfo=UTC) + dt.timedelta(minutes=draw(st.integers(0, 365 * 24 * 60)))


@cache
def _fields(expression: str) -> CronSim:
    """cronsim's parse of the crontab's fields, made once per expression: the oracle reads its field sets
    and day rule, which do not depend on the start it is given (parsing per minute read was most of the
    timeline tests' time)."""
    return CronSim(expression, dt.datetime(2000, 1, 1))


def _matches(expression: str, local: dt.datetime) -> bool:
    """Does the wall-clock time `local` match the crontab (cronsim's own parse of the fields)?"""
    spec = _fields(expression)
    return (
        local.second == 0
        and local.minute in spec.minutes
        and local.hour in spec.hours
        and local.month in spec.months
        and spec.match_day(local.date())
    )


def _at_a_jump_over_a_matching_wall_time(expression: str, fire: dt.datetime, zone: ZoneInfo) -> bool:
    """Is `fire` the instant the clock jumps forward, over a wall time the crontab matches?"""
    before = (fire - dt.timedelta(minutes=1)).astimezone(zone).utcoffset()
    after = fire.astimezone(zone).utcoffset()
    if before is None or after is None or not before < after:
        return False
    skipped = (fire + before).replace(tzinfo=None)
    return any(
        _matches(expression, skipped + dt.timedelta(minutes=m)) for m in range((after - before) // MINUTE)
    )


def _expected_fires(
    expression: str, zone: ZoneInfo, start: dt.datetime, end: dt.datetime
) -> set[dt.datetime]:
    """Every fire in (start, end], read off the zone's clock minute by minute."""
    fixed = _fixed_time(expression)
    fires = set()
    minute = start.replace(second=0, microsecond=0) + MINUTE
    while minute <= end:
        local = minute.astimezone(zone)
        if (_matches(expression, local) and not (fixed and local.fold)) or (
            fixed and _at_a_jump_over_a_matching_wall_time(expression, minute, zone)
        ):
            fires.add(minute)
        minute += MINUTE
    return fires


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), zone_name=st.sampled_from(ZONES), expression=expressions)
def test_it_fires_strictly_later_each_time_and_only_when_the_expression_matches_in_the_zone(
    data: st.DataObject, zone_name: str, expression: str
) -> None:
    zone = ZoneInfo(zone_name)
    start = data.draw(starts(zone_name))
    timeline = timeline_for(expression, zone=zone_name, anchor=start)
    assert isinstance(timeline, CronTimeline)
    fires = upcoming(timeline, after=start, count=12)
    assert len(fires) == 12
    assert fires[0] > start
    assert all(later > earlier for earlier, later in itertools.pairwise(fires))
    fixed_time = _fixed_time(timeline.expression)
    for fire in fires:
        local = fire.astimezone(zone)
        assert (_matches(timeline.expression, local) and not (fixed_time and local.fold)) or (
            fixed_time and _at_a_jump_over_a_matching_wall_time(timeline.expression, fire, zone)
        ), local


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    zone_name=st.sampled_from(ZONES),
    expression=expressions,
    start=st.datetimes(dt.datetime(2020, 1, 1), dt.datetime(2030, 1, 1), timezones=st.just(UTC)),
)
def test_it_agrees_with_the_evaluator_and_with_itself_from_any_point(
    zone_name: str, expression: str, start: dt.datetime
) -> None:
    """Walking fire to fire gives what cronsim gives when asked from the start, as long as the zone's
    offset does not change on the way (cronsim's own handling of changes is what `CronTimeline` replaces),
    and the latest fire at or before any instant is the one the forward walk reached."""
    timeline = timeline_for(expression, zone=zone_name, anchor=start)
    assert isinstance(timeline, CronTimeline)
    fires = upcoming(timeline, after=start, count=6)
    reference = [
        f.astimezone(UTC)
        for f, _ in zip(
            CronSim(timeline.expression, start.astimezone(ZoneInfo(zone_name))), range(6), strict=False
        )
    ]
    reference = [f for f in reference if f > start and not _offset_changes_between(zone_name, start, f)]
    assert fires[: len(reference)] == reference[: len(fires)]
    for earlier, later in itertools.pairwise(fires):
        middle = earlier + (later - earlier) / 2
        assert timeline.next_after(middle) == later
        assert timeline.at_or_before(middle) == earlier


def test_a_daily_0230_job_in_paris_fires_once_on_each_day_of_the_spring_forward_week() -> None:
    timeline = timeline_for("30 2 * * *", zone="Europe/Paris", anchor=dt.datetime(2025, 1, 1, tzinfo=UTC))
    fires = upcoming(timeline, after=dt.datetime(2025, 3, 26, 12, tzinfo=UTC), count=8)
    local = [f.astimezone(PARIS) for f in fires]
    assert [d.date().day for d in local] == [27, 28, 29, 30, 31, 1, 2, 3]
    # 2025-03-30 02:30 does not exist in Paris; cron runs it at the first minute after the gap.
    assert [(d.hour, d.minute) for d in local] == [(2, 30)] * 3 + [(3, 0)] + [(2, 30)] * 4
    assert fires[3] == dt.datetime(2025, 3, 30, 1, 0, tzinfo=UTC)


def test_a_daily_0230_job_in_paris_fires_once_on_each_day_of_the_fall_back_week() -> None:
    timeline = timeline_for("30 2 * * *", zone="Europe/Paris", anchor=dt.datetime(2025, 1, 1, tzinfo=UTC))
    fires = upcoming(timeline, after=dt.datetime(2025, 10, 22, 12, tzinfo=UTC), count=8)
    local = [f.astimezone(PARIS) for f in fires]
    assert [d.date().day for d in local] == [23, 24, 25, 26, 27, 28, 29, 30]
    assert all((d.hour, d.minute) == (2, 30) for d in local)
    # 02:30 happens twice on 2025-10-26; cron runs the job once, in the first copy (CEST).
    assert fires[3] == dt.datetime(2025, 10, 26, 0, 30, tzinfo=UTC)


def test_an_every_15_minutes_job_fires_in_both_copies_of_the_repeated_hour() -> None:
    timeline = timeline_for("*/15 * * * *", zone="Europe/Paris", anchor=dt.datetime(2025, 1, 1, tzinfo=UTC))
    start = dt.datetime(2025, 10, 25, 23, 0, tzinfo=UTC)  # 01:00 CEST
    fires = upcoming(timeline, after=start - dt.timedelta(seconds=1), count=17)
    assert all(b - a == dt.timedelta(minutes=15) for a, b in itertools.pairwise(fires))
    two_oclock = [f.astimezone(PARIS) for f in fires if f.astimezone(PARIS).hour == 2]
    assert [(d.minute, d.fold) for d in two_oclock] == [
        (0, 0),
        (15, 0),
        (30, 0),
        (45, 0),
        (0, 1),
        (15, 1),
        (30, 1),
        (45, 1),
    ]


def test_an_every_15_minutes_job_skips_the_missing_hour_on_real_time() -> None:
    timeline = timeline_for("*/15 * * * *", zone="Europe/Paris", anchor=dt.datetime(2025, 1, 1, tzinfo=UTC))
    fires = upcoming(timeline, after=dt.datetime(2025, 3, 30, 0, 0, tzinfo=UTC), count=6)
    assert all(b - a == dt.timedelta(minutes=15) for a, b in itertools.pairwise(fires))
    assert [f.astimezone(PARIS).strftime("%H:%M") for f in fires] == [
        "01:15",
        "01:30",
        "01:45",
        "03:00",
        "03:15",
        "03:30",
    ]


def test_it_never_answers_before_the_instant_asked_from_inside_the_repeated_hour() -> None:
    """cronsim drops the fold of a start in the second 02:xx; the timeline must still move forward."""
    timeline = timeline_for("30 2 * * *", zone="Europe/Paris", anchor=dt.datetime(2025, 1, 1, tzinfo=UTC))
    second_copy = dt.datetime(2025, 10, 26, 1, 10, tzinfo=UTC)  # 02:10 CET, after the 02:30 CEST run
    assert timeline.next_after(second_copy) == dt.datetime(2025, 10, 27, 1, 30, tzinfo=UTC)


def test_every_counts_exact_durations_from_its_anchor_across_dst() -> None:
    anchor = dt.datetime(2025, 3, 29, 23, 0, tzinfo=UTC)
    timeline = timeline_for("@every 1h30m", zone="Europe/Paris", anchor=anchor)
    fires = upcoming(timeline, after=anchor, count=4)
    assert fires == [anchor + dt.timedelta(minutes=90 * k) for k in range(1, 5)]
    with_start = timeline_for("@every 1h", zone="UTC", anchor=anchor, anchor_fires=True)
    assert with_start.next_after(anchor - dt.timedelta(seconds=1)) == anchor


def test_every_ends_where_the_calendar_does_in_utc_and_in_its_zone() -> None:
    """The next period past year 9999 overflowed (a 500 from the preview, an error from the worker)."""
    anchor = dt.datetime(9999, 12, 30, 20, 0, tzinfo=UTC)
    daily = timeline_for("@every 1d", zone="UTC", anchor=anchor, anchor_fires=True)
    assert upcoming(daily, after=anchor - dt.timedelta(seconds=1), count=3) == [
        anchor,
        anchor + dt.timedelta(days=1),
    ]
    # 9999-12-31T10:00Z is already year 10000 in Kiritimati (+14:00): the hourly fires stop before it.
    hourly = timeline_for("@every 1h", zone="Pacific/Kiritimati", anchor=anchor, anchor_fires=True)
    fires = upcoming(hourly, after=anchor, count=100)
    assert fires[-1] == dt.datetime(9999, 12, 31, 9, 0, tzinfo=UTC)
    assert hourly.at_or_before(dt.datetime.max.replace(tzinfo=UTC)) is None
    assert hourly.at_or_before(fires[-1]) == fires[-1]


def test_at_past_the_calendar_of_its_zone_is_refused() -> None:
    last_second = 253_402_300_799  # 9999-12-31T23:59:59Z
    assert timeline_for(f"@at {last_second}", zone="Etc/GMT+12", anchor=dt.datetime.now(UTC))
    with pytest.raises(ExpressionError, match="past the year 9999 in Pacific/Kiritimati"):
        timeline_for(f"@at {last_second}", zone="Pacific/Kiritimati", anchor=dt.datetime.now(UTC))


@pytest.mark.parametrize(
    ("text", "seconds"), [("90s", 90), ("15m", 900), ("1h", 3600), ("1h30m", 5400), ("2d", 172800)]
)
def test_it_parses_durations(text: str, seconds: int) -> None:
    assert parse_duration(text).total_seconds() == seconds


@pytest.mark.parametrize(
    "expression",
    [
        f"@every {MIN_EVERY_SECONDS - 1}s",
        "@every 0s",
        "@every 1x",
        "@every",
        "0 0 30 2 *",
        "@at -5",
        "1 2 3",
        "@weekly x",
    ],
)
def test_it_refuses_expressions_it_cannot_fire(expression: str) -> None:
    with pytest.raises(ExpressionError):
        timeline_for(expression, zone="UTC", anchor=dt.datetime(2025, 1, 1, tzinfo=UTC))


def test_it_refuses_unknown_zones() -> None:
    with pytest.raises(ExpressionError, match="time zone"):
        timeline_for("@daily", zone="Mars/Olympus", anchor=dt.datetime(2025, 1, 1, tzinfo=UTC))


def test_in_an_hour_skipped_at_midnight_a_specific_time_fires_at_the_jump_and_real_time_does_not() -> None:
    """Havana's clocks jump from 00:00 to 01:00 on 2020-03-08 (a Sunday): no 00:xx shows on the wall."""
    after = dt.datetime(2020, 3, 2, tzinfo=UTC)
    at_midnight = timeline_for("0 0 * 3,10 0", zone="America/Havana", anchor=after)
    assert upcoming(at_midnight, after=after, count=2) == [
        dt.datetime(2020, 3, 8, 5, 0, tzinfo=UTC),  # the jump itself, 01:00 CDT
        dt.datetime(2020, 3, 15, 4, 0, tzinfo=UTC),  # next Sunday 00:00 CDT
    ]
    every_quarter = timeline_for("*/15 0 * 3,10 0", zone="America/Havana", anchor=after)
    assert upcoming(every_quarter, after=after, count=2) == [
        dt.datetime(2020, 3, 15, 4, 0, tzinfo=UTC),
        dt.datetime(2020, 3, 15, 4, 15, tzinfo=UTC),
    ]


def test_a_repeated_window_across_the_hour_is_walked_through_once_per_copy() -> None:
    """Chatham falls back from 03:45 +13:45 to 02:45 +12:45 on 2025-04-06, so 02:45-03:45 shows twice.
    cronsim's own zone handling went round the first 03:00-03:30 for ever (a worker at 100 % CPU)."""
    after = dt.datetime(2025, 4, 5, 13, 0, tzinfo=UTC)  # 02:45 +13:45
    chatham = ZoneInfo("Pacific/Chatham")

    def local(expression: str, count: int) -> list[str]:
        timeline = timeline_for(expression, zone="Pacific/Chatham", anchor=after)
        return [
            f.astimezone(chatham).strftime("%d %H:%M%z") for f in upcoming(timeline, after=after, count=count)
        ]

    assert local("*/15 3 * * *", 9) == [
        *["06 03:00+1345", "06 03:15+1345", "06 03:30+1345"],
        *["06 03:00+1245", "06 03:15+1245", "06 03:30+1245", "06 03:45+1245"],
        *["07 03:00+1245", "07 03:15+1245"],
    ]
    # Real time: every minute of both copies of 02:45-02:59 (the hour step must not jump the second).
    every_minute = local("* */2 * * *", 30)
    assert [f for f in every_minute if f.endswith("+1245")] == [
        *[f"06 02:{m}+1245" for m in range(45, 60)],
        "06 04:00+1245",
    ]
    # A specific time runs once, in the first copy.
    assert local("0 3 * * *", 2) == ["06 03:00+1345", "07 03:00+1245"]


# Zones whose changes are unusual: half-hour shifts, :45 offsets, changes at midnight, negative DST.
ODD_ZONES = ["Europe/Paris", "Australia/Lord_Howe", "Pacific/Chatham", "America/Havana", "Africa/Casablanca"]


@pytest.mark.parametrize("zone_name", ODD_ZONES)
def test_around_each_offset_change_it_fires_at_exactly_the_instants_the_clock_gives(zone_name: str) -> None:
    """Every minute and hour field of the property tests, walked across each change of 2025 and compared
    with the zone's clock read minute by minute; asked from between two fires, both directions agree."""
    zone = ZoneInfo(zone_name)
    for change, minute_field, hour_field in itertools.product(_transitions(zone_name, 2025), MINUTES, HOURS):
        expression = f"{minute_field} {hour_field} * * *"
        start, end = change - dt.timedelta(hours=5), change + dt.timedelta(hours=5)
        timeline = timeline_for(expression, zone=zone_name, anchor=start)
        fires = upcoming(timeline, after=start, count=1000, until=end)
        assert set(fires) == _expected_fires(expression, zone, start, end), (expression, change)
        for earlier, later in itertools.pairwise(fires):
            middle = earlier + (later - earlier) / 2
            assert (timeline.at_or_before(middle), timeline.next_after(middle)) == (earlier, later)


def test_hour_steps_across_a_half_hour_change_keep_the_fires_on_the_hour() -> None:
    """Found by the property test: Lord Howe goes from +11:00 to +10:30 at 02:00 on 2020-04-05. cronsim,
    stepping whole hours in real time from before the change, landed on 06:30 and skipped 06:00 and 06:15."""
    timeline = timeline_for(
        "*/15 */6 * */3 0", zone="Australia/Lord_Howe", anchor=dt.datetime(2020, 2, 1, tzinfo=UTC)
    )
    after = dt.datetime(2020, 4, 4, 13, 45, tzinfo=UTC)  # Sunday 00:45 +11:00, the last fire before it
    fires = [
        f.astimezone(timeline.zone).strftime("%H:%M%z") for f in upcoming(timeline, after=after, count=4)
    ]
    assert fires == ["06:00+1030", "06:15+1030", "06:30+1030", "06:45+1030"]
    # The same answer whichever point before the next fire it is asked from.
    assert timeline.next_after(dt.datetime(2020, 4, 4, 16, 52, 30, tzinfo=UTC)) == dt.datetime(
        2020, 4, 4, 19, 30, tzinfo=UTC
    )
