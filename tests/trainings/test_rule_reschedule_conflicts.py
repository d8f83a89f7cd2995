"""A rule's rescheduling survives what runs beside it: a batch PostgreSQL aborts for a deadlock runs again
(and is counted), a failed batch never stops the batches after it, and rules changed while trainings are
moved and deleted leave every kept training with the reminders its last write and the rule's last
offsets want."""

from __future__ import annotations

import datetime as dt
import threading
import time
from typing import Any

import pytest
from django.db import connection, connections, transaction
from prometheus_client import REGISTRY

from config.celery import app
from reminders.models import Occurrence, OccurrenceStatus
from tests.concurrency import run_together
from tests.factories import TrainingFactory
from trainings.models import ReminderRule, Team, Training
from trainings.planning.scheduling import rule_reschedule_trainings
from trainings.planning.writes import rule_update, training_create, training_delete, training_update
from trainings.selectors import job_key
from trainings.tasks import rule_reschedule

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)


def _create(team: Team, start: dt.datetime = START) -> Training:
    return training_create(team=team, title="Speed session", start=start,
                           end=start + dt.timedelta(minutes=90), time_zone="Europe/Paris")  # fmt: skip


def _pending(training: Training, rule: ReminderRule) -> list[dt.datetime]:
    return sorted(
        Occurrence.objects.filter(
            job__key=job_key(training_id=training.pk, rule=rule), status=OccurrenceStatus.SCHEDULED
        ).values_list("fire_at", flat=True)
    )


def _retries(outcome: str) -> float:
    value = REGISTRY.get_sample_value(
        "db_transaction_retries_total", {"operation": "trainings.rule_reschedule", "outcome": outcome}
    )
    return value or 0.0


def _waiting_for_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        )
        return bool(cursor.fetchone()[0])


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_batch_aborted_for_a_deadlock_runs_again_and_is_counted(
    team: Team, rules: dict[str, ReminderRule]
) -> None:
    first, second = sorted([_create(team), _create(team, START + dt.timedelta(days=1))], key=lambda t: t.pk)
    rule = rules["pre-questionnaire"]
    ReminderRule.objects.filter(pk=rule.pk).update(offsets=["45m"])
    retried = _retries("retried")
    holding = threading.Event()

    def reverse_order_writer() -> None:
        """Locks the second training, then (once the rescan waits for it) the first: a deadlock, which
        PostgreSQL settles by aborting the rescan (this session waits longer before it checks)."""
        try:
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute("SET LOCAL deadlock_timeout = '5s'")
                Training.objects.select_for_update().get(pk=second.pk)
                holding.set()
                deadline = time.monotonic() + 10
                while not _waiting_for_a_lock() and time.monotonic() < deadline:
                    time.sleep(0.02)
                Training.objects.select_for_update().get(pk=first.pk)
        finally:
            connections.close_all()

    writer = threading.Thread(target=reverse_order_writer)
    writer.start()
    assert holding.wait(10)
    outcome = rule_reschedule_trainings(rule_id=rule.pk, training_ids=[first.pk, second.pk])
    writer.join(30)
    assert _retries("retried") >= retried + 1
    assert outcome.done == 2 and outcome.failed == []
    for training in (first, second):
        assert _pending(training, rule) == [training.start - dt.timedelta(minutes=45)]


@pytest.mark.django_db
def test_a_failed_batch_never_stops_the_batches_after_it(
    team: Team, rules: dict[str, ReminderRule], settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A stored training no rule can place (its reminders would be past year 9999) fails its batch's row;
    the batches after it are rescheduled all the same."""
    settings.TRAININGS_RESCHEDULE_BATCH = 1
    trainings = [_create(team, START + dt.timedelta(days=day)) for day in range(3)]
    edge = dt.datetime(9999, 12, 31, 8, tzinfo=dt.UTC)  # 22:00 on New Year's Eve of 9999 in Kiritimati
    broken = TrainingFactory(team=team, start=edge, end=edge + dt.timedelta(hours=1),
                             time_zone="Pacific/Kiritimati")  # fmt: skip
    rule = rules["post-questionnaire"]
    ReminderRule.objects.filter(pk=rule.pk).update(offsets=["1d"])  # past 9999 in Kiritimati
    app.conf.task_always_eager = True
    try:
        rule_reschedule.apply(args=(rule.pk,))
    finally:
        app.conf.task_always_eager = False
    for training in trainings:
        assert _pending(training, rule) == [training.end + dt.timedelta(days=1)]
    assert any(str(broken.pk) in record.getMessage() for record in caplog.records)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_rules_changed_while_trainings_move_and_go_leave_each_kept_training_consistent(
    team: Team, rules: dict[str, ReminderRule], settings: Any
) -> None:
    settings.TRAININGS_RESCHEDULE_BATCH = 3
    trainings = [_create(team, START + dt.timedelta(hours=hour)) for hour in range(8)]
    doomed = {trainings[1].pk, trainings[6].pk}
    pre, invitation = rules["pre-questionnaire"], rules["invitation"]

    def write(slot: int) -> None:
        if slot == 0:
            rule = rule_update(rule=pre, offsets=["100m", "20m"])
            rule_reschedule.apply(args=(rule.pk,))
        elif slot == 1:
            rule = rule_update(rule=invitation, offsets=["2d"])
            rule_reschedule.apply(args=(rule.pk,))
        elif slot == 2:
            for training in trainings[::-1]:
                if training.pk not in doomed:
                    start = training.start + dt.timedelta(minutes=30)
                    training_update(training=training, start=start, end=start + dt.timedelta(minutes=90))
        else:
            for training in Training.objects.filter(pk__in=doomed):
                training_delete(training=training)

    app.conf.task_always_eager = True  # each batch's next one runs at once, in the same thread
    try:
        for _ in range(2):
            run_together(write, 4)
    finally:
        app.conf.task_always_eager = False
    pre.refresh_from_db()
    invitation.refresh_from_db()
    assert set(Training.objects.values_list("pk", flat=True)) == {t.pk for t in trainings} - doomed
    for training in Training.objects.all():
        for rule in (pre, invitation):
            assert _pending(training, rule) == [instant for instant, _ in rule.instants_for(training)]
    for pk in doomed:
        assert not Occurrence.objects.filter(
            job__key__startswith=f"training-{pk}-", status=OccurrenceStatus.SCHEDULED
        ).exists()
