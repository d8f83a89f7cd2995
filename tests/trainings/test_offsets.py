"""Each rule gives exactly seed 000's instants; days are wall-clock days in the training's zone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.factories import TrainingFactory
from trainings.models import ReminderRule
from trainings.planning.offsets import Offset, OffsetError, parse_offsets


def _utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.fixture
def training():
    # Tuesday 2030-06-11 18:00-19:30 Paris (CEST, UTC+2): no DST change anywhere near.
    return TrainingFactory.build(start=_utc(2030, 6, 11, 16), end=_utc(2030, 6, 11, 17, 30))


def _instants(rule: ReminderRule, training) -> list[datetime]:
    return [instant for instant, _ in rule.instants_for(training)]


def test_it_gives_the_pre_questionnaire_instants(rules, training) -> None:
    expected = [training.start - timedelta(minutes=m) for m in (90, 75, 60, 45, 30, 15)]
    assert _instants(rules["pre-questionnaire"], training) == expected


def test_it_gives_the_post_questionnaire_instants_after_the_end(rules, training) -> None:
    expected = [training.end + timedelta(minutes=m) for m in range(15, 181, 15)]
    assert _instants(rules["post-questionnaire"], training) == expected
    assert len(expected) == 12


def test_it_gives_the_invitation_instants(rules, training) -> None:
    assert _instants(rules["invitation"], training) == [
        _utc(2030, 6, 8, 16),
        _utc(2030, 6, 9, 16),
        _utc(2030, 6, 10, 16),
        _utc(2030, 6, 11, 10),
    ]


def test_it_keeps_one_day_before_at_the_same_paris_wall_time_after_spring_forward(rules) -> None:
    # Clocks go 02:00 CET -> 03:00 CEST on Sunday 2026-03-29. Training Monday 30 March 10:00 Paris (08:00Z).
    training = TrainingFactory.build(
        start=_utc(2026, 3, 30, 8), end=_utc(2026, 3, 30, 9, 30), time_zone="Europe/Paris"
    )
    assert _instants(rules["invitation"], training) == [
        _utc(2026, 3, 27, 9),  # 3 d: Friday 10:00 CET
        _utc(2026, 3, 28, 9),  # 2 d: Saturday 10:00 CET, 47 real hours before the start
        _utc(2026, 3, 29, 8),  # 1 d: Sunday 10:00 CEST, the documented instant
        _utc(2026, 3, 30, 2),  # 6 h: exact duration
    ]


def test_it_keeps_the_wall_time_across_fall_back(rules) -> None:
    # Clocks go 03:00 CEST -> 02:00 CET on Sunday 2026-10-25. Training Monday 26 October 10:00 Paris (09:00Z).
    training = TrainingFactory.build(
        start=_utc(2026, 10, 26, 9), end=_utc(2026, 10, 26, 10), time_zone="Europe/Paris"
    )
    assert _instants(rules["invitation"], training)[:3] == [
        _utc(2026, 10, 23, 8),  # Friday 10:00 CEST
        _utc(2026, 10, 24, 8),  # Saturday 10:00 CEST, 49 real hours before
        _utc(2026, 10, 25, 9),  # Sunday 10:00 CET
    ]


def test_it_moves_a_wall_time_in_the_gap_forward(rules) -> None:
    # Monday 2026-03-30 02:30 CEST; "1 day before" would be Sunday 02:30, which does not exist in Paris.
    training = TrainingFactory.build(start=_utc(2026, 3, 30, 0, 30), end=_utc(2026, 3, 30, 1, 30))
    one_day = dict((str(o), i) for i, o in rules["invitation"].instants_for(training))["1d"]
    assert one_day == _utc(2026, 3, 29, 1, 30)  # 03:30 CEST


def test_minutes_stay_exact_durations_across_the_change(rules) -> None:
    # Sunday 2026-03-29 03:30 CEST (01:30Z): 90 real minutes before is 00:00Z (01:00 CET, 2.5 h on the clock).
    training = TrainingFactory.build(start=_utc(2026, 3, 29, 1, 30), end=_utc(2026, 3, 29, 3))
    assert _instants(rules["pre-questionnaire"], training)[0] == _utc(2026, 3, 29, 0)


@pytest.mark.parametrize("text", ["", "0m", "90", "1w", "-5m", "31d", "90 m", "1.5h"])
def test_it_refuses_bad_offsets(text: str) -> None:
    with pytest.raises(OffsetError):
        Offset.parse(text)


def test_it_parses_and_deduplicates() -> None:
    assert [str(o) for o in parse_offsets(["3d", "6h", "90m", "6h"])] == ["90m", "6h", "3d"]
