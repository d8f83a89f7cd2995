"""At fire time the handler asks the database who is still pending, and pushes each of them once."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.utils import timezone

from delivery.gateway.queue import push_queue_publisher
from reminders.engine.dispatch import occurrences_dispatch_batch
from reminders.models import Occurrence, OccurrenceStatus
from reminders.transports import Delivery
from tests.conftest import drain_queue
from tests.factories import RPE, WELLNESS, training_made
from tests.trainings.conftest import fire
from trainings.answers.links import answer_link_read
from trainings.models import (
    InvitationStatus,
    Player,
    Push,
    PushStatus,
    ReminderRule,
    ReminderRun,
    RunOutcome,
    Training,
)
from trainings.planning import kinds
from trainings.planning.writes import answer_record, invitation_respond, training_cancel, training_update
from trainings.reminding.firing import reminder_fire
from trainings.selectors import job_key

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)  # 18:00 in Paris


@pytest.fixture(autouse=True)
def _pushes_to_a_test_queue(push_queue: str) -> None:
    pass


@pytest.fixture
def training(team) -> Training:
    return training_made(team, START, location="Stadium")


def _occurrence(training: Training, rule: ReminderRule, fire_at: dt.datetime) -> Occurrence:
    return Occurrence.objects.get(job__key=job_key(training_id=training.pk, rule=rule), fire_at=fire_at)


def _pushed(training: Training, occurrence: Occurrence) -> list[str]:
    return sorted(
        Push.objects.filter(occurrence_key=occurrence.idempotency_key, status=PushStatus.SENT).values_list(
            "player__name", flat=True
        )
    )


def _player(name: str) -> Player:
    return Player.objects.get(name=name)


def test_a_player_who_answers_after_the_75_minute_reminder_gets_none_at_60(training, rules) -> None:
    pre = rules["pre-questionnaire"]
    at_75 = _occurrence(training, pre, START - dt.timedelta(minutes=75))
    assert fire(at_75).delivered == 1
    assert _pushed(training, at_75) == ["Alice", "Bruno", "Chloe"]

    answer_record(training=training, player=_player("Bruno"), phase=kinds.PRE.code, answers=WELLNESS)

    at_60 = _occurrence(training, pre, START - dt.timedelta(minutes=60))
    assert fire(at_60).delivered == 1
    assert _pushed(training, at_60) == ["Alice", "Chloe"]


def test_a_post_answer_does_not_silence_the_pre_reminders(training, rules) -> None:
    answer_record(training=training, player=_player("Alice"), phase=kinds.POST.code, answers=RPE)
    at_15 = _occurrence(training, rules["pre-questionnaire"], START - dt.timedelta(minutes=15))
    fire(at_15)
    assert _pushed(training, at_15) == ["Alice", "Bruno", "Chloe"]


def test_an_invitation_accepted_after_the_3_day_reminder_gets_no_2_day_one(training, rules) -> None:
    invitation = rules["invitation"]
    three_days = _occurrence(training, invitation, START - dt.timedelta(days=3))
    fire(three_days)
    assert _pushed(training, three_days) == ["Alice", "Bruno", "Chloe"]

    invitation_respond(
        invitation=training.invitations.get(player__name="Alice"), status=InvitationStatus.ACCEPTED
    )
    invitation_respond(
        invitation=training.invitations.get(player__name="Chloe"), status=InvitationStatus.DENIED
    )

    two_days = _occurrence(training, invitation, START - dt.timedelta(days=2))
    fire(two_days)
    assert _pushed(training, two_days) == ["Bruno"]


def test_a_player_who_denied_is_not_chased_for_questionnaires(training, rules) -> None:
    invitation_respond(
        invitation=training.invitations.get(player__name="Chloe"), status=InvitationStatus.DENIED
    )
    at_90 = _occurrence(training, rules["pre-questionnaire"], START - dt.timedelta(minutes=90))
    fire(at_90)
    assert _pushed(training, at_90) == ["Alice", "Bruno"]


def test_nobody_left_is_a_normal_recorded_outcome(training, rules) -> None:
    for player in training.invitations.values_list("player", flat=True):
        answer_record(
            training=training, player=Player.objects.get(pk=player), phase=kinds.PRE.code, answers=WELLNESS
        )
    at_30 = _occurrence(training, rules["pre-questionnaire"], START - dt.timedelta(minutes=30))
    assert fire(at_30).delivered == 1
    at_30.refresh_from_db()
    assert at_30.status == OccurrenceStatus.DELIVERED
    run = ReminderRun.objects.get(occurrence_key=at_30.idempotency_key)
    assert (run.outcome, run.recipients) == (RunOutcome.NOBODY_LEFT, 0)
    assert not Push.objects.filter(occurrence_key=at_30.idempotency_key).exists()


def test_a_redelivered_occurrence_never_pushes_twice(training, rules, push_queue) -> None:
    at_45 = _occurrence(training, rules["pre-questionnaire"], START - dt.timedelta(minutes=45))
    delivery = Delivery(
        occurrence_id=at_45.pk,
        idempotency_key=at_45.idempotency_key,
        job_key=at_45.job.key,
        fire_at=at_45.fire_at,
        attempt=1,
        target="trainings.reminder",
        payload=at_45.job.payload,
    )
    reminder_fire(delivery=delivery)
    reminder_fire(delivery=delivery)  # at-least-once: the engine may deliver it again
    assert Push.objects.filter(occurrence_key=at_45.idempotency_key).count() == 3
    assert ReminderRun.objects.get(occurrence_key=at_45.idempotency_key).outcome == RunOutcome.SENT


def test_a_cancelled_training_reaches_nobody_even_if_its_occurrence_was_in_flight(training, rules) -> None:
    at_15 = _occurrence(training, rules["pre-questionnaire"], START - dt.timedelta(minutes=15))
    delivery = Delivery(
        at_15.pk, at_15.idempotency_key, at_15.job.key, at_15.fire_at, 1, "x", at_15.job.payload
    )
    training_cancel(training=training)  # the occurrence was claimed before, so it still fires
    run = reminder_fire(delivery=delivery)
    assert run.outcome == RunOutcome.CANCELLED
    assert not Push.objects.exists()


def test_an_occurrence_of_the_old_time_reaches_nobody_after_a_move(training, rules) -> None:
    at_90 = _occurrence(training, rules["pre-questionnaire"], START - dt.timedelta(minutes=90))
    delivery = Delivery(
        at_90.pk, at_90.idempotency_key, at_90.job.key, at_90.fire_at, 1, "x", at_90.job.payload
    )
    training_update(
        training=training, start=START + dt.timedelta(minutes=30), end=START + dt.timedelta(hours=2)
    )
    assert reminder_fire(delivery=delivery).outcome == RunOutcome.STALE
    assert not Push.objects.exists()


@pytest.mark.rabbitmq
def test_pushes_are_rendered_in_each_players_language_and_zone(training, rules, push_queue) -> None:
    bruno = _player("Bruno")
    bruno.time_zone = "America/Montreal"
    bruno.save()
    at_15 = _occurrence(training, rules["pre-questionnaire"], START - dt.timedelta(minutes=15))
    fire(at_15)
    messages = {m["player"]: m for m in (json.loads(x.body) for x in drain_queue(push_queue, expect=3))}
    alice = messages[_player("Alice").pk]
    assert alice["title"] == "Pre-training questionnaire"
    assert alice["body"] == "Speed session starts at 6 p.m.: please answer the pre-training questionnaire."
    french = messages[bruno.pk]
    assert french["title"] == "Questionnaire avant l'entraînement"
    assert french["body"].startswith("Speed session commence à 12:00 :")  # 18:00 Paris is 12:00 in Montreal
    assert french["expires_at"] == training.start.isoformat()  # stale once the training has started
    assert french["training"] == str(training.pk)
    assert french["kind"] == "PRE"
    assert french["idempotency_key"] == f"{at_15.idempotency_key}.{bruno.pk}"


def test_a_publish_failure_retries_the_occurrence_and_the_retry_sends_only_what_is_unsent(
    training, rules, settings
) -> None:
    at_45 = _occurrence(training, rules["pre-questionnaire"], START - dt.timedelta(minutes=45))
    settings.REMINDERS_CALLBACK_BROKER_URL = "amqp://guest:guest@127.0.0.1:1//"  # nothing listens there
    push_queue_publisher().close()  # its next connection goes there
    result = fire(at_45)
    assert result.retried == 1
    at_45.refresh_from_db()
    assert at_45.status == OccurrenceStatus.SCHEDULED and "pushes not published" in at_45.last_error
    assert Push.objects.filter(occurrence_key=at_45.idempotency_key, status=PushStatus.PENDING).count() == 3

    answer_record(training=training, player=_player("Alice"), phase=kinds.PRE.code, answers=WELLNESS)
    settings.REMINDERS_CALLBACK_BROKER_URL = settings.CELERY_BROKER_URL
    push_queue_publisher().close()
    Occurrence.objects.filter(pk=at_45.pk).update(next_attempt_at=timezone.now())
    fire(at_45)
    statuses = dict(
        Push.objects.filter(occurrence_key=at_45.idempotency_key).values_list("player__name", "status")
    )
    assert statuses == {"Alice": PushStatus.WITHDRAWN, "Bruno": PushStatus.SENT, "Chloe": PushStatus.SENT}


@pytest.mark.rabbitmq
def test_pushes_the_broker_returns_stay_pending_and_the_retry_publishes_them_once(
    training, rules, push_queue
) -> None:
    from tests.conftest import delete_queue

    at_45 = _occurrence(training, rules["pre-questionnaire"], START - dt.timedelta(minutes=45))
    at_30 = _occurrence(training, rules["pre-questionnaire"], START - dt.timedelta(minutes=30))
    fire(at_45)  # the transport has declared the queue: it will not declare it again
    assert len(drain_queue(push_queue, expect=3)) == 3
    delete_queue(push_queue)  # so the next pushes are unroutable: the broker returns them (mandatory)

    result = fire(at_30)

    assert result.retried == 1
    at_30.refresh_from_db()
    assert "returned by broker" in at_30.last_error
    pushes = Push.objects.filter(occurrence_key=at_30.idempotency_key)
    assert list(pushes.values_list("status", "sent_at").distinct()) == [(PushStatus.PENDING, None)]
    push_queue_publisher().close()  # a new connection declares the queue again
    Occurrence.objects.filter(pk=at_30.pk).update(next_attempt_at=timezone.now())
    fire(at_30)
    assert set(pushes.values_list("status", flat=True)) == {PushStatus.SENT}
    keys = [json.loads(m.body)["idempotency_key"] for m in drain_queue(push_queue, expect=3)]
    assert sorted(keys) == sorted(pushes.values_list("key", flat=True))


@pytest.mark.rabbitmq
def test_the_published_message_is_the_stored_push_message(training, rules, push_queue) -> None:
    """The pushes just recorded are published as built, without reading them back: the same message, and
    its `answer` links signed for that push's player (the push channel's and the email channel's)."""
    at_15 = _occurrence(training, rules["pre-questionnaire"], START - dt.timedelta(minutes=15))
    fire(at_15)
    bodies = [json.loads(m.body) for m in drain_queue(push_queue, expect=3)]
    stored = {p.key: p.message() for p in Push.objects.select_related("rule")}
    assert len(bodies) == len(stored) == 3
    answers = [body.pop("answer") for body in bodies]
    assert all(body == stored[body["idempotency_key"]] for body in bodies)
    for body, answer in zip(bodies, answers, strict=True):
        push = answer_link_read(answer["push"]["answer_url"].rstrip("/").rsplit("/", 1)[1])
        assert (push.player_id, str(push.training_id), push.kind, push.source) == (
            body["player"], body["training"], body["kind"], "push_action",
        )  # fmt: skip
        assert answer["page"].endswith(answer["push"]["answer_url"].rstrip("/").rsplit("/", 1)[1] + "/")
        email = answer_link_read(answer["email"]["answer"].rstrip("/").rsplit("/", 1)[1])
        assert (email.player_id, email.kind, email.source) == (body["player"], body["kind"], "email_link")


@pytest.mark.postgres
@pytest.mark.rabbitmq
def test_a_fired_push_is_written_once_already_sent(training, rules, push_queue) -> None:
    """One write a push: inserted sent in the transaction that publishes it, never updated afterwards."""
    from django.db import connection

    def writes() -> tuple[int, int]:  # this connection's transaction's inserts and updates of pushes so far
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT n_tup_ins, n_tup_upd FROM pg_stat_xact_user_tables WHERE relname = %s",
                [Push._meta.db_table],
            )
            return cursor.fetchone()

    at_15 = _occurrence(training, rules["pre-questionnaire"], START - dt.timedelta(minutes=15))
    before = writes()
    fire(at_15)
    after = writes()
    assert len(drain_queue(push_queue, expect=3)) == 3
    assert set(Push.objects.values_list("status", flat=True)) == {PushStatus.SENT}
    assert Push.objects.filter(sent_at__isnull=True).count() == 0
    assert (after[0] - before[0], after[1] - before[1]) == (3, 0)


@pytest.mark.parametrize("payload", [{}, {"training": "not-a-uuid", "rule": 1}, {"training": None}, ["x"]])
def test_a_payload_naming_nothing_is_recorded_as_gone_not_retried(payload) -> None:
    delivery = Delivery(1, "occ-gone", "training-x-y", START, 1, "trainings.reminder", payload)
    assert reminder_fire(delivery=delivery).outcome == RunOutcome.GONE
    assert not Push.objects.exists()


def test_a_deleted_training_whose_occurrence_was_in_flight_is_gone(training, rules) -> None:
    from trainings.planning.writes import training_delete

    at_15 = _occurrence(training, rules["pre-questionnaire"], START - dt.timedelta(minutes=15))
    delivery = Delivery(
        at_15.pk, at_15.idempotency_key, at_15.job.key, at_15.fire_at, 1, "x", at_15.job.payload
    )
    training_delete(training=training)
    assert reminder_fire(delivery=delivery).outcome == RunOutcome.GONE


def _make_due(*occurrences: Occurrence) -> None:
    Occurrence.objects.filter(pk__in=[o.pk for o in occurrences]).update(
        next_attempt_at=timezone.now() - dt.timedelta(seconds=1)
    )


@pytest.mark.rabbitmq
def test_a_chunk_of_reminders_fires_together_each_to_its_pending_players(training, rules, push_queue) -> None:
    answer_record(training=training, player=_player("Bruno"), phase=kinds.PRE.code, answers=WELLNESS)
    invitation_respond(
        invitation=training.invitations.get(player__name="Alice"), status=InvitationStatus.ACCEPTED
    )
    pre = _occurrence(training, rules["pre-questionnaire"], START - dt.timedelta(minutes=30))
    invite = _occurrence(training, rules["invitation"], START - dt.timedelta(hours=6))
    post = _occurrence(training, rules["post-questionnaire"], START + dt.timedelta(minutes=105))
    _make_due(pre, invite, post)

    result = occurrences_dispatch_batch()

    assert (result.claimed, result.delivered) == (3, 3)
    assert _pushed(training, pre) == ["Alice", "Chloe"]
    assert _pushed(training, invite) == ["Bruno", "Chloe"]
    assert _pushed(training, post) == ["Alice", "Bruno", "Chloe"]
    runs = dict(ReminderRun.objects.values_list("occurrence_key", "recipients"))
    assert runs == {pre.idempotency_key: 2, invite.idempotency_key: 2, post.idempotency_key: 3}
    messages = drain_queue(push_queue, expect=7)
    assert len(messages) == 7
    assert {m.properties["message_id"] for m in messages} == set(Push.objects.values_list("key", flat=True))


def test_one_reminder_that_cannot_be_prepared_is_retried_alone(training, rules, monkeypatch) -> None:
    from trainings.reminding import firing as services

    render = services.push_render

    def render_fails_for_the_post_rule(**kwargs):
        if kwargs["templates"][0].rule.slug == "post-questionnaire":
            raise ValueError("template broke")
        return render(**kwargs)

    monkeypatch.setattr(services, "push_render", render_fails_for_the_post_rule)
    pre = _occurrence(training, rules["pre-questionnaire"], START - dt.timedelta(minutes=30))
    post = _occurrence(training, rules["post-questionnaire"], START + dt.timedelta(minutes=105))
    _make_due(pre, post)

    result = occurrences_dispatch_batch()

    assert (result.delivered, result.retried) == (1, 1)
    assert _pushed(training, pre) == ["Alice", "Bruno", "Chloe"]
    post.refresh_from_db()
    assert post.status == OccurrenceStatus.SCHEDULED and "template broke" in post.last_error
    assert not Push.objects.filter(occurrence_key=post.idempotency_key).exists()
    assert not ReminderRun.objects.filter(occurrence_key=post.idempotency_key).exists()
