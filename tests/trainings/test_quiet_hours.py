"""Quiet hours: a reminder that falls inside a player's quiet window (theirs, else the team's, in their
zone) is held until the window ends and then released after asking again who is still pending; it is
skipped, with the reason recorded, when the window ends after the push is of any use. The window is
wall-clock time, so it is shorter or longer in real time on the nights the clocks change."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from reminders.models import Occurrence
from reminders.transports import Delivery
from tests.conftest import drain_queue
from tests.factories import WELLNESS
from tests.trainings.conftest import fire
from trainings.models import Push, PushStatus, ReminderRule, Team, Training
from trainings.planning import kinds
from trainings.planning.scheduling import HANDLER_NAME
from trainings.planning.writes import answer_record, training_create
from trainings.reminding.firing import reminder_fire
from trainings.reminding.held import quiet_release_key
from trainings.reminding.quiet import QuietHours
from trainings.selectors import job_key

PARIS = ZoneInfo("Europe/Paris")
UTC = dt.UTC


@pytest.mark.parametrize(
    ("instant", "release"),
    [
        # 2027-03-28: clocks go 02:00 -> 03:00 in Paris; 22:00 CET to 07:00 CEST is 8 hours.
        (dt.datetime(2027, 3, 27, 21, 30, tzinfo=UTC), dt.datetime(2027, 3, 28, 5, tzinfo=UTC)),
        (dt.datetime(2027, 3, 28, 4, 59, tzinfo=UTC), dt.datetime(2027, 3, 28, 5, tzinfo=UTC)),
        (dt.datetime(2027, 3, 28, 5, 0, tzinfo=UTC), None),  # 07:00 CEST: the window is over
        # 2027-10-31: clocks go 03:00 -> 02:00; 22:00 CEST to 07:00 CET is 10 hours.
        (dt.datetime(2027, 10, 30, 20, 0, tzinfo=UTC), dt.datetime(2027, 10, 31, 6, tzinfo=UTC)),
        (dt.datetime(2027, 10, 30, 19, 59, tzinfo=UTC), None),  # 21:59 CEST: not yet
        (dt.datetime(2027, 6, 1, 12, tzinfo=UTC), None),
    ],
)
def test_the_window_is_wall_clock_time_in_the_players_zone(
    instant: dt.datetime, release: dt.datetime | None
) -> None:
    assert QuietHours(dt.time(22), dt.time(7), PARIS).release_at(instant) == release


def test_a_window_that_does_not_cross_midnight() -> None:
    quiet = QuietHours(dt.time(12), dt.time(14), PARIS)
    assert quiet.release_at(dt.datetime(2027, 6, 1, 10, 30, tzinfo=UTC)) == dt.datetime(
        2027, 6, 1, 12, tzinfo=UTC
    )
    assert quiet.release_at(dt.datetime(2027, 6, 1, 12, 30, tzinfo=UTC)) is None


@pytest.fixture
def quiet_team(team: Team) -> Team:
    team.quiet_start, team.quiet_end = dt.time(22), dt.time(7)
    team.save()
    return team


def _fire_pre_90(training: Training, rules: dict[str, ReminderRule]) -> None:
    rule = rules["pre-questionnaire"]
    at = training.start - dt.timedelta(minutes=90)
    occurrence = Occurrence.objects.get(job__key=job_key(training_id=training.pk, rule=rule), fire_at=at)
    payload = {"training": str(training.pk), "rule": rule.pk}
    reminder_fire(delivery=Delivery(occurrence.pk, occurrence.idempotency_key, occurrence.job.key, at, 1,
                                    HANDLER_NAME, payload))  # fmt: skip


@pytest.mark.rabbitmq
def test_a_reminder_in_quiet_hours_is_held_then_released_to_those_still_pending(
    quiet_team: Team, rules: dict[str, ReminderRule], push_queue: str
) -> None:
    bruno = quiet_team.players.get(name="Bruno")
    bruno.quiet_start, bruno.quiet_end = dt.time(23), dt.time(5)  # his own window is over by 06:00
    bruno.save()
    start = dt.datetime(2027, 3, 28, 5, 30, tzinfo=UTC)  # 07:30 CEST, the morning the clocks went forward
    training = training_create(team=quiet_team, title="Early session", start=start,
                               end=start + dt.timedelta(hours=1), time_zone="Europe/Paris")  # fmt: skip

    _fire_pre_90(training, rules)  # 06:00 CEST: inside the team's 22:00-07:00

    pushes = {p.player.name: p for p in Push.objects.select_related("player")}
    assert pushes["Bruno"].status == PushStatus.SENT
    for name in ("Alice", "Chloe"):
        assert pushes[name].status == PushStatus.HELD
        assert pushes[name].release_at == dt.datetime(2027, 3, 28, 5, tzinfo=UTC)  # 07:00 CEST
        assert "quiet hours until 2027-03-28 07:00 Europe/Paris" in pushes[name].status_reason
    assert [json.loads(m.body)["player"] for m in drain_queue(push_queue, expect=1)] == [bruno.pk]

    release = Occurrence.objects.get(
        job__key=quiet_release_key(training_id=training.pk, rule=rules["pre-questionnaire"])
    )
    assert release.fire_at == dt.datetime(2027, 3, 28, 5, tzinfo=UTC)
    alice = quiet_team.players.get(name="Alice")
    answer_record(
        training=training, player=alice, phase=kinds.PRE.code, answers=WELLNESS
    )  # answered overnight

    assert fire(release).delivered == 1

    statuses = dict(Push.objects.values_list("player__name", "status"))
    assert statuses == {"Alice": PushStatus.WITHDRAWN, "Bruno": PushStatus.SENT, "Chloe": PushStatus.SENT}
    [message] = drain_queue(push_queue, expect=1)
    assert json.loads(message.body)["player"] == quiet_team.players.get(name="Chloe").pk


@pytest.mark.rabbitmq
def test_a_reminder_whose_quiet_hours_end_after_the_start_is_skipped_with_the_reason(
    quiet_team: Team, rules: dict[str, ReminderRule], push_queue: str
) -> None:
    start = dt.datetime(2027, 3, 28, 4, 30, tzinfo=UTC)  # 06:30 CEST: the window ends after the start
    training = training_create(team=quiet_team, title="Dawn session", start=start,
                               end=start + dt.timedelta(hours=1), time_zone="Europe/Paris")  # fmt: skip

    _fire_pre_90(training, rules)  # 05:00 CEST

    skipped = list(Push.objects.values_list("status", "status_reason"))
    assert len(skipped) == 3 and {status for status, _ in skipped} == {PushStatus.SKIPPED}
    assert all(
        "quiet hours 22:00-07:00 Europe/Paris end at 2027-03-28 07:00" in reason for _, reason in skipped
    )
    assert drain_queue(push_queue) == []
    assert not Occurrence.objects.filter(job__key__startswith="trainings-quiet-release-").exists()


def test_without_quiet_hours_nothing_is_held(
    team: Team, rules: dict[str, ReminderRule], settings: Any
) -> None:
    settings.TRAININGS_PUSH_QUEUE = "unused"
    start = dt.datetime(2027, 3, 28, 4, 30, tzinfo=UTC)
    training = training_create(team=team, title="Dawn", start=start, end=start + dt.timedelta(hours=1),
                               time_zone="Europe/Paris")  # fmt: skip
    from trainings.reminding.notices import quiet_status as _quiet_status

    player = team.players.get(name="Alice")
    assert _quiet_status(player, training, start - dt.timedelta(minutes=90), start) == (
        PushStatus.PENDING,
        None,
        "",
    )
