"""One push per family (issue 46, item 4): a guardian of two or more players whose reminders fall due in the
same minute gets one push, and at most one email, naming every child, with an answer action or link per
child. End to end: fired by the engine, published to RabbitMQ, sent by the gateway to the loopback APNs peer
and the SMTP peer; each child's reminder is recorded reached."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.utils import timezone

from delivery.gateway.consumer import Outcome, PushSender
from delivery.models import PushSend
from reminders.api import Delivery
from reminders.models import Occurrence
from tests.conftest import drain_queue
from tests.factories import GuardianFactory, MembershipFactory, PlayerFactory, TeamFactory, training_made
from tests.peers.apns_fcm import ApnsPeer, FcmPeer
from tests.trainings.conftest import fire
from tests.trainings.smtp_peer import Inbox
from trainings.answers.following import answer_link_record
from trainings.answers.links import answer_link_read
from trainings.answers.reading import answer_link_open
from trainings.models import Guardian, Guardianship, Player, Push, PushStatus, ReminderRule, Team, Training
from trainings.reminding.family_gather import family_release
from trainings.selectors import job_key

pytestmark = pytest.mark.django_db

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)  # 18:00 in Paris


def _occurrence(training: Training, rule: ReminderRule, before: dt.timedelta) -> Occurrence:
    key = job_key(training_id=training.pk, rule=rule)
    return Occurrence.objects.get(job__key=key, fire_at=START - before)


def _token(url: str) -> str:
    return url.split("?")[0].rstrip("/").rsplit("/", 1)[1]


@pytest.fixture
def maria(team: Team) -> Guardian:
    """Alice's and Bruno's mother, on an iPhone and by email, reading French; the team reminds guardians."""
    Team.objects.filter(pk=team.pk).update(reminds="guardians")
    maria = GuardianFactory(name="Maria", language="fr", player=Player.objects.get(name="Alice"), devices=[
        {"provider": "apns", "platform": "ios", "token": "maria-iphone"},
        {"provider": "email", "platform": "email", "token": "maria@example.com"},
    ])  # fmt: skip
    Guardianship.objects.create(guardian=maria, player=Player.objects.get(name="Bruno"), relation="mother")
    return maria


@pytest.mark.rabbitmq
def test_a_guardian_of_two_gets_one_push_and_one_email_naming_both_with_a_link_each(
    team: Team, maria: Guardian, rules: dict[str, ReminderRule], push_queue: str,
    apns: ApnsPeer, fcm: FcmPeer, smtp: Inbox, sender: PushSender,
) -> None:  # fmt: skip
    rule = rules["invitation"]
    ReminderRule.objects.filter(pk=rule.pk).update(escalate=["1d"])  # push and email: the email shows too
    training = training_made(team, START)
    assert fire(_occurrence(training, rule, dt.timedelta(days=1))).delivered == 1
    alice, bruno = Player.objects.get(name="Alice"), Player.objects.get(name="Bruno")
    # Each child's reminder is its own push row, to Maria; Chloe (no guardian) is reminded herself.
    assert sorted(Push.objects.values_list("player__name", "guardian__name")) == [
        ("Alice", "Maria"), ("Bruno", "Maria"), ("Chloe", None)
    ]  # fmt: skip

    bodies = [json.loads(m.body) for m in drain_queue(push_queue, expect=2)]
    (family,) = [b for b in bodies if b.get("guardian") == maria.pk]
    assert [m["player"] for m in family["family"]] == [alice.pk, bruno.pk]
    assert family["title"] == "Rappels pour Alice, Bruno"  # in Maria's language
    assert {h.outcome for h in sender.handle(bodies)} == {Outcome.DELIVERED}

    (ios,) = apns.received  # one push on Maria's iPhone, naming both, an answer action per child
    assert ios.token == "maria-iphone"
    assert ios.body["aps"]["category"] == "TRAINING_FAMILY"
    assert "Alice" in ios.body["aps"]["alert"]["body"] and "Bruno" in ios.body["aps"]["alert"]["body"]
    children = ios.body["family"]
    assert [(c["name"], c["player"]) for c in children] == [
        ("Alice", str(alice.pk)),
        ("Bruno", str(bruno.pk)),
    ]
    for child in children:
        link = answer_link_read(_token(child["answer_url"]))
        assert (str(link.player_id), link.guardian_id, link.kind) == (child["player"], maria.pk, "INVITATION")
        assert [a["response"] for a in child["actions"]] == ["accepted", "denied"]
    assert fcm.tokens() == ["fcm-chloe"]

    (mail,) = smtp.messages  # one email for both children
    assert mail["To"] == "maria@example.com"
    plain = mail.get_body(preferencelist=("plain",))
    assert plain is not None
    text = str(plain.get_content())
    links = [word for word in text.split() if "/answer/" in word]
    assert len(links) == 4  # accept and decline, for each child
    players = {answer_link_read(_token(url)).player_id for url in links}
    assert players == {alice.pk, bruno.pk}

    # Both children's reminders read as reached on Maria's iPhone and in her inbox.
    for push in Push.objects.filter(guardian=maria):
        statuses = set(PushSend.objects.filter(push_key=push.key).values_list("provider", "status"))
        assert statuses == {("apns", "accepted"), ("email", "accepted")}, push.key

    # Maria answers for Bruno from the email: his invitation, not Alice's.
    bruno_link = next(url for url in links if answer_link_read(_token(url)).player_id == bruno.pk)
    answer_link_record(target=answer_link_open(_token(bruno_link)), response="accepted")
    assert set(training.invitations.values_list("player__name", "status")) >= {
        ("Bruno", "ACCEPTED"), ("Alice", "PENDING")
    }  # fmt: skip


@pytest.mark.rabbitmq
def test_the_reminders_of_two_trainings_of_one_minute_make_one_push_for_the_guardian(
    team: Team, maria: Guardian, rules: dict[str, ReminderRule], push_queue: str,
    apns: ApnsPeer, sender: PushSender,
) -> None:  # fmt: skip
    """Maria's Ben plays in another team (reminding guardians too) whose training starts at the same time;
    the two occurrences fire in one chunk, and Maria gets one push for Alice's and Ben's reminders."""
    seniors = TeamFactory(name="U17", reminds="guardians")
    Guardianship.objects.filter(guardian=maria, player__name="Bruno").delete()
    ben = PlayerFactory(name="Ben")
    MembershipFactory(team=seniors, player=ben)
    Guardianship.objects.create(guardian=maria, player=ben, relation="mother")
    rule = rules["pre-questionnaire"]
    first, second = training_made(team, START), training_made(seniors, START, title="Match prep")
    Occurrence.objects.filter(
        pk__in=[_occurrence(t, rule, dt.timedelta(minutes=90)).pk for t in (first, second)]
    ).update(next_attempt_at=timezone.now() - dt.timedelta(seconds=1))
    assert fire(_occurrence(first, rule, dt.timedelta(minutes=90))).delivered == 2  # one claim, both

    bodies = [json.loads(m.body) for m in drain_queue(push_queue)]
    to_maria = [b for b in bodies if b.get("guardian") == maria.pk]
    assert len(to_maria) == 1
    assert sorted(m["training"] for m in to_maria[0]["family"]) == sorted([str(first.pk), str(second.pk)])
    assert {h.outcome for h in sender.handle(bodies)} == {Outcome.DELIVERED}
    assert [r.token for r in apns.received] == ["maria-iphone"]


def _two_teams(team: Team, maria: Guardian, rule: ReminderRule) -> tuple[Training, Training, Player]:
    """Alice in the U15 and Maria's Ben in the U17, both teams reminding guardians, trainings at START."""
    seniors = TeamFactory(name="U17", reminds="guardians")
    Guardianship.objects.filter(guardian=maria, player__name="Bruno").delete()
    ben = PlayerFactory(name="Ben")
    MembershipFactory(team=seniors, player=ben)
    Guardianship.objects.create(guardian=maria, player=ben, relation="mother")
    return training_made(team, START), training_made(seniors, START, title="Match prep"), ben


def _release(maria: Guardian, at: dt.datetime) -> Occurrence:
    minute = int(at.timestamp()) // 60
    return Occurrence.objects.get(job__key=f"trainings-family-release-{maria.pk}-{minute}")


@pytest.mark.rabbitmq
def test_reminders_of_one_minute_fired_apart_are_gathered_into_one_push(
    team: Team, maria: Guardian, rules: dict[str, ReminderRule], push_queue: str,
    apns: ApnsPeer, sender: PushSender,
) -> None:  # fmt: skip
    rule = rules["pre-questionnaire"]
    first, second, _ = _two_teams(team, maria, rule)
    at = START - dt.timedelta(minutes=90)
    assert fire(_occurrence(first, rule, dt.timedelta(minutes=90))).delivered == 1  # one chunk each
    assert fire(_occurrence(second, rule, dt.timedelta(minutes=90))).delivered == 1
    gathered = Push.objects.filter(guardian=maria)
    assert set(gathered.values_list("status", "release_at")) == {("held", at + dt.timedelta(seconds=5))}
    assert all(p.status_reason.startswith("gathered with the family") for p in gathered)
    assert [b.get("guardian") for b in (json.loads(m.body) for m in drain_queue(push_queue))] == [None, None]

    assert fire(_release(maria, at)).delivered == 1  # the window is over: one push for both
    bodies = [json.loads(m.body) for m in drain_queue(push_queue, expect=1)]
    (family,) = bodies
    assert sorted(m["training"] for m in family["family"]) == sorted([str(first.pk), str(second.pk)])
    assert {h.outcome for h in sender.handle(bodies)} == {Outcome.DELIVERED}
    assert [r.token for r in apns.received] == ["maria-iphone"]
    assert set(Push.objects.filter(guardian=maria).values_list("status", flat=True)) == {"sent"}
    # Delivered again (at least once), the release finds nothing more: nobody gets it twice.
    release = _release(maria, at)
    again = Delivery(release.pk, release.idempotency_key, release.job.key, release.fire_at, 2, "",
                     {"guardian": maria.pk})  # fmt: skip
    assert family_release(delivery=again) == 0
    assert drain_queue(push_queue) == []


@pytest.mark.rabbitmq
def test_a_gathered_push_of_a_child_who_answered_meanwhile_is_withdrawn(
    team: Team, maria: Guardian, rules: dict[str, ReminderRule], push_queue: str
) -> None:
    from tests.factories import WELLNESS
    from trainings.planning.writes import answer_record

    rule = rules["pre-questionnaire"]
    first, second, ben = _two_teams(team, maria, rule)
    at = START - dt.timedelta(minutes=90)
    fire(_occurrence(first, rule, dt.timedelta(minutes=90)))
    fire(_occurrence(second, rule, dt.timedelta(minutes=90)))
    drain_queue(push_queue)
    answer_record(training=second, player=ben, phase="PRE", answers=WELLNESS)
    assert fire(_release(maria, at)).delivered == 1
    (alone,) = [json.loads(m.body) for m in drain_queue(push_queue, expect=1)]
    assert "family" not in alone and alone["player"] == Player.objects.get(name="Alice").pk
    assert Push.objects.get(guardian=maria, player=ben).status == PushStatus.WITHDRAWN
