"""A training created after all of its invitation instants (3 d, 2 d, 1 d, 6 h before the start): one
invitation goes out at its creation in place of the missed ones, as an engine occurrence, to the players
still pending when it fires; quiet hours hold it unless they end after the start; a move never sends it
again."""

from __future__ import annotations

import datetime as dt
import json
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from reminders.engine.dispatch import occurrences_dispatch_batch
from reminders.models import Occurrence, OccurrenceStatus
from tests.conftest import drain_queue
from tests.factories import training_made
from trainings.models import InvitationStatus, Push, PushStatus, ReminderRule, Team, Training
from trainings.planning import kinds
from trainings.planning.writes import invitation_respond, training_update
from trainings.reminding.remind_now import training_remind_now
from trainings.selectors import job_key


def _soon(hours: float) -> dt.datetime:
    return timezone.now().replace(microsecond=0) + dt.timedelta(hours=hours)


def _invitations(training: Training, rules: dict[str, ReminderRule]) -> list[Occurrence]:
    key = job_key(training_id=training.pk, rule=rules["invitation"])
    return list(Occurrence.objects.filter(job__key=key).order_by("fire_at"))


def _quiet_now(team: Team, *, before: int, after: int) -> dt.datetime:
    """Quiet hours for the team from `before` minutes ago to `after` minutes ahead (Paris time); returns
    when they end."""
    now = timezone.now().replace(second=0, microsecond=0)
    paris = ZoneInfo("Europe/Paris")
    team.quiet_start = (now - dt.timedelta(minutes=before)).astimezone(paris).time()
    team.quiet_end = (now + dt.timedelta(minutes=after)).astimezone(paris).time()
    team.save()
    return now + dt.timedelta(minutes=after)


@pytest.mark.postgres
@pytest.mark.rabbitmq
def test_a_training_created_3_hours_ahead_invites_each_pending_player_once(
    team: Team, rules: dict[str, ReminderRule], push_queue: str
) -> None:
    training = training_made(team, _soon(3))

    (at_creation,) = _invitations(training, rules)
    assert at_creation.fire_at == training.created_at
    # Who is asked is decided when it fires: Alice answered in between.
    invitation_respond(
        invitation=training.invitations.get(player__name="Alice"), status=InvitationStatus.ACCEPTED
    )
    assert occurrences_dispatch_batch().delivered >= 1

    bodies = [json.loads(m.body) for m in drain_queue(push_queue, expect=2)]
    assert {b["kind"] for b in bodies} == {kinds.INVITATION.code}
    pushes = Push.objects.filter(training=training, kind=kinds.INVITATION.code)
    assert sorted(pushes.values_list("player__name", "status")) == [
        ("Bruno", PushStatus.SENT),
        ("Chloe", PushStatus.SENT),
    ]
    assert set(pushes.values_list("offset", flat=True)) == {"3h"}  # "in 3 h", as the push says

    # A move that leaves every instant behind its creation still wants that one: it has gone, so it stays.
    later = dt.timedelta(minutes=30)
    training = training_update(training=training, start=training.start + later, end=training.end + later)
    occurrences_dispatch_batch()
    assert [o.status for o in _invitations(training, rules)] == [OccurrenceStatus.DELIVERED]
    assert Push.objects.filter(training=training, kind=kinds.INVITATION.code).count() == 2
    assert drain_queue(push_queue, timeout=0.5) == []


def test_a_training_created_with_invitation_instants_ahead_gets_no_extra_one(
    team: Team, rules: dict[str, ReminderRule]
) -> None:
    training = training_made(team, _soon(30))  # the 1 d and 6 h invitations are ahead

    fire_ats = [o.fire_at for o in _invitations(training, rules)]
    assert fire_ats == [training.start - dt.timedelta(days=1), training.start - dt.timedelta(hours=6)]


def test_the_invitation_at_creation_is_held_through_quiet_hours_that_end_before_the_start(
    team: Team, rules: dict[str, ReminderRule], push_queue: str
) -> None:
    end = _quiet_now(team, before=60, after=60)
    training = training_made(team, _soon(3))

    occurrences_dispatch_batch()

    pushes = Push.objects.filter(training=training, kind=kinds.INVITATION.code)
    assert [(p.status, p.release_at) for p in pushes] == [(PushStatus.HELD, end)] * 3


def test_the_invitation_at_creation_goes_through_quiet_hours_that_end_after_the_start(
    team: Team, rules: dict[str, ReminderRule], push_queue: str
) -> None:
    _quiet_now(team, before=60, after=240)
    training = training_made(team, _soon(3))

    occurrences_dispatch_batch()

    pushes = list(Push.objects.filter(training=training, kind=kinds.INVITATION.code))
    assert [p.status for p in pushes] == [PushStatus.SENT] * 3
    assert all(p.status_reason.startswith("sent in quiet hours: the training starts") for p in pushes)


def test_the_invitation_at_creation_skips_a_player_the_coach_reminded_meanwhile(
    team: Team, rules: dict[str, ReminderRule], push_queue: str
) -> None:
    training = training_made(team, _soon(3))
    training_remind_now(training=training, rule=rules["invitation"], click="c1")

    occurrences_dispatch_batch()

    assert Push.objects.filter(training=training, status=PushStatus.SENT).count() == 3  # the coach's
    (at_creation,) = _invitations(training, rules)
    assert not Push.objects.filter(occurrence_key=at_creation.idempotency_key).exists()
