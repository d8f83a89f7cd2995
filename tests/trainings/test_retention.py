"""Pushes, reminder runs and delivered-push keys are purged past their own retention, newer ones stay."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from delivery.models import PushSend, SendStatus
from trainings.models import Coach, CoachPush, Player, Push, ReminderRun, RunOutcome, Team
from trainings.planning.writes import training_create
from trainings.retention import trainings_purge_old

pytestmark = [pytest.mark.django_db]


def test_each_kind_goes_after_its_own_age_and_newer_rows_stay(team: Team) -> None:
    now = timezone.now()
    training = training_create(
        team=team, title="Old", start=now + dt.timedelta(days=1), end=now + dt.timedelta(days=1, hours=1),
        time_zone="Europe/Paris", location="Stadium",
    )  # fmt: skip
    player = Player.objects.filter(memberships__team=team).first()
    assert player is not None

    def push(key: str, age_days: float) -> None:
        Push.objects.create(
            key=key, occurrence_key=key, training=training, player=player, kind="PRE", language="en",
            title="t", body="b", fire_at=now - dt.timedelta(days=age_days),
        )  # fmt: skip

    def run(key: str, age_days: float) -> None:
        ReminderRun.objects.create(
            occurrence_key=key, training=training, fire_at=now, outcome=RunOutcome.choices[0][0],
            ran_at=now - dt.timedelta(days=age_days),
        )  # fmt: skip

    def coach_push(key: str, age_days: float) -> None:
        CoachPush.objects.create(
            key=key, occurrence_key=key, coach=coach, team=team, training=training, kind="DIGEST",
            language="en", title="t", body="b", status="sent", fire_at=now - dt.timedelta(days=age_days),
        )  # fmt: skip

    coach = Coach.objects.create(user=team.coaches.get())
    push("push-old", 31)
    push("push-new", 29)
    coach_push("coach-old", 31)
    coach_push("coach-new", 29)
    run("run-old", 91)
    run("run-new", 89)
    # The gateway's send records (which also say which pushes are finished) are kept, however old.
    PushSend.objects.create(push_key="stale-old", provider="", status=SendStatus.STALE, attempts=0,
                            recorded_at=now - dt.timedelta(days=400))  # fmt: skip

    assert trainings_purge_old(now=now) == {
        "push": 1,
        "coach_push": 1,
        "reminder_run": 1,
    }

    assert list(Push.objects.values_list("key", flat=True)) == ["push-new"]
    assert list(ReminderRun.objects.values_list("occurrence_key", flat=True)) == ["run-new"]
    assert list(PushSend.objects.values_list("push_key", flat=True)) == ["stale-old"]
    assert list(CoachPush.objects.values_list("key", flat=True)) == ["coach-new"]
    assert trainings_purge_old(now=now) == {
        "push": 0,
        "coach_push": 0,
        "reminder_run": 0,
    }


def test_beat_runs_the_purge_hourly() -> None:
    task = PeriodicTask.objects.get(name="trainings: purge old pushes")
    assert task.task == "trainings.tasks.purge_old"
    assert (task.interval.every, task.interval.period) == (1, "hours")
