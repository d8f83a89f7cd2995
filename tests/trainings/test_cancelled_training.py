"""A cancelled training tells the players concerned: every invited player who accepted or whom a push of it
reached gets one "training cancelled" notice (a push, or an email where that is their channel), never one
who declined; guardians too, as the team reminds. Quiet hours hold it unless they end after the start.
Never twice: not for a second PATCH, a redelivered job, nor a restore and cancel again. End to end: the API
and the admin's Cancel, the engine's job, the push queue, the gateway's logging stand-in (the players'
phones) and an SMTP server on loopback (the email addresses)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from delivery.channels.providers import providers_from_settings
from delivery.gateway.consumer import Outcome, PushSender
from reminders.api import Delivery
from reminders.models import Occurrence, OccurrenceStatus
from tests.clients import api_as, logged_in
from tests.conftest import drain_queue
from tests.factories import DeviceFactory, GuardianFactory, training_made
from tests.trainings.conftest import fire
from tests.trainings.push_fixtures import left_on
from tests.trainings.smtp_peer import Inbox
from trainings.access import coach_group_ensure
from trainings.models import (
    Guardian,
    InvitationStatus,
    Player,
    Push,
    PushStatus,
    ReminderRule,
    Team,
    Training,
)
from trainings.planning import kinds
from trainings.planning.writes import invitation_respond, training_update
from trainings.reminding.held import quiet_release_key
from trainings.reminding.notices import cancelled_notice_key, training_cancelled_notify
from trainings.selectors import job_key

pytestmark = pytest.mark.django_db

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)  # 18:00 in Paris
CANCELLED = kinds.CANCELLED.code


def _notice(training: Training) -> Occurrence:
    return Occurrence.objects.filter(job__key=cancelled_notice_key(training_id=training.pk)).latest("id")


def _respond(training: Training, name: str, status: InvitationStatus) -> None:
    invitation_respond(invitation=training.invitations.get(player__name=name), status=status)


def _cancel_by_api(coach: Any, training: Training) -> None:
    response = api_as(coach).patch(f"/api/trainings/{training.pk}/", {"cancelled": True}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["cancelled"] is True


Pushes = Callable[..., list[dict[str, Any]]]


@pytest.fixture
def pushes(request: pytest.FixtureRequest, settings: Any) -> Pushes:
    """What is on the push queue now (read and acked): on RabbitMQ where the suite runs with it, on the
    embedded file broker otherwise (`make run`'s), so these tests run on both."""
    if settings.CELERY_BROKER_URL.startswith(("amqp://", "amqps://", "pyamqp://")):
        queue = request.getfixturevalue("push_queue")
        return lambda expect=None: [json.loads(m.body) for m in drain_queue(queue, expect=expect)]
    url = request.getfixturevalue("file_broker")
    return lambda expect=None: left_on(url, settings.TRAININGS_PUSH_QUEUE)


def _names(bodies: list[dict[str, Any]]) -> set[str]:
    return set(Player.objects.filter(pk__in=[b["player"] for b in bodies]).values_list("name", flat=True))


def test_the_players_who_accepted_hear_of_it_and_one_who_declined_does_not(
    coach: Any, team: Team, pushes: Pushes
) -> None:
    training = training_made(team, START)
    _respond(training, "Alice", InvitationStatus.ACCEPTED)
    _respond(training, "Chloe", InvitationStatus.DENIED)  # Bruno has not answered, nor been reminded

    _cancel_by_api(coach, training)
    fire(_notice(training))

    (body,) = pushes(expect=1)
    assert _names([body]) == {"Alice"}
    assert (body["kind"], body["title"]) == (CANCELLED, "Training cancelled: Speed session")
    assert body["body"] == "Speed session on June 11, 2030 at 6 p.m. (Europe/Paris) is cancelled."
    assert body["expires_at"] == START.isoformat()


def test_everyone_a_reminder_reached_hears_of_it_in_their_language_unless_they_declined_since(
    coach: Any, team: Team, rules: dict[str, ReminderRule], pushes: Pushes
) -> None:
    training = training_made(team, START)
    fire(Occurrence.objects.get(job__key=job_key(training_id=training.pk, rule=rules["pre-questionnaire"]),
                                fire_at=START - dt.timedelta(minutes=90)))  # fmt: skip
    pushes(expect=3)
    _respond(training, "Chloe", InvitationStatus.DENIED)

    _cancel_by_api(coach, training)
    fire(_notice(training))

    bodies = pushes(expect=2)
    assert _names(bodies) == {"Alice", "Bruno"}
    by_language = {b["language"]: b for b in bodies}
    assert by_language["fr"]["title"] == "Entraînement annulé : Speed session"
    assert by_language["fr"]["body"] == "Speed session du 11 juin 2030 à 18:00 (Europe/Paris) est annulé."
    assert Push.objects.filter(kind=CANCELLED, status=PushStatus.SENT).count() == 2


def test_never_twice_a_second_patch_a_redelivered_job_a_restore_and_cancel_again(
    coach: Any, team: Team, pushes: Pushes
) -> None:
    training = training_made(team, START)
    _respond(training, "Alice", InvitationStatus.ACCEPTED)
    _cancel_by_api(coach, training)
    _cancel_by_api(coach, training)  # already cancelled: no second notice
    assert Occurrence.objects.filter(job__key=cancelled_notice_key(training_id=training.pk)).count() == 1
    notice = _notice(training)
    fire(notice)
    assert len(pushes(expect=1)) == 1

    notice.refresh_from_db()  # the broker hands the same job over again (a worker died before its ack)
    again = Delivery(notice.pk, notice.idempotency_key, cancelled_notice_key(training_id=training.pk),
                     notice.fire_at, 2, "", {"training": str(training.pk)})  # fmt: skip
    assert training_cancelled_notify(delivery=again) == 1  # the same push, recorded once and not re-sent
    assert pushes() == []

    response = api_as(coach).patch(f"/api/trainings/{training.pk}/", {"cancelled": False}, format="json")
    assert response.status_code == 200
    _cancel_by_api(coach, training)
    fire(_notice(training))
    assert pushes() == []  # Alice was told already
    assert Push.objects.filter(kind=CANCELLED).count() == 1


def test_a_cancel_undone_before_the_notice_fires_tells_nobody(coach: Any, team: Team, pushes: Pushes) -> None:
    training = training_made(team, START)
    _respond(training, "Alice", InvitationStatus.ACCEPTED)
    _cancel_by_api(coach, training)
    training_update(training=Training.objects.get(pk=training.pk), cancelled=False)
    fire(_notice(training))
    assert pushes() == []
    assert not Push.objects.filter(kind=CANCELLED).exists()


def _quiet_now(team: Team, *, before: int, after: int) -> dt.datetime:
    """Quiet hours for the team from `before` minutes ago to `after` minutes from now (Paris time)."""
    now = timezone.now().replace(second=0, microsecond=0)
    paris = ZoneInfo("Europe/Paris")
    team.quiet_start = (now - dt.timedelta(minutes=before)).astimezone(paris).time()
    team.quiet_end = (now + dt.timedelta(minutes=after)).astimezone(paris).time()
    team.save()
    return now + dt.timedelta(minutes=after)


def test_in_quiet_hours_it_waits_for_their_end_and_a_restore_meanwhile_withdraws_it(
    coach: Any, team: Team, pushes: Pushes
) -> None:
    training = training_made(team, timezone.now() + dt.timedelta(days=1))
    _respond(training, "Alice", InvitationStatus.ACCEPTED)
    _respond(training, "Bruno", InvitationStatus.ACCEPTED)
    end = _quiet_now(team, before=60, after=120)

    _cancel_by_api(coach, training)
    fire(_notice(training))

    assert pushes() == []
    held = Push.objects.filter(kind=CANCELLED)
    assert {(p.status, p.release_at) for p in held} == {(PushStatus.HELD, end)}
    release = Occurrence.objects.get(job__key=quiet_release_key(training_id=training.pk, rule=None),
                                     status=OccurrenceStatus.SCHEDULED)  # fmt: skip
    assert release.fire_at == end
    invitation_respond(
        invitation=training.invitations.get(player__name="Bruno"), status=InvitationStatus.DENIED
    )
    fire(release)
    (body,) = pushes(expect=1)  # Bruno declined while it was held
    assert _names([body]) == {"Alice"} and body["kind"] == CANCELLED
    bruno = Push.objects.get(kind=CANCELLED, player__name="Bruno")
    assert (bruno.status, bruno.status_reason) == (PushStatus.WITHDRAWN, "answered while held")


def test_a_restore_while_held_withdraws_the_notice(coach: Any, team: Team, pushes: Pushes) -> None:
    training = training_made(team, timezone.now() + dt.timedelta(days=1))
    _respond(training, "Alice", InvitationStatus.ACCEPTED)
    _quiet_now(team, before=60, after=120)
    _cancel_by_api(coach, training)
    fire(_notice(training))
    training_update(training=Training.objects.get(pk=training.pk), cancelled=False)

    fire(Occurrence.objects.get(job__key=quiet_release_key(training_id=training.pk, rule=None),
                                status=OccurrenceStatus.SCHEDULED))  # fmt: skip

    assert pushes() == []
    push = Push.objects.get(kind=CANCELLED)
    assert (push.status, push.status_reason) == (PushStatus.WITHDRAWN, "training restored while held")

    Team.objects.filter(pk=team.pk).update(quiet_start=None, quiet_end=None)
    _cancel_by_api(coach, training)  # cancelled for good: Alice was never told, so she is now
    fire(_notice(training))
    (body,) = pushes(expect=1)
    assert _names([body]) == {"Alice"} and body["kind"] == CANCELLED


def test_when_the_training_would_have_started_before_quiet_hours_end_it_goes_at_once(
    coach: Any, team: Team, pushes: Pushes
) -> None:
    _quiet_now(team, before=60, after=180)
    soon = timezone.now().replace(second=0, microsecond=0) + dt.timedelta(minutes=120)
    training = training_made(team, soon)
    _respond(training, "Alice", InvitationStatus.ACCEPTED)

    _cancel_by_api(coach, training)
    fire(_notice(training))

    (body,) = pushes(expect=1)
    assert body["kind"] == CANCELLED
    push = Push.objects.get(kind=CANCELLED)
    assert push.status == PushStatus.SENT
    assert push.status_reason.startswith(
        "sent in quiet hours: the training would have started before they end"
    )


@pytest.fixture
def maria(team: Team) -> Guardian:
    """Alice's mother: French, an email address and no phone."""
    return GuardianFactory(name="Maria", language="fr", player=Player.objects.get(name="Alice"), devices=[
        {"provider": "email", "platform": "email", "token": "maria@example.com"}
    ])  # fmt: skip


def test_end_to_end_phones_by_the_logging_stand_in_emails_by_smtp_guardians_too(
    coach: Any, team: Team, maria: Guardian, pushes: Pushes, smtp: Inbox, settings: Any, caplog: Any
) -> None:
    """Alice and her mother are told (the team reminds both), Alice's mother by email; Chloe, whose only
    address is an email, by email; Bruno on his phone (the logging stand-in takes it: no FCM settings)."""
    settings.TRAININGS_PUSH_PROVIDER = "logging"
    Team.objects.filter(pk=team.pk).update(reminds="both")
    chloe = Player.objects.get(name="Chloe")
    chloe.devices.all().delete()
    DeviceFactory(player=chloe, provider="email", platform="email", token="chloe@example.com")
    training = training_made(team, START)
    for name in ("Alice", "Bruno", "Chloe"):
        _respond(training, name, InvitationStatus.ACCEPTED)

    coach.is_staff = True  # a coach in the admin: staff, in the coaches' group
    coach.save()
    coach.groups.add(coach_group_ensure())
    response = logged_in(coach).post(f"/admin/trainings/training/{training.pk}/cancel/", follow=True)
    assert response.status_code == 200
    assert "the players who said they would come or were reminded are told" in response.content.decode()
    fire(_notice(training))
    bodies = pushes(expect=4)

    sender = PushSender(providers_from_settings())
    try:
        with caplog.at_level("INFO", logger="trainings.push"):
            handled = sender.handle(bodies)
    finally:
        sender.close()
    assert {h.outcome for h in handled} == {Outcome.DELIVERED}
    lines = [line for line in caplog.text.splitlines() if "PUSH player=" in line]
    assert sorted(line.split("player=")[1].split()[0] for line in lines) == sorted(
        str(Player.objects.get(name=name).pk) for name in ("Alice", "Bruno")
    )
    assert all(f"kind={CANCELLED}" in line for line in lines)
    mails = {m["To"]: m for m in smtp.messages}
    assert sorted(mails) == ["chloe@example.com", "maria@example.com"]
    assert mails["maria@example.com"]["Subject"] == "Entraînement annulé : Speed session"
    assert mails["chloe@example.com"]["Subject"] == "Training cancelled: Speed session"
    text = mails["chloe@example.com"].get_body(preferencelist=("plain",))
    assert text is not None and "is cancelled" in str(text.get_content())
    assert Push.objects.filter(kind=CANCELLED).count() == 4  # Alice, Maria, Bruno, Chloe
