"""The short-squad alert end to end: fewer than `min_players` accepted at the short-squad rule's offset
(24 h before by default) tells each coach (an iPhone through the loopback APNs peer, an email through the
loopback SMTP server) how many are missing and who has not answered; a squad that is not short tells
nobody; a decline that drops the squad below its minimum inside those 24 h alerts at once, once per new
low; a training without a minimum has no such reminder at all."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from delivery.gateway.consumer import Outcome, PushSender
from delivery.models import Device
from reminders.models import Job, Occurrence
from tests.factories import MembershipFactory, PlayerFactory, TeamFactory, UserFactory, training_made
from tests.peers.apns_fcm import ApnsPeer
from tests.trainings.conftest import fire
from tests.trainings.push_fixtures import left_on
from tests.trainings.smtp_peer import Inbox
from trainings.models import (
    Coach,
    CoachPush,
    Invitation,
    InvitationStatus,
    ReminderRule,
    ReminderRun,
    RunOutcome,
    Team,
    Training,
)
from trainings.planning.writes import invitation_respond
from trainings.selectors import job_key
from trainings.squads.short import short_alert_key

pytestmark = pytest.mark.django_db

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)  # 18:00 in Paris


@pytest.fixture
def u15() -> Team:
    team = TeamFactory(name="U15", time_zone="Europe/Paris")
    for name in ("Anna", "ben", "Chloé", "Dan", "Eve"):
        MembershipFactory(team=team, player=PlayerFactory(name=name))
    return team


@pytest.fixture
def coaches(u15: Team) -> tuple[Coach, Coach]:
    """Camille reads French on an iPhone; Sam reads English by email."""
    camille = Coach.objects.create(
        user=UserFactory(username="camille"), language="fr", time_zone="Europe/Paris"
    )
    Device.objects.create(coach=camille, provider="apns", platform="ios", token="camille-iphone")
    sam = Coach.objects.create(user=UserFactory(username="sam"), language="en", time_zone="Europe/Paris",
                               channels="email")  # fmt: skip
    Device.objects.create(coach=sam, provider="email", platform="email", token="sam@example.com")
    u15.coaches.add(camille.user, sam.user)
    return camille, sam


def _respond(training: Training, name: str, status: InvitationStatus) -> None:
    invitation_respond(invitation=Invitation.objects.get(training=training, player__name=name), status=status)


def _short(training: Training) -> Occurrence:
    rule = ReminderRule.objects.get(slug="coach-short-squad")
    return Occurrence.objects.get(job__key=job_key(training_id=training.pk, rule=rule))


def test_a_short_squad_at_the_rules_offset_tells_each_coach_who_is_missing(
    u15: Team, coaches: tuple[Coach, Coach], file_broker: str, smtp: Inbox, sender: PushSender,
    apns: ApnsPeer, settings: Any,
) -> None:  # fmt: skip
    training = training_made(u15, START, min_players=4)
    _respond(training, "Dan", InvitationStatus.ACCEPTED)
    _respond(training, "Eve", InvitationStatus.ACCEPTED)
    _respond(training, "Chloé", InvitationStatus.DENIED)
    occurrence = _short(training)
    assert occurrence.fire_at == START - dt.timedelta(hours=24)  # the default rule's "24h"

    assert fire(occurrence).delivered == 1
    run = ReminderRun.objects.get(occurrence_key=occurrence.idempotency_key)
    assert (run.outcome, run.recipients) == (RunOutcome.SENT, 2)
    bodies = left_on(file_broker, settings.TRAININGS_PUSH_QUEUE)
    assert sorted((b["coach"], b["kind"]) for b in bodies) == sorted((c.pk, "SHORT") for c in coaches)
    assert {h.outcome for h in sender.handle(bodies)} == {Outcome.DELIVERED}
    (phone,) = apns.received
    assert phone.token == "camille-iphone"
    assert phone.body["aps"]["alert"] == {
        "title": "U15 : effectif insuffisant",
        "body": "Speed session 18:00 : il manque 2 joueurs (2 ont accepté, 4 nécessaires); "
        "pas encore répondu : Anna, ben",
    }
    (mail,) = smtp.messages
    assert (mail["To"], mail["Subject"]) == ("sam@example.com", "U15: short squad")
    plain = mail.get_body(preferencelist=("plain",))
    assert plain is not None
    assert (
        "Speed session 6 p.m.: 2 players missing (2 accepted, 4 needed); not answered yet: Anna, ben"
        in str(plain.get_content())
    )
    assert set(CoachPush.objects.values_list("kind", "owing")) == {("SHORT", 2)}


def test_a_squad_that_is_not_short_tells_nobody_and_no_minimum_means_no_alert(
    u15: Team, coaches: tuple[Coach, Coach], file_broker: str, settings: Any
) -> None:
    enough = training_made(u15, START, min_players=1)
    _respond(enough, "Dan", InvitationStatus.ACCEPTED)
    occurrence = _short(enough)
    fire(occurrence)
    run = ReminderRun.objects.get(occurrence_key=occurrence.idempotency_key)
    assert (run.outcome, run.recipients) == (RunOutcome.NOBODY_LEFT, 0)
    assert not CoachPush.objects.exists()
    assert left_on(file_broker, settings.TRAININGS_PUSH_QUEUE) == []

    without = training_made(u15, START + dt.timedelta(days=1))
    rule = ReminderRule.objects.get(slug="coach-short-squad")
    assert not Job.objects.filter(key=job_key(training_id=without.pk, rule=rule)).exists()


@pytest.fixture
def tonight(u15: Team, coaches: tuple[Coach, Coach]) -> Training:
    """A training in five hours needing three, three accepted."""
    # Not under test: the invitation a training this close sends at its creation (test_late_invitation.py).
    ReminderRule.objects.filter(slug="invitation").update(active=False)
    training = training_made(
        u15, timezone.now().replace(microsecond=0) + dt.timedelta(hours=5), min_players=3
    )
    for name in ("Anna", "ben", "Chloé"):
        _respond(training, name, InvitationStatus.ACCEPTED)
    return training


def test_a_decline_that_makes_the_squad_short_inside_24_h_alerts_at_once(
    tonight: Training, coaches: tuple[Coach, Coach], file_broker: str, settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        _respond(tonight, "Anna", InvitationStatus.DENIED)
    alert = Occurrence.objects.get(job__key=short_alert_key(training_id=tonight.pk, accepted=2))
    assert fire(alert).delivered == 1
    to_sam = CoachPush.objects.get(coach=coaches[1], kind="SHORT")
    assert to_sam.body.endswith("1 player missing (2 accepted, 3 needed); not answered yet: Dan, Eve")

    with django_capture_on_commit_callbacks(execute=True):  # back and out again: the same low, told once
        _respond(tonight, "Anna", InvitationStatus.ACCEPTED)
        _respond(tonight, "Anna", InvitationStatus.DENIED)
    assert Job.objects.filter(key__startswith="trainings-coach-short-").count() == 1
    with django_capture_on_commit_callbacks(execute=True):  # a new low: told again
        _respond(tonight, "ben", InvitationStatus.DENIED)
    assert Job.objects.filter(key=short_alert_key(training_id=tonight.pk, accepted=1)).exists()
    assert len(left_on(file_broker, settings.TRAININGS_PUSH_QUEUE)) == 2


def test_a_decline_days_before_waits_for_the_rules_offset(
    u15: Team, coaches: tuple[Coach, Coach], django_capture_on_commit_callbacks: Any
) -> None:
    later = training_made(u15, timezone.now() + dt.timedelta(days=3), min_players=2)
    _respond(later, "Anna", InvitationStatus.ACCEPTED)
    with django_capture_on_commit_callbacks(execute=True):
        _respond(later, "Anna", InvitationStatus.DENIED)
    assert not Job.objects.filter(key__startswith="trainings-coach-short-").exists()
