"""Guardians are reminded as their team says: a youth team set to "both" pushes the player and the
guardian, each on their own devices (real APNs and FCM peers on loopback), in their own language and with
their own quiet hours; a team set to "guardians" reminds only guardians; nobody gets a reminder twice."""

from __future__ import annotations

import datetime as dt
import json
from datetime import time

import pytest

from delivery.gateway.consumer import Outcome, PushSender
from delivery.models import PushSend, SendStatus
from reminders.models import Occurrence
from tests.conftest import drain_queue
from tests.factories import WELLNESS, GuardianFactory, training_made
from tests.peers.apns_fcm import ApnsPeer, FcmPeer
from tests.trainings.conftest import fire
from trainings.answers.links import answer_link_read
from trainings.models import Guardian, Player, Push, PushStatus, ReminderRule, Team, Training
from trainings.planning.writes import answer_record
from trainings.reminding.held import held_pushes_release
from trainings.reminding.remind_now import training_remind_now
from trainings.selectors import job_key

pytestmark = pytest.mark.django_db

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)  # 18:00 in Paris


def _occurrence(training: Training, rule: ReminderRule, before: dt.timedelta) -> Occurrence:
    return Occurrence.objects.get(
        job__key=job_key(training_id=training.pk, rule=rule), fire_at=START - before
    )


def _recipients(occurrence: Occurrence) -> list[tuple[str, str | None]]:
    rows = Push.objects.filter(occurrence_key=occurrence.idempotency_key).values_list(
        "player__name", "guardian__name"
    )
    return sorted(rows, key=lambda r: (r[0], r[1] or ""))


@pytest.fixture
def maria(team: Team) -> Guardian:
    """Alice's mother, on an iPhone, reading French."""
    return GuardianFactory(
        name="Maria", language="fr", player=Player.objects.get(name="Alice"), devices=[
            {"provider": "apns", "platform": "ios", "token": "maria-iphone"}
        ],
    )  # fmt: skip


@pytest.mark.rabbitmq
def test_a_youth_team_set_to_both_pushes_the_player_and_the_guardian_on_their_own_devices(
    team: Team, maria: Guardian, rules: dict[str, ReminderRule], push_queue: str,
    apns: ApnsPeer, fcm: FcmPeer, sender: PushSender,
) -> None:  # fmt: skip
    Team.objects.filter(pk=team.pk).update(reminds="both")
    training = training_made(team, START)
    first = _occurrence(training, rules["pre-questionnaire"], dt.timedelta(minutes=90))
    assert fire(first).delivered == 1
    assert _recipients(first) == [("Alice", None), ("Alice", "Maria"), ("Bruno", None), ("Chloe", None)]
    to_maria = Push.objects.get(guardian=maria)
    assert (to_maria.player.name, to_maria.language, to_maria.status) == ("Alice", "fr", PushStatus.SENT)

    bodies = [json.loads(m.body) for m in drain_queue(push_queue, expect=4)]
    assert sorted(b.get("guardian") or 0 for b in bodies) == [0, 0, 0, maria.pk]
    handled = sender.handle(bodies)
    assert {h.outcome for h in handled} == {Outcome.DELIVERED}

    (ios,) = apns.received  # only Maria has an iPhone: the players have Android phones
    assert ios.token == "maria-iphone"
    link = answer_link_read(ios.body["answer_url"].rstrip("/").rsplit("/", 1)[1])
    assert (link.player_id, link.guardian_id, link.kind) == (maria.players.get().pk, maria.pk, "PRE")
    assert (ios.body["player"], ios.body["guardian"]) == (str(link.player_id), str(maria.pk))
    assert ios.headers["apns-collapse-id"].endswith(f":pre:{link.player_id}")  # a sibling's won't replace it
    assert sorted(fcm.tokens()) == ["fcm-alice", "fcm-bruno", "fcm-chloe"]  # Maria's push: not on Alice's
    send = PushSend.objects.get(device__token="maria-iphone")
    assert (send.status, send.guardian_id, send.player_id) == (SendStatus.ACCEPTED, maria.pk, link.player_id)


def test_a_team_set_to_guardians_reminds_only_guardians_and_a_player_without_one_themself(
    team: Team, maria: Guardian, rules: dict[str, ReminderRule], push_queue: str
) -> None:
    Team.objects.filter(pk=team.pk).update(reminds="guardians")
    training = training_made(team, START)
    first = _occurrence(training, rules["pre-questionnaire"], dt.timedelta(minutes=90))
    assert fire(first).delivered == 1
    # Alice's reminder goes to Maria only; Bruno and Chloe have no guardian: theirs is not lost.
    assert _recipients(first) == [("Alice", "Maria"), ("Bruno", None), ("Chloe", None)]


def test_a_team_set_to_player_never_reminds_guardians(
    team: Team, maria: Guardian, rules: dict[str, ReminderRule], push_queue: str
) -> None:
    training = training_made(team, START)
    first = _occurrence(training, rules["pre-questionnaire"], dt.timedelta(minutes=90))
    assert fire(first).delivered == 1
    assert _recipients(first) == [("Alice", None), ("Bruno", None), ("Chloe", None)]


def test_a_guardian_has_their_own_quiet_hours(
    team: Team, maria: Guardian, rules: dict[str, ReminderRule], push_queue: str
) -> None:
    Team.objects.filter(pk=team.pk).update(reminds="both")
    Guardian.objects.filter(pk=maria.pk).update(quiet_start=time(16), quiet_end=time(17))  # Paris time
    training = training_made(team, START)
    first = _occurrence(training, rules["pre-questionnaire"], dt.timedelta(minutes=90))  # 16:30 in Paris
    assert fire(first).delivered == 1
    statuses = dict(Push.objects.filter(player__name="Alice").values_list("guardian__name", "status"))
    assert statuses == {None: PushStatus.SENT, "Maria": PushStatus.HELD}
    held = Push.objects.get(guardian=maria)
    assert held.release_at == dt.datetime(2030, 6, 11, 15, tzinfo=dt.UTC)  # 17:00 in Paris
    assert held_pushes_release(training_id=training.pk, at=held.release_at)["released"] == 1
    held.refresh_from_db()
    assert (held.status, held.language, held.guardian) == (PushStatus.SENT, "fr", maria)  # her language


def test_a_guardians_held_reminder_is_withdrawn_when_the_player_answers_meanwhile(
    team: Team, maria: Guardian, rules: dict[str, ReminderRule], push_queue: str
) -> None:
    Team.objects.filter(pk=team.pk).update(reminds="both")
    Guardian.objects.filter(pk=maria.pk).update(quiet_start=time(16), quiet_end=time(17))
    training = training_made(team, START)
    assert fire(_occurrence(training, rules["pre-questionnaire"], dt.timedelta(minutes=90))).delivered == 1
    answer_record(training=training, player=Player.objects.get(name="Alice"), phase="PRE", answers=WELLNESS)
    held = Push.objects.get(guardian=maria)
    assert held_pushes_release(training_id=training.pk, at=held.release_at)["withdrawn"] == 1
    held.refresh_from_db()
    assert held.status == PushStatus.WITHDRAWN


def test_nobody_gets_the_same_reminder_twice(
    team: Team, maria: Guardian, rules: dict[str, ReminderRule], push_queue: str
) -> None:
    """A redelivered occurrence adds no push; a guardian of two players gets one per player; a coach's
    second click within a minute reminds nobody again."""
    Team.objects.filter(pk=team.pk).update(reminds="both")
    bruno = Player.objects.get(name="Bruno")
    maria.guardianships.create(player=bruno, relation="aunt")
    training = training_made(team, START)
    first = _occurrence(training, rules["pre-questionnaire"], dt.timedelta(minutes=90))
    assert fire(first).delivered == 1
    Occurrence.objects.filter(pk=first.pk).update(status="scheduled")
    fire(first)  # delivered again (at least once): the unique (occurrence, player, guardian) holds
    to_maria = Push.objects.filter(occurrence_key=first.idempotency_key, guardian=maria)
    assert sorted(to_maria.values_list("player__name", flat=True)) == ["Alice", "Bruno"]
    assert Push.objects.filter(occurrence_key=first.idempotency_key).count() == 5

    rule = rules["pre-questionnaire"]
    once = training_remind_now(training=training, rule=rule, click="c1")
    assert once.recipients == 5 and "Maria (for Alice)" in once.names
    assert training_remind_now(training=training, rule=rule, click="c2").recipients == 0
    assert Push.objects.filter(occurrence_key__startswith="manual-").count() == 5


@pytest.mark.parametrize(
    ("change", "quiet_for", "reason"),
    [
        ("team reminds the player only", "Maria", "no longer reminded as this player's guardian"),
        ("Maria no longer Alice's guardian", "Maria", "no longer reminded as this player's guardian"),
        ("team reminds guardians only", "Alice", "the team reminds the player's guardians instead now"),
    ],
)
def test_a_held_reminder_goes_only_to_whom_the_team_reminds_at_its_release(
    team: Team, maria: Guardian, rules: dict[str, ReminderRule], push_queue: str, change: str,
    quiet_for: str, reason: str,
) -> None:  # fmt: skip
    Team.objects.filter(pk=team.pk).update(reminds="both")
    quiet = (
        Guardian.objects.filter(pk=maria.pk) if quiet_for == "Maria" else Player.objects.filter(name="Alice")
    )
    quiet.update(quiet_start=time(16), quiet_end=time(17))  # Paris time: the 90-min reminder is at 16:30
    training = training_made(team, START)
    assert fire(_occurrence(training, rules["pre-questionnaire"], dt.timedelta(minutes=90))).delivered == 1
    held = Push.objects.get(status=PushStatus.HELD)
    assert (held.guardian or held.player).name == quiet_for
    if change == "team reminds the player only":
        Team.objects.filter(pk=team.pk).update(reminds="player")
    elif change == "team reminds guardians only":
        Team.objects.filter(pk=team.pk).update(reminds="guardians")
    else:
        maria.guardianships.all().delete()
    assert held_pushes_release(training_id=training.pk, at=held.release_at)["withdrawn"] == 1
    held.refresh_from_db()
    assert held.status == PushStatus.WITHDRAWN and held.status_reason.startswith(reason)
