"""A training moved after its reminders went out: the "training moved" notice goes to whom the team
reminds, like the reminders: the player, their guardians, or both; each in their own language, on their
own addresses (a guardian's email through an SMTP server on loopback, the players' phones on the FCM peer).
"""

from __future__ import annotations

import datetime as dt
import json

import pytest

from delivery.gateway.consumer import Outcome, PushSender
from delivery.models import PushSend, SendStatus
from reminders.models import Occurrence
from tests.conftest import drain_queue
from tests.factories import GuardianFactory, training_made
from tests.peers.apns_fcm import FcmPeer
from tests.trainings.conftest import fire
from tests.trainings.smtp_peer import Inbox
from trainings.models import Guardian, Player, Push, ReminderRule, Team, Training
from trainings.planning import kinds
from trainings.planning.writes import training_update
from trainings.reminding.notices import moved_notice_key
from trainings.selectors import job_key

pytestmark = [pytest.mark.django_db, pytest.mark.rabbitmq]

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)  # 18:00 in Paris


@pytest.fixture
def maria(team: Team) -> Guardian:
    """Alice's mother: French, an email address and no phone."""
    return GuardianFactory(name="Maria", language="fr", player=Player.objects.get(name="Alice"), devices=[
        {"provider": "email", "platform": "email", "token": "maria@example.com"}
    ])  # fmt: skip


def _reminded_then_moved(training: Training, rule: ReminderRule, push_queue: str) -> list[dict[str, object]]:
    """The 90-minute reminder fired and drained, the training moved 20 minutes later, the notice fired: the
    notice's pushes as published."""
    fire(Occurrence.objects.get(job__key=job_key(training_id=training.pk, rule=rule),
                                fire_at=START - dt.timedelta(minutes=90)))  # fmt: skip
    drain_queue(push_queue, expect=Push.objects.filter(training=training).count())
    delta = dt.timedelta(minutes=20)
    training = training_update(training=training, start=training.start + delta, end=training.end + delta)
    fire(Occurrence.objects.filter(job__key=moved_notice_key(training_id=training.pk)).latest("id"))
    count = Push.objects.filter(training=training, kind=kinds.MOVED.code).count()
    return [json.loads(m.body) for m in drain_queue(push_queue, expect=count)]


@pytest.mark.parametrize(
    ("reminds", "recipients"),
    [
        ("both", [("Alice", None), ("Alice", "Maria"), ("Bruno", None), ("Chloe", None)]),
        ("guardians", [("Alice", "Maria"), ("Bruno", None), ("Chloe", None)]),  # no guardian: themself
        ("player", [("Alice", None), ("Bruno", None), ("Chloe", None)]),
    ],
)
def test_the_moved_notice_goes_to_whom_the_team_reminds(
    team: Team, maria: Guardian, rules: dict[str, ReminderRule], push_queue: str, smtp: Inbox,
    fcm: FcmPeer, sender: PushSender, reminds: str, recipients: list[tuple[str, str | None]],
) -> None:  # fmt: skip
    Team.objects.filter(pk=team.pk).update(reminds=reminds)
    training = training_made(team, START)
    bodies = _reminded_then_moved(training, rules["pre-questionnaire"], push_queue)

    notices = Push.objects.filter(training=training, kind=kinds.MOVED.code)
    assert sorted(
        notices.values_list("player__name", "guardian__name"), key=lambda r: (r[0], r[1] or "")
    ) == (recipients)
    assert {h.outcome for h in sender.handle(bodies)} == {Outcome.DELIVERED}
    to_maria = [m for m in smtp.messages if m["To"] == "maria@example.com"]
    if ("Alice", "Maria") in recipients:
        (mail,) = to_maria  # in her language, with the new time
        assert mail["Subject"] == "Entraînement déplacé : Speed session"
        text = mail.get_body(preferencelist=("plain",))
        assert text is not None and "18:20" in str(text.get_content())
        send = PushSend.objects.get(device__token="maria@example.com")
        assert (send.status, send.guardian_id) == (SendStatus.ACCEPTED, maria.pk)
    else:
        assert to_maria == []
    players = sorted(name for name, guardian in recipients if guardian is None)
    assert sorted(fcm.tokens()) == [f"fcm-{name.lower()}" for name in players]
