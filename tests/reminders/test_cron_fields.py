"""Cron fields read as Debian cron reads them, compared with an independent field matcher.

The oracle below expands each field the way Debian's `get_range` does (``*``, ``a``, ``a-b``, ``*/s``,
``a-b/s``, lists, month and day names, weekday 7 for Sunday) and walks the calendar itself. cronsim 2.8
read a one-value range with a step (``6-6/2``) as "from 6 to the field's maximum, every 2"; Debian reads
it as ``{6}`` (issue 19, defect 7).
"""

from __future__ import annotations

import datetime as dt
import itertools
from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reminders.schedules.cron import ExpressionError, timeline_for, upcoming

UTC = dt.UTC
MONTH_NAMES = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
DAY_NAMES = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]
# (name, low, high, names, number of the first name) for minute, hour, day of month, month, weekday.
FIELDS = [
    ("minute", 0, 59, [], 0),
    ("hour", 0, 23, [], 0),
    ("day of month", 1, 31, [], 0),
    ("month", 1, 12, MONTH_NAMES, 1),
    ("weekday", 0, 7, DAY_NAMES, 0),
]
START = dt.datetime(2025, 1, 1, tzinfo=UTC)


def _number(token: str, names: list[str], base: int) -> int:
    return names.index(token.upper()) + base if token.upper() in names else int(token)


def debian_values(text: str, low: int, high: int, names: list[str], base: int) -> set[int]:
    """What Debian cron's `get_list`/`get_range` set for one field: each term is ``*`` or ``a`` or
    ``a-b``, optionally followed by ``/step``, and sets every step-th value from its first to its last."""
    values: set[int] = set()
    for term in text.split(","):
        span, _, step = term.partition("/")
        if span == "*":
            first, last = low, high
        else:
            start, _, end = span.partition("-")
            first = _number(start, names, base)
            last = _number(end, names, base) if end else first
        values.update(range(first, last + 1, int(step) if step else 1))
    return values


def debian_fires(expression: str, *, after: dt.datetime, until: dt.datetime, count: int) -> list[dt.datetime]:
    """The first `count` fires in (after, until] in UTC, found by walking days, then hours, then minutes."""
    fields = expression.split()
    minutes, hours, days, months, weekdays = (
        debian_values(text, low, high, names, base)
        for text, (_, low, high, names, base) in zip(fields, FIELDS, strict=True)
    )
    if 7 in weekdays:
        weekdays.add(0)  # Debian: 0 and 7 are both Sunday
    # Debian ANDs the two day fields when either starts with a star, and ORs them otherwise.
    both = fields[2].startswith("*") or fields[4].startswith("*")
    found: list[dt.datetime] = []
    day = after.date()
    while day <= until.date() and len(found) < count:
        in_month, in_week = day.day in days, (day.weekday() + 1) % 7 in weekdays
        if day.month in months and ((in_month and in_week) if both else (in_month or in_week)):
            for hour, minute in itertools.product(sorted(hours), sorted(minutes)):
                fire = dt.datetime(day.year, day.month, day.day, hour, minute, tzinfo=UTC)
                if after < fire <= until and len(found) < count:
                    found.append(fire)
        day += dt.timedelta(days=1)
    return found


def timeline_fires(
    expression: str, *, after: dt.datetime, until: dt.datetime, count: int
) -> list[dt.datetime]:
    timeline = timeline_for(expression, zone="UTC", anchor=after)
    return upcoming(timeline, after=after, count=count, until=until)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # Issue 19: June 1st only, not June, August, October and December.
        ("0 0 1 6-6/2 *", ["2025-06-01 00:00", "2026-06-01 00:00", "2027-06-01 00:00"]),
        ("0 0 1 JUN-JUN/2 *", ["2025-06-01 00:00", "2026-06-01 00:00", "2027-06-01 00:00"]),
        # The 6th of each month, not the 6th, 8th, 10th...
        ("0 0 6-6/2 * *", ["2025-01-06 00:00", "2025-02-06 00:00", "2025-03-06 00:00"]),
        # Wednesdays only: 3-3/1 reached 7 and so took in Thursday to Sunday.
        ("0 0 * * 3-3/1", ["2025-01-08 00:00", "2025-01-15 00:00", "2025-01-22 00:00"]),
        ("0 0 * * wed-wed/4", ["2025-01-08 00:00", "2025-01-15 00:00", "2025-01-22 00:00"]),
        ("0 0 * * 7-7/3", ["2025-01-05 00:00", "2025-01-12 00:00", "2025-01-19 00:00"]),
        ("0 20-20/2 * * *", ["2025-01-01 20:00", "2025-01-02 20:00", "2025-01-03 20:00"]),
        ("40-40/5 * * * *", ["2025-01-01 00:40", "2025-01-01 01:40", "2025-01-01 02:40"]),
        # Beside other terms in a list, and a range whose two ends differ keeps its step.
        ("10-10/5,30-40/5 0 * * *", ["2025-01-01 00:10", "2025-01-01 00:30", "2025-01-01 00:35"]),
    ],
)
def test_it_reads_a_one_value_range_with_a_step_as_that_value(expression: str, expected: list[str]) -> None:
    until = START + dt.timedelta(days=366 * 3)
    fires = timeline_fires(expression, after=START, until=until, count=3)
    assert [f.strftime("%Y-%m-%d %H:%M") for f in fires] == expected
    assert fires == debian_fires(expression, after=START, until=until, count=3)


# A line per field: the field under test in the middle of a line that fires often enough to see it.
TEMPLATES = ["{} * * * *", "0 {} * * *", "0 0 {} * *", "0 0 1 {} *", "0 0 * * {}"]


@pytest.mark.parametrize(
    ("field", "template"), list(zip(FIELDS, TEMPLATES, strict=True)), ids=[f[0] for f in FIELDS]
)
def test_every_value_of_every_field_as_a_one_value_range_with_a_step_is_that_value(
    field: tuple[str, int, int, list[str], int], template: str
) -> None:
    _, low, high, names, _ = field
    until = START + dt.timedelta(days=366 * 9)
    tokens = [str(v) for v in range(low, high + 1)] + names
    for token, step in itertools.product(tokens, (1, 2, 5, 60)):
        stepped = template.format(f"{token}-{token}/{step}")
        if stepped.startswith("0 0 31") or stepped.startswith("0 0 30"):
            until_here = START + dt.timedelta(days=366 * 2)
        else:
            until_here = until
        fires = timeline_fires(stepped, after=START, until=until_here, count=6)
        assert fires == timeline_fires(template.format(token), after=START, until=until_here, count=6), (
            stepped
        )
        assert fires == debian_fires(stepped, after=START, until=until_here, count=6), stepped


def test_a_zero_step_is_still_refused() -> None:
    with pytest.raises(ExpressionError, match="invalid crontab"):
        timeline_for("0 0 6-6/0 * *", zone="UTC", anchor=START)


@cache
def _terms(index: int) -> st.SearchStrategy[str]:
    """One term of field `index`: a value, a one-value range with a step, a range, a stepped range; each
    number spelled as a number or, where the field has names, as its name in either case. Built once per
    field: the spellings are looked up, not made into a new strategy at every draw."""
    _, low, high, names, base = FIELDS[index]

    def spelled(value: int) -> list[str]:
        named = names[value - base] if 0 <= value - base < len(names) else None
        return [str(value), named, named.lower()] if named else [str(value)]

    spellings = {value: st.sampled_from(spelled(value)) for value in range(low, high + 1)}
    token = spellings.__getitem__
    value = st.integers(low, high)
    step = st.integers(1, high + 1).map(str)
    single = value.flatmap(token)
    same = st.tuples(value.flatmap(lambda v: st.tuples(token(v), token(v))), step).map(
        lambda t: f"{t[0][0]}-{t[0][1]}/{t[1]}"
    )
    ordered = st.tuples(value, value).map(sorted)
    span = ordered.flatmap(lambda ab: st.tuples(token(ab[0]), token(ab[1]))).map("-".join)
    stepped_span = st.tuples(span, step).map("/".join)
    return st.one_of(single, same, same, span, stepped_span)


@st.composite
def field_texts(draw: st.DrawFn, index: int) -> str:
    high = FIELDS[index][2]
    if draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(["*", f"*/{draw(st.integers(1, high))}"]))
    return ",".join(draw(st.lists(_terms(index), min_size=1, max_size=3)))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fields=st.tuples(*(field_texts(i) for i in range(5))),
    start=st.datetimes(dt.datetime(2025, 1, 1), dt.datetime(2030, 1, 1), timezones=st.just(UTC)),
)
def test_it_fires_where_debian_cron_would(fields: tuple[str, ...], start: dt.datetime) -> None:
    expression = " ".join(fields)
    until = start + dt.timedelta(days=366 * 4)
    expected = debian_fires(expression, after=start, until=until, count=8)
    try:
        fires = timeline_fires(expression, after=start, until=until, count=8)
    except ExpressionError:
        # Refused by cronsim's parse: a day that none of the chosen months has (so nothing in 28 years, the
        # calendar's cycle of dates and weekdays).
        assert not debian_fires(expression, after=START, until=START + dt.timedelta(days=366 * 28), count=1)
        return
    assert fires == expected, expression


def test_the_oracle_reads_ranges_and_steps_as_debian_does() -> None:
    """The matcher's own reading of the fields, pinned on examples from crontab(5)."""
    assert debian_values("0-23/2", 0, 23, [], 0) == set(range(0, 24, 2))
    assert debian_values("*/15", 0, 59, [], 0) == {0, 15, 30, 45}
    assert debian_values("1-5,7", 0, 7, DAY_NAMES, 0) == {1, 2, 3, 4, 5, 7}
    assert debian_values("6-6/2", 1, 12, MONTH_NAMES, 1) == {6}
    assert debian_values("mon-fri", 0, 7, DAY_NAMES, 0) == {1, 2, 3, 4, 5}
