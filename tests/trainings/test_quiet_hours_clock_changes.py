"""Quiet hours on the nights clocks change: each night's window is one continuous stretch of real time,
from the first moment the clock shows its start to the last moment it shows a time before its end, and a
held push always has its release in its future. Checked against a minute-by-minute oracle in four zones,
both directions (Lord Howe moves by 30 minutes, Chatham at 02:45), then through the fire path."""

from __future__ import annotations

import datetime as dt
import json
from zoneinfo import ZoneInfo

import pytest

from reminders.models import Occurrence
from reminders.transports import Delivery
from tests.conftest import drain_queue
from tests.trainings import quiet_oracle
from tests.trainings.conftest import fire
from trainings.models import Push, PushStatus, ReminderRule, Team, Training
from trainings.planning.scheduling import HANDLER_NAME
from trainings.planning.writes import training_create
from trainings.reminding.firing import reminder_fire
from trainings.reminding.held import quiet_release_key
from trainings.reminding.quiet import QuietHours
from trainings.selectors import job_key

UTC = dt.UTC
ZONES = ["Europe/Paris", "America/New_York", "Australia/Lord_Howe", "Pacific/Chatham"]


def _changes() -> list[tuple[str, str, dt.datetime]]:
    cases = []
    for name in ZONES:
        zone = ZoneInfo(name)
        for at in quiet_oracle.transitions(zone, 2027):
            before = (at - dt.timedelta(minutes=1)).astimezone(zone).utcoffset()
            direction = "forward" if at.astimezone(zone).utcoffset() > before else "back"
            cases.append((name, direction, at))
    return cases


CHANGES = _changes()


def test_every_zone_changes_its_clocks_both_ways_in_2027() -> None:
    assert sorted((name, direction) for name, direction, _ in CHANGES) == sorted(
        (name, direction) for name in ZONES for direction in ("back", "forward")
    )


def _changed_walls(zone: ZoneInfo, at: dt.datetime) -> tuple[dt.time, dt.time]:
    """The middle of the hour (or half hour) the change skips or repeats, and one minute into it."""
    before = (at - dt.timedelta(minutes=1)).astimezone(zone).replace(tzinfo=None) + dt.timedelta(minutes=1)
    after = at.astimezone(zone).replace(tzinfo=None)
    low, high = min(before, after), max(before, after)
    return (low + (high - low) / 2).time(), (low + dt.timedelta(minutes=1)).time()


@pytest.mark.parametrize(("name", "direction", "at"), CHANGES, ids=[f"{n}-{d}" for n, d, _ in CHANGES])
def test_windows_that_start_or_end_in_the_changed_hour_match_the_oracle(
    name: str, direction: str, at: dt.datetime
) -> None:
    zone = ZoneInfo(name)
    middle, early = _changed_walls(zone, at)
    since, until = at - dt.timedelta(hours=30), at + dt.timedelta(hours=30)
    for start, end in [
        (dt.time(22), middle),  # ends in it
        (middle, dt.time(7)),  # starts in it
        (early, middle),  # starts and ends in it
        (dt.time(20, 30), dt.time(6, 45)),  # spans it
        (dt.time(22), early.replace(minute=early.minute - 1)),  # ends at its first minute
    ]:
        quiet = QuietHours(start, end, zone)
        expected = quiet_oracle.windows(start, end, zone, since, until)
        for night, window in expected.items():
            if since < window[0] and window[1] < until:  # whole nights only
                assert quiet.window(night) == window, (start, end, night)
        instant = since + dt.timedelta(hours=1)
        while instant < until - dt.timedelta(hours=1):
            release = quiet.release_at(instant)
            assert release == quiet_oracle.release(instant, expected), (start, end, instant)
            assert release is None or release > instant
            instant += dt.timedelta(minutes=5)


def test_a_push_fired_in_the_second_copy_of_the_hour_is_released_at_the_second_copy_of_the_end() -> None:
    paris = ZoneInfo("Europe/Paris")
    quiet = QuietHours(dt.time(22), dt.time(2, 30), paris)
    second_copy = dt.datetime(2027, 10, 31, 1, 15, tzinfo=UTC)  # 02:15 CET, after 02:15 CEST
    assert quiet.release_at(second_copy) == dt.datetime(2027, 10, 31, 1, 30, tzinfo=UTC)  # 02:30 CET
    first_copy_after_end = dt.datetime(2027, 10, 31, 0, 45, tzinfo=UTC)  # 02:45 CEST: still the same night
    assert quiet.release_at(first_copy_after_end) == dt.datetime(2027, 10, 31, 1, 30, tzinfo=UTC)


def test_a_window_starting_in_the_repeated_hour_is_not_cut_in_two() -> None:
    quiet = QuietHours(dt.time(2, 30), dt.time(7), ZoneInfo("Europe/Paris"))
    for minute in range(0, 5 * 60, 5):  # 02:30 CEST (00:30 UTC) to 07:00 CET (06:00 UTC), all held
        instant = dt.datetime(2027, 10, 31, 0, 30, tzinfo=UTC) + dt.timedelta(minutes=minute)
        assert quiet.release_at(instant) == dt.datetime(2027, 10, 31, 6, tzinfo=UTC), instant


def test_an_end_at_the_first_repeated_time_is_its_first_copy() -> None:
    # 02:00 is shown twice on 2025-10-26 in Paris, but 01:59 only once: the window ends at 02:00 CEST.
    quiet = QuietHours(dt.time(22), dt.time(2), ZoneInfo("Europe/Paris"))
    assert quiet.release_at(dt.datetime(2025, 10, 25, 23, 30, tzinfo=UTC)) == dt.datetime(
        2025, 10, 26, 0, tzinfo=UTC
    )


def test_a_release_that_opens_the_next_nights_window_moves_to_its_end() -> None:
    # 03:00-02:59 on the night 02:00 jumps to 03:00: the window ends at the jump, where the next begins.
    quiet = QuietHours(dt.time(3), dt.time(2, 59), ZoneInfo("Europe/Paris"))
    release = quiet.release_at(dt.datetime(2025, 3, 29, 23, 31, tzinfo=UTC))
    assert release == dt.datetime(2025, 3, 31, 0, 59, tzinfo=UTC)  # 02:59 CEST the next night
    assert quiet.release_at(release) is None


def test_a_window_ending_in_a_skipped_hour_ends_at_the_jump() -> None:
    quiet = QuietHours(dt.time(22), dt.time(2, 30), ZoneInfo("America/New_York"))
    jump = dt.datetime(2027, 3, 14, 7, tzinfo=UTC)  # 02:00 EST -> 03:00 EDT
    assert quiet.release_at(dt.datetime(2027, 3, 14, 6, 45, tzinfo=UTC)) == jump
    assert quiet.release_at(jump) is None  # 03:00 EDT: the clock is past 02:30


# --- Through the fire path -------------------------------------------------------------------------------


def _training(team: Team, start: dt.datetime, zone: str) -> Training:
    team.players.update(time_zone=zone)  # quiet hours are read in each player's zone
    return training_create(team=team, title="Night owls", start=start, end=start + dt.timedelta(hours=1),
                           time_zone=zone)  # fmt: skip


def _fire_pre(training: Training, rules: dict[str, ReminderRule], minutes: int) -> None:
    rule = rules["pre-questionnaire"]
    at = training.start - dt.timedelta(minutes=minutes)
    occurrence = Occurrence.objects.get(job__key=job_key(training_id=training.pk, rule=rule), fire_at=at)
    payload = {"training": str(training.pk), "rule": rule.pk}
    reminder_fire(delivery=Delivery(occurrence.pk, occurrence.idempotency_key, occurrence.job.key, at, 1,
                                    HANDLER_NAME, payload))  # fmt: skip


def _release(training: Training, rules: dict[str, ReminderRule], at: dt.datetime) -> None:
    key = quiet_release_key(training_id=training.pk, rule=rules["pre-questionnaire"])
    fire(Occurrence.objects.get(job__key=key, fire_at=at))


def _statuses(training: Training) -> dict[str, tuple[str, dt.datetime | None]]:
    return {p.offset: (p.status, p.release_at) for p in Push.objects.filter(training=training)}


@pytest.mark.rabbitmq
def test_a_reminder_in_the_second_copy_of_the_hour_is_held_until_after_it_fired_then_released(
    team: Team, rules: dict[str, ReminderRule], push_queue: str
) -> None:
    team.quiet_start, team.quiet_end = dt.time(22), dt.time(2, 30)
    team.save()
    # 03:15 CET on 2027-10-31: the 75 and 60 min reminders fire at 02:00 and 02:15 CET (second copies).
    training = _training(team, dt.datetime(2027, 10, 31, 2, 15, tzinfo=UTC), "Europe/Paris")
    second_end = dt.datetime(2027, 10, 31, 1, 30, tzinfo=UTC)  # 02:30 CET

    _fire_pre(training, rules, 75)
    _fire_pre(training, rules, 60)

    assert _statuses(training) == {"75m": (PushStatus.HELD, second_end), "60m": (PushStatus.HELD, second_end)}
    assert {p.fire_at < p.release_at for p in Push.objects.all()} == {True}
    _release(training, rules, second_end)
    assert {status for status, _ in _statuses(training).values()} == {PushStatus.SENT}
    assert len(drain_queue(push_queue, expect=6)) == 6


@pytest.mark.rabbitmq
def test_reminders_after_a_spring_forward_jump_never_overtake_one_still_held(
    team: Team, rules: dict[str, ReminderRule], push_queue: str
) -> None:
    team.quiet_start, team.quiet_end = dt.time(22), dt.time(2, 30)
    team.save()
    # New York, 2027-03-14: 02:00 EST -> 03:00 EDT at 07:00 UTC. Start 04:15 EDT: the 90 fires at 01:45
    # EST (held), the 75 at 03:00 EDT, the jump, when the window is over by the clock.
    training = _training(team, dt.datetime(2027, 3, 14, 8, 15, tzinfo=UTC), "America/New_York")
    jump = dt.datetime(2027, 3, 14, 7, tzinfo=UTC)

    _fire_pre(training, rules, 90)
    _fire_pre(training, rules, 75)  # the 90's release has not run yet: the 75 waits behind it

    held = _statuses(training)
    assert held["90m"] == (PushStatus.HELD, jump)
    assert held["75m"][0] == PushStatus.HELD and held["75m"][1] > jump
    assert drain_queue(push_queue) == []
    _release(training, rules, jump)
    _release(training, rules, held["75m"][1])
    bodies = [json.loads(m.body) for m in drain_queue(push_queue, expect=6)]
    order = [Push.objects.get(key=b["idempotency_key"]).offset for b in bodies]
    assert order == ["90m"] * 3 + ["75m"] * 3  # fire order
    _fire_pre(training, rules, 60)
    assert {status for status, _ in _statuses(training).values()} == {PushStatus.SENT}


@pytest.mark.rabbitmq
def test_a_reminder_in_the_repeated_hour_of_a_window_starting_there_is_held(
    team: Team, rules: dict[str, ReminderRule], push_queue: str
) -> None:
    team.quiet_start, team.quiet_end = dt.time(2, 30), dt.time(7)
    team.save()
    # Paris 2027-10-31, start 03:45 CET: the 90 fires at 02:15 CET, after 02:30 CEST began the window.
    training = _training(team, dt.datetime(2027, 10, 31, 2, 45, tzinfo=UTC), "Europe/Paris")
    _fire_pre(training, rules, 90)
    statuses = {status for status, _ in _statuses(training).values()}
    assert statuses == {PushStatus.SKIPPED}  # held until 07:00 CET, after the start: of no use
    assert drain_queue(push_queue) == []
