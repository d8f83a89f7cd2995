"""The invariant behind quiet hours: nothing stays held past its release plus a grace. The hourly task
releases what a lost release job left held (or skips it with the reason when it is of no use any more),
and counts it in trainings_held_pushes_overdue_total, which the HeldPushesOverdue alert watches."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone
from prometheus_client import REGISTRY

from reminders.models import Occurrence
from tests.conftest import drain_queue
from tests.trainings.conftest import fire
from trainings.models import Push, PushStatus, ReminderRule, Team, Training
from trainings.planning.writes import training_create
from trainings.reminding.held import held_pushes_overdue_check
from trainings.selectors import job_key
from trainings.tasks import purge_old

pytestmark = pytest.mark.rabbitmq


def _overdue(action: str) -> float:
    return REGISTRY.get_sample_value("trainings_held_pushes_overdue_total", {"action": action}) or 0.0


def _held_training(team: Team, rules: dict[str, ReminderRule], start: dt.datetime) -> Training:
    """A training whose 90-minute reminder is held for the team's quiet hours around it."""
    paris = dt.timezone(dt.timedelta(hours=1))
    fire_at = start - dt.timedelta(minutes=90)
    team.quiet_start = (fire_at - dt.timedelta(minutes=30)).astimezone(paris).time()
    team.quiet_end = (fire_at + dt.timedelta(minutes=45)).astimezone(paris).time()
    team.save()
    team.players.update(time_zone="Etc/GMT-1")  # a fixed UTC+1: no clock change in the way
    # Not under test: the invitation a training this close sends at its creation (test_late_invitation.py).
    ReminderRule.objects.filter(pk=rules["invitation"].pk).update(active=False)
    training = training_create(team=team, title="Held", start=start, end=start + dt.timedelta(hours=1),
                               time_zone="Europe/Paris")  # fmt: skip
    rule = rules["pre-questionnaire"]
    fire(Occurrence.objects.get(job__key=job_key(training_id=training.pk, rule=rule), fire_at=fire_at))
    assert {p.status for p in Push.objects.filter(training=training)} == {PushStatus.HELD}
    return training


def test_a_push_held_past_its_release_is_released_by_the_hourly_task_and_counted(
    team: Team, rules: dict[str, ReminderRule], push_queue: str, settings: Any
) -> None:
    settings.TRAININGS_HELD_GRACE_SECONDS = 300
    training = _held_training(team, rules, timezone.now() + dt.timedelta(hours=3))
    # The release job is lost, and the release instant passed ten minutes ago.
    Occurrence.objects.filter(job__key__startswith="trainings-quiet-release-").delete()
    Push.objects.filter(training=training).update(release_at=timezone.now() - dt.timedelta(minutes=10))
    before = _overdue("released")

    purge_old()

    assert {p.status for p in Push.objects.filter(training=training)} == {PushStatus.SENT}
    assert len(drain_queue(push_queue, expect=3)) == 3
    assert _overdue("released") - before == 3


def test_a_push_within_the_grace_is_left_to_its_release_job(
    team: Team, rules: dict[str, ReminderRule], push_queue: str, settings: Any
) -> None:
    settings.TRAININGS_HELD_GRACE_SECONDS = 300
    training = _held_training(team, rules, timezone.now() + dt.timedelta(hours=3))
    Push.objects.filter(training=training).update(release_at=timezone.now() - dt.timedelta(minutes=2))

    assert held_pushes_overdue_check() == {}
    assert {p.status for p in Push.objects.filter(training=training)} == {PushStatus.HELD}


def test_an_overdue_push_of_no_use_any_more_is_skipped_with_the_reason(
    team: Team, rules: dict[str, ReminderRule], push_queue: str, settings: Any
) -> None:
    training = _held_training(team, rules, timezone.now() + dt.timedelta(minutes=100))
    # Moved earlier (by less than TRAININGS_MOVE_REPEAT_MINUTES): it has started by now.
    Training.objects.filter(pk=training.pk).update(start=timezone.now() - dt.timedelta(minutes=5))
    Push.objects.filter(training=training).update(release_at=timezone.now() - dt.timedelta(hours=1))
    before = _overdue("skipped")

    assert held_pushes_overdue_check() == {"skipped": 3}

    pushes = list(Push.objects.filter(training=training))
    assert {p.status for p in pushes} == {PushStatus.SKIPPED}
    assert all(p.status_reason.startswith("held until ") for p in pushes)
    assert drain_queue(push_queue) == []
    assert _overdue("skipped") - before == 3
