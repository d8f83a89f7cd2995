"""A training moved after some of its reminders went out: the players already reminded get one "training
moved" push with the new local time, and a reminder offset they already had is not repeated for the new
time, unless the move is large (TRAININGS_MOVE_REPEAT_MINUTES). Moves before, between and after reminders."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from reminders.models import Occurrence
from tests.conftest import drain_queue
from tests.trainings.conftest import fire
from trainings import kinds
from trainings.models import Push, PushStatus, ReminderRule, ReminderRun, RunOutcome, Team, Training
from trainings.selectors import job_key
from trainings.services import moved_notice_key, training_create, training_update

pytestmark = pytest.mark.rabbitmq

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)  # 18:00 in Paris


@pytest.fixture
def training(team: Team, push_queue: str) -> Training:
    end = START + dt.timedelta(minutes=90)
    return training_create(team=team, title="Speed session", start=START, end=end, time_zone="Europe/Paris")


def _pre(training: Training, rules: dict[str, ReminderRule], minutes: int) -> Occurrence:
    at = training.start - dt.timedelta(minutes=minutes)
    return Occurrence.objects.get(job__key=job_key(training_id=training.pk, rule=rules["pre-questionnaire"]),
                                  fire_at=at)  # fmt: skip


def _move(training: Training, minutes: int) -> Training:
    delta = dt.timedelta(minutes=minutes)
    return training_update(training=training, start=training.start + delta, end=training.end + delta)


def _notice(training: Training) -> Occurrence:
    return Occurrence.objects.filter(job__key=moved_notice_key(training_id=training.pk)).latest("id")


def test_a_move_between_reminders_sends_one_moved_push_and_repeats_no_offset(
    training: Training, rules: dict[str, ReminderRule], push_queue: str
) -> None:
    fire(_pre(training, rules, 90))
    assert len(drain_queue(push_queue, expect=3)) == 3

    training = _move(training, 20)  # 18:20 Paris: the 90-min reminder would come again at 16:50
    fire(_notice(training))

    moved = [json.loads(m.body) for m in drain_queue(push_queue, expect=3)]
    assert {m["kind"] for m in moved} == {kinds.MOVED.code}
    by_language = {m["language"]: m for m in moved}
    assert (
        by_language["en"]["body"] == "Speed session now starts on June 11, 2030 at 6:20 p.m. (Europe/Paris)."
    )
    assert by_language["fr"]["title"] == "Entraînement déplacé : Speed session"

    fire(_pre(training, rules, 90))  # the new 90-min instant: everyone had "90 min before" already
    assert drain_queue(push_queue) == []
    run = ReminderRun.objects.get(occurrence_key=_pre(training, rules, 90).idempotency_key)
    assert run.outcome == RunOutcome.NOBODY_LEFT
    fire(_pre(training, rules, 75))  # the next offset goes out as usual
    assert len(drain_queue(push_queue, expect=3)) == 3
    assert Push.objects.filter(kind=kinds.MOVED.code).count() == 3


def test_a_large_move_reminds_again(
    training: Training, rules: dict[str, ReminderRule], push_queue: str, settings: Any
) -> None:
    settings.TRAININGS_MOVE_REPEAT_MINUTES = 120
    fire(_pre(training, rules, 90))
    drain_queue(push_queue, expect=3)
    training = _move(training, 24 * 60)  # to the next day
    fire(_notice(training))
    assert len(drain_queue(push_queue, expect=3)) == 3  # the moved notices
    fire(_pre(training, rules, 90))
    assert len(drain_queue(push_queue, expect=3)) == 3  # a day later, "90 min before" is worth repeating


def test_a_move_before_any_reminder_notifies_nobody(
    training: Training, rules: dict[str, ReminderRule], push_queue: str
) -> None:
    training = _move(training, 30)
    fire(_notice(training))
    assert drain_queue(push_queue) == []
    fire(_pre(training, rules, 90))
    assert len(drain_queue(push_queue, expect=3)) == 3


def test_a_move_after_the_last_reminder_notifies_everyone_reminded_once(
    training: Training, rules: dict[str, ReminderRule], push_queue: str
) -> None:
    for minutes in (90, 75, 60, 45, 30, 15):
        fire(_pre(training, rules, minutes))
    assert len(drain_queue(push_queue, expect=18)) == 18
    training = _move(training, 10)
    fire(_notice(training))
    assert len(drain_queue(push_queue, expect=3)) == 3  # one per player, not one per reminder they had
    for minutes in (90, 75, 60, 45, 30, 15):
        fire(_pre(training, rules, minutes))
    assert drain_queue(push_queue) == []  # every offset already given, the move is small


def test_a_notice_superseded_by_a_newer_move_sends_nothing(
    training: Training, rules: dict[str, ReminderRule], push_queue: str
) -> None:
    fire(_pre(training, rules, 90))
    drain_queue(push_queue, expect=3)
    first = _move(training, 10)
    notice = _notice(first)
    training_update(training=first, title="Renamed")  # not a move: no new notice
    assert _notice(first).pk == notice.pk
    second = _move(first, 10)
    assert Occurrence.objects.get(pk=notice.pk).status == "cancelled"  # replaced by the newer move's notice
    fire(_notice(second))
    assert len(drain_queue(push_queue, expect=3)) == 3
    assert Push.objects.filter(kind=kinds.MOVED.code, status=PushStatus.SENT).count() == 3
