"""The coach's digest end to end: a team's digest times schedule it, the engine fires it at its instant, the
gateway sends it to each coach's iPhone (the loopback APNs peer) or email (the loopback SMTP server) in the
coach's language and zone, naming who still owes what; nobody missing is a recorded outcome; the morning
summary covers the team's day once; the coach's quiet hours hold it; a late decline alerts once."""

from __future__ import annotations

import datetime as dt
from datetime import time
from typing import Any

import pytest
from django.utils import timezone

from delivery.gateway.consumer import Outcome, PushSender
from delivery.models import Device, PushSend, SendStatus
from reminders.models import Job, Occurrence
from tests.factories import (
    WELLNESS,
    MembershipFactory,
    PlayerFactory,
    TeamFactory,
    UserFactory,
    training_made,
)
from tests.peers.apns_fcm import ApnsPeer
from tests.trainings.conftest import fire
from tests.trainings.push_fixtures import left_on
from tests.trainings.smtp_peer import Inbox
from trainings.digest.alerts import decline_alert_key, decline_alert_schedule
from trainings.digest.schedule import team_digests_reschedule
from trainings.models import (
    Coach,
    CoachPush,
    Invitation,
    InvitationStatus,
    Player,
    ReminderRule,
    ReminderRun,
    RunOutcome,
    Team,
    Training,
)
from trainings.models.coaches import CoachPushStatus
from trainings.planning.writes import answer_record, invitation_respond
from trainings.selectors import job_key

pytestmark = pytest.mark.django_db

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)  # 18:00 in Paris, 17:00 in London, 13:00 in São Paulo


@pytest.fixture
def u15() -> Team:
    """U15 (Paris): digest 2 h before each training, morning summary at 07:00; five players."""
    team = TeamFactory(name="U15", time_zone="Europe/Paris", digest_before="2h", digest_morning_at=time(7))
    for name in ("Chloé", "ben", "Anna", "Dan", "Eve"):
        MembershipFactory(team=team, player=PlayerFactory(name=name))
    MembershipFactory(team=team, player=PlayerFactory(name="Gone"), active=False)
    return team


@pytest.fixture
def coaches(u15: Team) -> tuple[Coach, Coach]:
    """Two coaches: Camille reads French in London on an iPhone; Sam reads English in São Paulo by email."""
    camille = Coach.objects.create(
        user=UserFactory(username="camille"), language="fr", time_zone="Europe/London"
    )
    Device.objects.create(coach=camille, provider="apns", platform="ios", token="camille-iphone")
    sam = Coach.objects.create(user=UserFactory(username="sam"), language="en", time_zone="America/Sao_Paulo",
                               channels="email")  # fmt: skip
    Device.objects.create(coach=sam, provider="email", platform="email", token="sam@example.com")
    u15.coaches.add(camille.user, sam.user)
    return camille, sam


def _player(name: str) -> Player:
    return Player.objects.get(name=name)


def _answers(training: Training) -> None:
    """Dan answered everything; Eve declined; the others owe the questionnaire, Anna and ben the
    invitation."""
    invitation_respond(invitation=Invitation.objects.get(training=training, player=_player("Dan")),
                       status=InvitationStatus.ACCEPTED)  # fmt: skip
    answer_record(training=training, player=_player("Dan"), phase="PRE", answers=WELLNESS)
    invitation_respond(invitation=Invitation.objects.get(training=training, player=_player("Chloé")),
                       status=InvitationStatus.ACCEPTED)  # fmt: skip
    invitation_respond(invitation=Invitation.objects.get(training=training, player=_player("Eve")),
                       status=InvitationStatus.DENIED)  # fmt: skip


def _digest(training: Training) -> Occurrence:
    return Occurrence.objects.get(job__key=job_key(training_id=training.pk, rule=_rule("coach-digest")))


def _rule(slug: str) -> Any:
    from trainings.models import ReminderRule

    return ReminderRule.objects.get(slug=slug)


def test_the_digest_reaches_each_coach_in_their_language_and_zone_at_the_teams_instant(
    u15: Team, coaches: tuple[Coach, Coach], file_broker: str, smtp: Inbox, sender: PushSender,
    apns: ApnsPeer, settings: Any,
) -> None:  # fmt: skip
    camille, sam = coaches
    training = training_made(u15, START, title="Speed session")
    _answers(training)
    occurrence = _digest(training)
    assert occurrence.fire_at == START - dt.timedelta(hours=2)  # the team's "2h"

    assert fire(occurrence).delivered == 1
    run = ReminderRun.objects.get(occurrence_key=occurrence.idempotency_key)
    assert (run.outcome, run.recipients) == (RunOutcome.SENT, 2)
    bodies = left_on(file_broker, settings.TRAININGS_PUSH_QUEUE)
    assert sorted(b["coach"] for b in bodies) == sorted([camille.pk, sam.pk])
    assert all(b["player"] is None and b["kind"] == "DIGEST" for b in bodies)
    assert {h.outcome for h in sender.handle(bodies)} == {Outcome.DELIVERED}

    (phone,) = apns.received  # Camille's iPhone, in French, London time
    assert phone.token == "camille-iphone"
    assert phone.body["aps"]["alert"] == {
        "title": "U15 : qui doit encore répondre",
        "body": "U15 Speed session 17:00 : 3 sur 4 doivent encore remplir le questionnaire d'avant séance : "
        "Anna, ben, Chloé; 2 sur 5 doivent encore répondre à l'invitation : Anna, ben; désistements : 1",
    }
    assert (phone.body["screen"], phone.body["coach"], phone.body["kind"]) == (
        "coach_digest", str(camille.pk), "DIGEST"
    )  # fmt: skip
    assert "answer_url" not in phone.body  # nothing for a coach to answer

    (mail,) = smtp.messages  # Sam's email, in English, São Paulo time
    assert (mail["To"], mail["Subject"]) == ("sam@example.com", "U15: who still owes what")
    assert "List-Unsubscribe" not in mail
    plain = mail.get_body(preferencelist=("plain",))
    assert plain is not None
    text = str(plain.get_content())
    assert (
        "U15 Speed session 1 p.m.: 3 of 4 still owe the pre-training questionnaire: Anna, ben, Chloé; "
        "2 of 5 still owe an answer to the invitation: Anna, ben; 1 declined"
    ) in text
    sends = dict(PushSend.objects.values_list("coach_id", "status"))
    assert sends == {camille.pk: SendStatus.ACCEPTED, sam.pk: SendStatus.ACCEPTED}
    assert set(CoachPush.objects.values_list("status", "owing")) == {(CoachPushStatus.SENT, 3)}

    Occurrence.objects.filter(pk=occurrence.pk).update(status="scheduled")
    fire(occurrence)  # delivered again (at least once): one message per coach still
    assert CoachPush.objects.count() == 2


def test_a_digest_with_nobody_missing_is_skipped_and_recorded(
    u15: Team, coaches: tuple[Coach, Coach], file_broker: str, settings: Any
) -> None:
    training = training_made(u15, START)
    for invitation in Invitation.objects.filter(training=training):
        invitation_respond(invitation=invitation, status=InvitationStatus.ACCEPTED)
        answer_record(training=training, player=invitation.player, phase="PRE", answers=WELLNESS)
    occurrence = _digest(training)
    assert fire(occurrence).delivered == 1
    run = ReminderRun.objects.get(occurrence_key=occurrence.idempotency_key)
    assert (run.outcome, run.recipients) == (RunOutcome.NOBODY_LEFT, 0)
    assert not CoachPush.objects.exists()
    assert left_on(file_broker, settings.TRAININGS_PUSH_QUEUE) == []


def test_the_morning_summary_tells_the_teams_day_once(
    u15: Team, coaches: tuple[Coach, Coach], file_broker: str, settings: Any
) -> None:
    morning = START.replace(hour=8)  # 10:00 in Paris
    first = training_made(u15, morning, title="Gym")
    second = training_made(u15, START, title="Pitch")
    rule = _rule("coach-morning")
    occurrences = [
        Occurrence.objects.get(job__key=job_key(training_id=t.pk, rule=rule)) for t in (second, first)
    ]
    assert {o.fire_at for o in occurrences} == {dt.datetime(2030, 6, 11, 5, tzinfo=dt.UTC)}  # 07:00 Paris
    for occurrence in occurrences:
        fire(occurrence)
    outcomes = {o.pk: ReminderRun.objects.get(occurrence_key=o.idempotency_key).outcome for o in occurrences}
    assert sorted(outcomes.values()) == [RunOutcome.SENT, RunOutcome.SUMMARIZED]
    to_sam = CoachPush.objects.get(coach=coaches[1])
    assert to_sam.title == "U15: today's trainings"
    assert to_sam.body.splitlines() == [
        "Gym 5 a.m.: 5 of 5 still owe the pre-training questionnaire: Anna, ben, Chloé, Dan, Eve; "
        "5 of 5 still owe an answer to the invitation: Anna, ben, Chloé, Dan, Eve",
        "Pitch 1 p.m.: 5 of 5 still owe the pre-training questionnaire: Anna, ben, Chloé, Dan, Eve; "
        "5 of 5 still owe an answer to the invitation: Anna, ben, Chloé, Dan, Eve",
    ]
    assert CoachPush.objects.count() == 2  # one per coach
    assert len(left_on(file_broker, settings.TRAININGS_PUSH_QUEUE)) == 2


def test_the_coachs_quiet_hours_hold_the_digest_and_the_release_decides_again(
    u15: Team, coaches: tuple[Coach, Coach], file_broker: str, settings: Any
) -> None:
    camille, _ = coaches
    Coach.objects.filter(pk=camille.pk).update(quiet_start=time(14, 30), quiet_end=time(16))  # London
    training = training_made(u15, START)
    assert fire(_digest(training)).delivered == 1  # 15:00 in London
    held = CoachPush.objects.get(coach=camille)
    assert (held.status, held.release_at) == (
        CoachPushStatus.HELD,
        dt.datetime(2030, 6, 11, 15, tzinfo=dt.UTC),
    )
    for invitation in Invitation.objects.filter(training=training):  # everyone answers meanwhile
        invitation_respond(invitation=invitation, status=InvitationStatus.ACCEPTED)
        answer_record(training=training, player=invitation.player, phase="PRE", answers=WELLNESS)
    release = Occurrence.objects.get(job__key=f"trainings-coach-release-{held.pk}")
    assert release.fire_at == held.release_at
    fire(release)
    held.refresh_from_db()
    assert (held.status, held.status_reason) == (CoachPushStatus.SKIPPED, "nobody owes anything any more")


def test_a_digest_rule_marked_all_critical_goes_through_the_coachs_quiet_hours(
    u15: Team, coaches: tuple[Coach, Coach], file_broker: str
) -> None:
    """A coaches' kind is timed by the team, not by offsets: its rule is critical as a whole or not at all."""
    from django.core.exceptions import ValidationError

    from trainings.planning.writes import rule_update

    camille, _ = coaches
    Coach.objects.filter(pk=camille.pk).update(quiet_start=time(14, 30), quiet_end=time(16))  # London
    with pytest.raises(ValidationError, match="timed by the team"):
        rule_update(rule=_rule("coach-digest"), critical_offsets=[_rule("coach-digest").offsets[0]])
    rule_update(rule=_rule("coach-digest"), critical_offsets="all")
    training = training_made(u15, START)
    assert fire(_digest(training)).delivered == 1  # 15:00 in London, in her quiet hours
    assert CoachPush.objects.get(coach=camille).status == CoachPushStatus.SENT


@pytest.fixture
def soon(u15: Team, coaches: tuple[Coach, Coach]) -> Training:
    """A training starting in two hours, on a team alerted of declines within three."""
    Team.objects.filter(pk=u15.pk).update(decline_alert_within="3h")
    u15.refresh_from_db()
    # Not under test: the invitation a training this close sends at its creation (test_late_invitation.py).
    ReminderRule.objects.filter(slug="invitation").update(active=False)
    return training_made(u15, timezone.now().replace(microsecond=0) + dt.timedelta(hours=2))


def test_a_late_decline_alerts_the_coaches_once(
    soon: Training, coaches: tuple[Coach, Coach], file_broker: str, settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:  # fmt: skip
    anna = Invitation.objects.get(training=soon, player__name="Anna")
    with django_capture_on_commit_callbacks(execute=True):
        invitation_respond(invitation=anna, status=InvitationStatus.DENIED)
    alert = Occurrence.objects.get(job__key=decline_alert_key(training_id=soon.pk, player_id=anna.player_id))
    assert fire(alert).delivered == 1
    to_sam = CoachPush.objects.get(coach=coaches[1], kind="DECLINED")
    assert to_sam.title == "U15: a player declined"
    assert to_sam.body.startswith("Speed session ")
    assert to_sam.body.endswith(
        ("Anna declined, 2 h before the start", "Anna declined, 1 h 59 min before the start")
    )
    assert CoachPush.objects.filter(kind="DECLINED").count() == 2

    with django_capture_on_commit_callbacks(execute=True):
        invitation_respond(invitation=anna, status=InvitationStatus.ACCEPTED)
        invitation_respond(invitation=anna, status=InvitationStatus.DENIED)  # declines again: no second alert
    assert Job.objects.filter(key__startswith="trainings-coach-decline-").count() == 1
    assert decline_alert_schedule(training_id=soon.pk, player_id=anna.player_id) is False
    Occurrence.objects.filter(pk=alert.pk).update(status="scheduled")
    fire(alert)  # even delivered again, the alert's key holds: once per coach, player and training
    assert CoachPush.objects.filter(kind="DECLINED").count() == 2
    assert len(left_on(file_broker, settings.TRAININGS_PUSH_QUEUE)) == 2


def test_an_early_decline_or_a_team_without_alerts_makes_no_alert(
    u15: Team, coaches: tuple[Coach, Coach], django_capture_on_commit_callbacks: Any
) -> None:
    later = training_made(u15, timezone.now() + dt.timedelta(hours=5))
    Team.objects.filter(pk=u15.pk).update(decline_alert_within="3h")
    with django_capture_on_commit_callbacks(execute=True):
        invitation_respond(invitation=Invitation.objects.get(training=later, player__name="Anna"),
                           status=InvitationStatus.DENIED)  # fmt: skip
    Team.objects.filter(pk=u15.pk).update(decline_alert_within="")
    sooner = training_made(u15, timezone.now() + dt.timedelta(hours=1))
    with django_capture_on_commit_callbacks(execute=True):
        invitation_respond(invitation=Invitation.objects.get(training=sooner, player__name="Anna"),
                           status=InvitationStatus.DENIED)  # fmt: skip
    assert not Job.objects.filter(key__startswith="trainings-coach-decline-").exists()


def test_changing_the_teams_digest_time_reschedules_its_trainings(
    u15: Team, coaches: tuple[Coach, Coach]
) -> None:
    training = training_made(u15, START)
    assert _digest(training).fire_at == START - dt.timedelta(hours=2)
    u15.digest_before = "45m"
    u15.save()
    team_digests_reschedule(team=u15, now=START - dt.timedelta(days=1))
    wanted = Occurrence.objects.filter(job__key=job_key(training_id=training.pk, rule=_rule("coach-digest")))
    assert set(wanted.filter(status="scheduled").values_list("fire_at", flat=True)) == {
        START - dt.timedelta(minutes=45)
    }
    u15.digest_before = ""
    u15.save()
    team_digests_reschedule(team=u15, now=START - dt.timedelta(days=1))
    assert not wanted.filter(status="scheduled").exists()
