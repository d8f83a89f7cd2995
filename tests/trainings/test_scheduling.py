"""Scheduling is written with the training: create, move, cancel, delete, and rule changes."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from reminders.models import Job, Occurrence, OccurrenceStatus
from tests.factories import training_made
from trainings.models import ReminderRule, Training
from trainings.planning.scheduling import HANDLER_NAME, rule_reschedule_batch
from trainings.planning.writes import rule_delete, training_cancel, training_delete, training_update
from trainings.selectors import job_key

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)


def _create(team, start: dt.datetime = START, **kwargs) -> Training:
    return training_made(team, start, **kwargs)


def _pending(training: Training, rule: ReminderRule) -> list[dt.datetime]:
    return list(
        Occurrence.objects.filter(
            job__key=job_key(training_id=training.pk, rule=rule), status=OccurrenceStatus.SCHEDULED
        )
        .order_by("fire_at")
        .values_list("fire_at", flat=True)
    )


def _all_pending(training: Training) -> int:
    return Occurrence.objects.filter(
        job__key__startswith=f"training-{training.pk}-", status=OccurrenceStatus.SCHEDULED
    ).count()


def test_it_schedules_exactly_seed_000s_instants_for_each_rule(team, rules) -> None:
    training = _create(team)
    assert _pending(training, rules["pre-questionnaire"]) == [
        START - dt.timedelta(minutes=m) for m in (90, 75, 60, 45, 30, 15)
    ]
    end = START + dt.timedelta(minutes=90)
    assert _pending(training, rules["post-questionnaire"]) == [
        end + dt.timedelta(minutes=m) for m in range(15, 181, 15)
    ]
    assert _pending(training, rules["invitation"]) == [
        START - dt.timedelta(days=3),
        START - dt.timedelta(days=2),
        START - dt.timedelta(days=1),
        START - dt.timedelta(hours=6),
    ]


def test_it_makes_one_handler_job_per_rule_whose_payload_names_the_rule_not_the_players(team, rules) -> None:
    training = _create(team)
    jobs = Job.objects.filter(key__startswith=f"training-{training.pk}-")
    assert sorted(jobs.values_list("key", flat=True)) == sorted(
        f"training-{training.pk}-{slug}" for slug in ("invitation", "post-questionnaire", "pre-questionnaire")
    )
    job = jobs.get(key=f"training-{training.pk}-pre-questionnaire")
    assert (job.callback_type, job.target) == ("handler", HANDLER_NAME)
    assert job.payload == {"training": str(training.pk), "rule": rules["pre-questionnaire"].pk}


def test_it_invites_the_active_members_by_default(team) -> None:
    training = _create(team)
    names = sorted(training.invitations.values_list("player__name", flat=True))
    assert names == ["Alice", "Bruno", "Chloe"]


def test_it_does_not_schedule_offsets_already_past(team, rules) -> None:
    start = timezone.now() + dt.timedelta(minutes=50)
    training = _create(team, start=start)
    assert _pending(training, rules["pre-questionnaire"]) == [
        start - dt.timedelta(minutes=m) for m in (45, 30, 15)
    ]
    # Every invitation offset is past: the one invitation at creation stands in for them.
    assert _pending(training, rules["invitation"]) == [training.created_at]


def test_moving_by_30_minutes_moves_every_pending_reminder_and_leaves_none_stale(team, rules) -> None:
    training = _create(team)
    before = {
        o.fire_at: o.idempotency_key
        for o in Occurrence.objects.filter(job__key__startswith=f"training-{training.pk}-")
    }
    moved = START + dt.timedelta(minutes=30)

    training_update(training=training, start=moved, end=moved + dt.timedelta(minutes=90))

    assert _pending(training, rules["pre-questionnaire"]) == [
        moved - dt.timedelta(minutes=m) for m in (90, 75, 60, 45, 30, 15)
    ]
    assert _pending(training, rules["post-questionnaire"]) == [
        moved + dt.timedelta(minutes=90 + m) for m in range(15, 181, 15)
    ]
    assert _pending(training, rules["invitation"]) == [
        moved - dt.timedelta(days=3),
        moved - dt.timedelta(days=2),
        moved - dt.timedelta(days=1),
        moved - dt.timedelta(hours=6),
    ]
    assert _all_pending(training) == 6 + 12 + 4  # no duplicates, nothing stale
    # An instant wanted before and after keeps its occurrence (and idempotency key): no double fire.
    kept = Occurrence.objects.get(
        job__key=job_key(training_id=training.pk, rule=rules["pre-questionnaire"]),
        fire_at=START - dt.timedelta(minutes=60),
        status=OccurrenceStatus.SCHEDULED,
    )
    assert kept.idempotency_key == before[START - dt.timedelta(minutes=60)]
    cancelled = Occurrence.objects.filter(
        job__key__startswith=f"training-{training.pk}-", status=OccurrenceStatus.CANCELLED
    )
    assert set(cancelled.values_list("fire_at", flat=True)) == {
        START - dt.timedelta(minutes=90),
        START - dt.timedelta(minutes=75),
        START - dt.timedelta(days=3),
        START - dt.timedelta(days=2),
        START - dt.timedelta(days=1),
        START - dt.timedelta(hours=6),
        START + dt.timedelta(minutes=90 + 15),
        START + dt.timedelta(minutes=90 + 30),
    }


def test_cancelling_cancels_everything_pending_and_uncancelling_brings_it_back(team) -> None:
    training = _create(team)
    training_cancel(training=training)
    assert _all_pending(training) == 0
    training_update(training=training, cancelled=False)
    assert _all_pending(training) == 22


def test_deleting_cancels_everything_pending(team) -> None:
    training = _create(team)
    pk = training.pk
    assert training_delete(training=training) == 22
    assert not Training.objects.filter(pk=pk).exists()
    statuses = set(
        Occurrence.objects.filter(job__key__startswith=f"training-{pk}-").values_list("status", flat=True)
    )
    assert statuses == {OccurrenceStatus.CANCELLED}


def test_a_failed_update_leaves_the_schedule_untouched(team, rules) -> None:
    from django.core.exceptions import ValidationError

    training = _create(team)
    with pytest.raises(ValidationError):
        training_update(training=training, start=START + dt.timedelta(hours=5))  # after its end
    assert _pending(training, rules["pre-questionnaire"])[0] == START - dt.timedelta(minutes=90)
    training.refresh_from_db()
    assert training.start == START


def test_a_rule_change_reschedules_future_trainings_in_batches(team, rules) -> None:
    trainings = [_create(team, start=START + dt.timedelta(days=i)) for i in range(5)]
    past = _create(team, start=timezone.now() - dt.timedelta(days=40))  # out of any rule's reach
    rule = rules["pre-questionnaire"]
    rule.offsets = ["120m", "10m"]
    rule.save()

    cursor, batches = None, 0
    while True:
        cursor = rule_reschedule_batch(rule_id=rule.pk, after=cursor, batch_size=2)
        batches += 1
        if cursor is None:
            break
    assert batches == 3
    for training in trainings:
        start = training.start
        assert _pending(training, rule) == [
            start - dt.timedelta(minutes=120),
            start - dt.timedelta(minutes=10),
        ]
    assert not Job.objects.filter(key=job_key(training_id=past.pk, rule=rule)).exists()


def test_deactivating_a_rule_cancels_its_pending_reminders(team, rules) -> None:
    training = _create(team)
    rule = rules["invitation"]
    rule.active = False
    rule.save()
    rule_reschedule_batch(rule_id=rule.pk)
    assert _pending(training, rule) == []
    assert len(_pending(training, rules["pre-questionnaire"])) == 6


def test_deleting_a_rule_cancels_its_pending_reminders(team, rules) -> None:
    training = _create(team)
    assert rule_delete(rule=rules["invitation"]) == 4
    assert _all_pending(training) == 18


def test_the_rule_change_task_runs_one_batch_then_chains(team, rules, settings) -> None:
    from trainings.tasks import rule_reschedule

    training = _create(team)
    rule = rules["post-questionnaire"]
    rule.offsets = ["5m"]
    rule.save()
    rule_reschedule.apply(args=(rule.pk,))
    assert _pending(training, rule) == [training.end + dt.timedelta(minutes=5)]


def test_a_paris_training_the_day_after_spring_forward_gets_its_1_day_reminder_at_10_paris(
    team, rules
) -> None:
    # Clocks go 02:00 CET -> 03:00 CEST on Sunday 2027-03-28. Training Monday 29 March 10:00 Paris = 08:00Z.
    start = dt.datetime(2027, 3, 29, 8, tzinfo=dt.UTC)
    training = _create(team, start=start)
    assert _pending(training, rules["invitation"]) == [
        dt.datetime(2027, 3, 26, 9, tzinfo=dt.UTC),  # Friday 10:00 CET
        dt.datetime(2027, 3, 27, 9, tzinfo=dt.UTC),  # Saturday 10:00 CET
        dt.datetime(2027, 3, 28, 8, tzinfo=dt.UTC),  # Sunday 10:00 CEST: "1 day before", same wall time
        dt.datetime(2027, 3, 29, 2, tzinfo=dt.UTC),  # 6 h: an exact duration
    ]
