"""Scheduling a training and firing a due minute are set-based: a fixed number of statements however many
players and occurrences, and still exactly the players each rule chases (issue 17, item 4)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from reminders.engine.dispatch import occurrences_dispatch_batch
from reminders.models import Job, Occurrence, OccurrenceStatus
from reminders.transports import Delivery
from tests.conftest import drain_queue
from tests.factories import ANSWERED, MembershipFactory, PlayerFactory, TeamFactory
from trainings.models import (
    Invitation,
    InvitationStatus,
    Membership,
    Push,
    PushStatus,
    QuestionnaireAnswer,
    ReminderRule,
    ReminderRun,
    RunOutcome,
    Team,
    Training,
    TrainingJob,
)
from trainings.planning import kinds
from trainings.planning.scheduling import HANDLER_NAME
from trainings.planning.writes import training_create
from trainings.reminding.firing import reminders_fire
from trainings.reminding.held import QUIET_RELEASE_HANDLER, quiet_release_key
from trainings.reminding.recipients import reminder_recipients, reminder_recipients_many

pytestmark = pytest.mark.django_db


def _team(players: int) -> Team:
    team = TeamFactory()
    for _ in range(players):
        MembershipFactory(team=team, player=PlayerFactory(devices=[]))
    return team


def _create(team: Team, hours: int = 0) -> Training:
    # More than three days out: every rule (invitation 3 d before included) has future instants.
    start = timezone.now().replace(microsecond=0) + dt.timedelta(days=4, hours=hours)
    return training_create(
        team=team, title="Speed", start=start, end=start + dt.timedelta(minutes=90), time_zone="Europe/Paris"
    )


def _statements(fn: Any) -> int:
    with CaptureQueriesContext(connection) as ctx:
        fn()
    return len(ctx.captured_queries)


def test_it_creates_a_training_in_the_same_few_statements_whatever_the_team_size(
    django_assert_max_num_queries,
) -> None:
    small, large = _team(2), _team(40)
    _create(small)  # warm-up: content types, rules' first read
    few = _statements(lambda: _create(small, hours=1))
    with django_assert_max_num_queries(few):
        training = _create(large)
    # savepoint, training with its history row (audit), invitations and the rules (one statement on
    # PostgreSQL, four elsewhere), jobs with their links (one on PostgreSQL, two elsewhere), the occurrences
    # (a COPY on PostgreSQL, not counted; an INSERT elsewhere), release
    assert few <= (4 if connection.vendor == "postgresql" else 9)
    assert training.invitations.count() == 40
    links = TrainingJob.objects.filter(training=training).select_related("job", "rule")
    players_rules = ReminderRule.objects.filter(kind__in=[kind.code for kind in kinds.rule_kinds()])
    assert sorted(link.rule.slug for link in links) == sorted(  # the coaches': no digest time set
        players_rules.values_list("slug", flat=True)
    )
    for link in links:  # each link (written in the jobs' statement, matched on the key) names its own job
        assert link.job.key == f"training-{training.pk}-{link.rule.slug}"
        assert link.job.payload == {"training": str(training.pk), "rule": link.rule.pk}
        wanted = [instant for instant, _ in link.rule.instants_for(training)]
        scheduled = link.job.occurrences.filter(status=OccurrenceStatus.SCHEDULED)
        assert sorted(scheduled.values_list("fire_at", flat=True)) == wanted
    assert Occurrence.objects.filter(job__training_job__training=training).count() == 22


def test_an_invalid_training_is_refused_before_any_write(team) -> None:
    from django.core.exceptions import ValidationError

    start = timezone.now() + dt.timedelta(days=4)
    with pytest.raises(ValidationError):
        training_create(team=team, title="Backwards", start=start, end=start, time_zone="Europe/Paris")
    with pytest.raises(ValidationError):
        training_create(
            team=team, title="Nowhere", start=start, end=start + dt.timedelta(hours=1), time_zone="Mars/Base"
        )
    assert not Training.objects.exists()
    assert not Occurrence.objects.exists()


def _mixed_answers(training: Training) -> int:
    """Player i of the list: i%4 == 0 answered both and accepted, 1 declined, 2 owes everything, 3 answered
    PRE only. The last one then leaves the team (their invitation stays PENDING). Returns their id."""
    now = timezone.now()
    invitations = list(Invitation.objects.filter(training=training).order_by("player_id"))
    for i, invitation in enumerate(invitations):
        if i % 4 == 0:
            invitation.status = InvitationStatus.ACCEPTED
        elif i % 4 == 1:
            invitation.status = InvitationStatus.DENIED
        invitation.save()
        phases = {0: [kinds.PRE.code, kinds.POST.code], 3: [kinds.PRE.code]}.get(i % 4, [])
        for phase in phases:
            QuestionnaireAnswer.objects.create(
                training=training,
                player_id=invitation.player_id,
                phase=phase,
                answers=ANSWERED[phase],
                answered_at=now,
            )
    leaver = invitations[-1].player_id
    Membership.objects.filter(team=training.team, player_id=leaver).update(active=False)
    return leaver


def _expected(training: Training, kind: str, leaver: int) -> set[int]:
    ids = list(
        Invitation.objects.filter(training=training).order_by("player_id").values_list("player_id", flat=True)
    )
    chased = {kinds.INVITATION.code: {2, 3}, kinds.PRE.code: {2}, kinds.POST.code: {2, 3}}[kind]
    return {pk for i, pk in enumerate(ids) if i % 4 in chased} - {leaver}


def _make_due(trainings: list[Training]) -> list[Occurrence]:
    """Each rule's earliest instant of each training, due now (fire_at stays the rule's instant)."""
    due = []
    for training in trainings:
        for link in TrainingJob.objects.filter(training=training):
            due.append(link.job.occurrences.order_by("fire_at")[0])
    Occurrence.objects.filter(pk__in=[o.pk for o in due]).update(
        next_attempt_at=timezone.now() - dt.timedelta(seconds=1)
    )
    return due


def _fire_minute(teams: int, players: int) -> tuple[int, list[Occurrence], dict[Training, int]]:
    trainings = {_create(_team(players), hours=i): 0 for i in range(teams)}
    for training in trainings:
        trainings[training] = _mixed_answers(training)
    due = _make_due(list(trainings))
    with CaptureQueriesContext(connection) as ctx:
        result = occurrences_dispatch_batch()
    assert result.delivered == len(due)
    return len(ctx.captured_queries), due, trainings


@pytest.mark.rabbitmq  # reads the push queue
def test_a_due_minute_across_many_trainings_pushes_exactly_the_pending_players(push_queue) -> None:
    _, due, trainings = _fire_minute(teams=8, players=9)
    rule_of = {link.job_id: link.rule for link in TrainingJob.objects.select_related("rule")}
    sent = 0
    for occurrence in due:
        training = Training.objects.get(reminder_jobs__job_id=occurrence.job_id)
        rule = rule_of[occurrence.job_id]
        pushed = Push.objects.filter(occurrence_key=occurrence.idempotency_key)
        players = set(pushed.values_list("player_id", flat=True))
        assert players == _expected(training, rule.kind, trainings[training]), rule.kind
        assert players == set(reminder_recipients(training=training, rule=rule).values_list("pk", flat=True))
        assert set(pushed.values_list("status", flat=True)) == {PushStatus.SENT}
        run = ReminderRun.objects.get(occurrence_key=occurrence.idempotency_key)
        assert (run.outcome, run.recipients) == (RunOutcome.SENT, len(players))
        sent += len(players)
    assert len(drain_queue(push_queue, expect=sent)) == sent


def test_a_due_minute_costs_the_same_statements_for_more_trainings_and_players(push_queue) -> None:
    few, _, _ = _fire_minute(teams=1, players=5)
    Occurrence.objects.filter(status=OccurrenceStatus.SCHEDULED).update(
        next_attempt_at=timezone.now() + dt.timedelta(days=30)
    )
    many, due, _ = _fire_minute(teams=12, players=24)
    assert len(due) == 36
    assert many <= few


def test_the_set_based_recipients_match_the_per_training_query(team, rules) -> None:
    trainings = [_create(_team(7), hours=i) for i in range(3)] + [_create(team, hours=5)]
    for training in trainings[:3]:
        _mixed_answers(training)
    pairs = [(t, rule.kind) for t in trainings for rule in rules.values()]
    many = reminder_recipients_many(pairs)
    for training, rule in ((t, r) for t in trainings for r in rules.values()):
        expected = [
            (p.pk, p.language, p.time_zone, p.quiet_start, p.quiet_end, None)
            for p in reminder_recipients(training=training, rule=rule).order_by("pk")
        ]
        assert many[training.pk, rule.kind] == expected


def _fire_pre_at_night(trainings: list[Training], minutes: int) -> int:
    """Fire each training's pre-questionnaire reminder `minutes` before its start in one chunk; returns
    the statements it took."""
    rule = ReminderRule.objects.get(slug="pre-questionnaire")
    deliveries = []
    for training in trainings:
        at = training.start - dt.timedelta(minutes=minutes)
        occurrence = Occurrence.objects.select_related("job").get(
            job__training_job__training=training, job__training_job__rule=rule, fire_at=at
        )
        payload = {"training": str(training.pk), "rule": rule.pk}
        deliveries.append(
            Delivery(
                occurrence.pk, occurrence.idempotency_key, occurrence.job.key, at, 1, HANDLER_NAME, payload
            )
        )
    with CaptureQueriesContext(connection) as ctx:
        assert reminders_fire(deliveries=deliveries) == {}
    return len(ctx.captured_queries)


def _quiet_trainings(count: int) -> list[Training]:
    start = dt.datetime(2027, 3, 28, 5, 30, tzinfo=dt.UTC)  # 07:30 CEST: pre reminders fall in 22:00-07:00
    trainings = []
    for _ in range(count):
        team = _team(3)
        team.quiet_start, team.quiet_end = dt.time(22), dt.time(7)
        team.save()
        trainings.append(
            training_create(
                team=team,
                title="Early",
                start=start,
                end=start + dt.timedelta(hours=1),
                time_zone="Europe/Paris",
            )
        )
    return trainings


@pytest.mark.rabbitmq  # reads the push queue
def test_held_pushes_of_a_night_minute_get_their_release_jobs_in_the_same_statements(push_queue) -> None:
    few = _fire_pre_at_night(_quiet_trainings(1), minutes=90)
    trainings = _quiet_trainings(6)
    assert _fire_pre_at_night(trainings, minutes=90) <= few
    _fire_pre_at_night(trainings, minutes=75)  # the release jobs exist now: replaced, not duplicated
    rule = ReminderRule.objects.get(slug="pre-questionnaire")
    release = dt.datetime(2027, 3, 28, 5, tzinfo=dt.UTC)  # 07:00 CEST
    for training in trainings:
        held = Push.objects.filter(training=training)
        assert held.count() == 6 and set(held.values_list("status", flat=True)) == {PushStatus.HELD}
        assert set(held.values_list("release_at", flat=True)) == {release}
        job = Job.objects.get(key=quiet_release_key(training_id=training.pk, rule=rule))
        assert list(job.occurrences.values_list("fire_at", "status")) == [
            (release, OccurrenceStatus.SCHEDULED)
        ]
        assert job.target == QUIET_RELEASE_HANDLER and job.payload == {
            "training": str(training.pk),
            "rule": rule.pk,
        }
    assert drain_queue(push_queue) == []
