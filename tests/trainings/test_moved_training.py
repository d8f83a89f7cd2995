"""A training moved after some of its reminders went out: the players already reminded get one "training
moved" push with the new local time, and a reminder offset they already had is not repeated for the new
time, unless the move is large (TRAININGS_MOVE_REPEAT_MINUTES). Moves before, between and after reminders."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from reminders.models import Occurrence
from tests.conftest import drain_queue
from tests.trainings.conftest import fire
from trainings.models import (
    InvitationStatus,
    Push,
    PushStatus,
    ReminderRule,
    ReminderRun,
    RunOutcome,
    Team,
    Training,
)
from trainings.planning import kinds
from trainings.planning.writes import invitation_respond, training_create, training_update
from trainings.reminding.held import quiet_release_key
from trainings.reminding.notices import moved_notice_key
from trainings.selectors import job_key

pytestmark = pytest.mark.rabbitmq

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)  # 18:00 in Paris


@pytest.fixture
def training(team: Team, push_queue: str) -> Training:
    end = START + dt.timedelta(minutes=90)
    return training_create(team=team, title="Speed session", start=START, end=end, time_zone="Europe/Paris")


def _pre(training: Training, rules: dict[str, ReminderRule], minutes: int) -> Occurrence:
    at = training.start - dt.timedelta(minutes=minutes)
    return Occurrence.objects.get(job__key=job_key(training_id=training.pk, rule=rules["pre-questionnaire"]),
                                  fire_at=at)  # fmt: skip


def _move(training: Training, minutes: int) -> Training:
    delta = dt.timedelta(minutes=minutes)
    return training_update(training=training, start=training.start + delta, end=training.end + delta)


def _notice(training: Training) -> Occurrence:
    return Occurrence.objects.filter(job__key=moved_notice_key(training_id=training.pk)).latest("id")


def test_a_move_between_reminders_sends_one_moved_push_and_repeats_no_offset(
    training: Training, rules: dict[str, ReminderRule], push_queue: str
) -> None:
    fire(_pre(training, rules, 90))
    assert len(drain_queue(push_queue, expect=3)) == 3

    training = _move(training, 20)  # 18:20 Paris: the 90-min reminder would come again at 16:50
    fire(_notice(training))

    moved = [json.loads(m.body) for m in drain_queue(push_queue, expect=3)]
    assert {m["kind"] for m in moved} == {kinds.MOVED.code}
    by_language = {m["language"]: m for m in moved}
    assert (
        by_language["en"]["body"] == "Speed session now starts on June 11, 2030 at 6:20 p.m. (Europe/Paris)."
    )
    assert by_language["fr"]["title"] == "Entraînement déplacé : Speed session"

    fire(_pre(training, rules, 90))  # the new 90-min instant: everyone had "90 min before" already
    assert drain_queue(push_queue) == []
    run = ReminderRun.objects.get(occurrence_key=_pre(training, rules, 90).idempotency_key)
    assert run.outcome == RunOutcome.NOBODY_LEFT
    fire(_pre(training, rules, 75))  # the next offset goes out as usual
    assert len(drain_queue(push_queue, expect=3)) == 3
    assert Push.objects.filter(kind=kinds.MOVED.code).count() == 3


def test_a_large_move_reminds_again(
    training: Training, rules: dict[str, ReminderRule], push_queue: str, settings: Any
) -> None:
    settings.TRAININGS_MOVE_REPEAT_MINUTES = 120
    fire(_pre(training, rules, 90))
    drain_queue(push_queue, expect=3)
    training = _move(training, 24 * 60)  # to the next day
    fire(_notice(training))
    assert len(drain_queue(push_queue, expect=3)) == 3  # the moved notices
    fire(_pre(training, rules, 90))
    assert len(drain_queue(push_queue, expect=3)) == 3  # a day later, "90 min before" is worth repeating


def test_a_move_before_any_reminder_notifies_nobody(
    training: Training, rules: dict[str, ReminderRule], push_queue: str
) -> None:
    training = _move(training, 30)
    fire(_notice(training))
    assert drain_queue(push_queue) == []
    fire(_pre(training, rules, 90))
    assert len(drain_queue(push_queue, expect=3)) == 3


def test_a_move_after_the_last_reminder_notifies_everyone_reminded_once(
    training: Training, rules: dict[str, ReminderRule], push_queue: str
) -> None:
    for minutes in (90, 75, 60, 45, 30, 15):
        fire(_pre(training, rules, minutes))
    assert len(drain_queue(push_queue, expect=18)) == 18
    training = _move(training, 10)
    fire(_notice(training))
    assert len(drain_queue(push_queue, expect=3)) == 3  # one per player, not one per reminder they had
    for minutes in (90, 75, 60, 45, 30, 15):
        fire(_pre(training, rules, minutes))
    assert drain_queue(push_queue) == []  # every offset already given, the move is small


def test_a_notice_superseded_by_a_newer_move_sends_nothing(
    training: Training, rules: dict[str, ReminderRule], push_queue: str
) -> None:
    fire(_pre(training, rules, 90))
    drain_queue(push_queue, expect=3)
    first = _move(training, 10)
    notice = _notice(first)
    training_update(training=first, title="Renamed")  # not a move: no new notice
    assert _notice(first).pk == notice.pk
    second = _move(first, 10)
    assert Occurrence.objects.get(pk=notice.pk).status == "cancelled"  # replaced by the newer move's notice
    fire(_notice(second))
    assert len(drain_queue(push_queue, expect=3)) == 3
    assert Push.objects.filter(kind=kinds.MOVED.code, status=PushStatus.SENT).count() == 3


def test_a_decline_of_another_training_does_not_exclude_a_player_from_the_notice(
    training: Training, rules: dict[str, ReminderRule], push_queue: str, team: Team
) -> None:
    other = training_create(team=team, title="Other", start=START + dt.timedelta(days=2),
                            end=START + dt.timedelta(days=2, hours=1), time_zone="Europe/Paris")  # fmt: skip
    alice = team.players.get(name="Alice")
    invitation_respond(invitation=other.invitations.get(player=alice), status=InvitationStatus.DENIED)
    fire(_pre(training, rules, 90))
    drain_queue(push_queue, expect=3)

    training = _move(training, 20)
    fire(_notice(training))

    notified = {m["player"] for m in map(json.loads, (m.body for m in drain_queue(push_queue, expect=3)))}
    assert alice.pk in notified and len(notified) == 3


def test_a_decline_of_this_training_excludes_the_player_from_the_notice(
    training: Training, rules: dict[str, ReminderRule], push_queue: str, team: Team
) -> None:
    fire(_pre(training, rules, 90))
    drain_queue(push_queue, expect=3)
    alice = team.players.get(name="Alice")
    invitation_respond(invitation=training.invitations.get(player=alice), status=InvitationStatus.DENIED)

    training = _move(training, 20)
    fire(_notice(training))

    notified = {m["player"] for m in map(json.loads, (m.body for m in drain_queue(push_queue, expect=2)))}
    assert alice.pk not in notified and len(notified) == 2


def _quiet_now(team: Team, *, before: int, after: int) -> dt.datetime:
    """Give the team quiet hours from `before` minutes before now to `after` minutes after (Paris time);
    returns when they end."""
    now = timezone.now().replace(second=0, microsecond=0)
    paris = ZoneInfo("Europe/Paris")
    team.quiet_start = (now - dt.timedelta(minutes=before)).astimezone(paris).time()
    team.quiet_end = (now + dt.timedelta(minutes=after)).astimezone(paris).time()
    team.save()
    return now + dt.timedelta(minutes=after)


def _notice_held(
    training: Training, rules: dict[str, ReminderRule], push_queue: str, team: Team
) -> tuple[Training, dt.datetime]:
    """Everyone reminded, then the training moved in their quiet hours: its notice held until they end."""
    fire(_pre(training, rules, 90))
    drain_queue(push_queue, expect=3)
    end = _quiet_now(team, before=60, after=120)
    training = _move(training, 20)
    fire(_notice(training))
    return training, end


def test_a_moved_notice_in_quiet_hours_is_held_until_they_end(
    training: Training, rules: dict[str, ReminderRule], push_queue: str, team: Team
) -> None:
    training, end = _notice_held(training, rules, push_queue, team)

    assert drain_queue(push_queue) == []
    moved = Push.objects.filter(kind=kinds.MOVED.code)
    assert {(p.status, p.release_at) for p in moved} == {(PushStatus.HELD, end)}
    release = Occurrence.objects.get(job__key=quiet_release_key(training_id=training.pk, rule=None))
    assert release.fire_at == end
    fire(release)
    bodies = [json.loads(m.body) for m in drain_queue(push_queue, expect=3)]
    assert {b["kind"] for b in bodies} == {kinds.MOVED.code}
    assert {p.status for p in Push.objects.filter(kind=kinds.MOVED.code)} == {PushStatus.SENT}


def test_a_held_moved_notice_is_withdrawn_for_a_player_who_declines_while_it_is_held(
    training: Training, rules: dict[str, ReminderRule], push_queue: str, team: Team
) -> None:
    training, _ = _notice_held(training, rules, push_queue, team)
    alice = training.invitations.get(player__name="Alice")
    invitation_respond(invitation=alice, status=InvitationStatus.DENIED)

    fire(Occurrence.objects.get(job__key=quiet_release_key(training_id=training.pk, rule=None)))

    bodies = [json.loads(m.body) for m in drain_queue(push_queue, expect=2)]
    assert alice.player_id not in {b["player"] for b in bodies}
    withdrawn = Push.objects.get(kind=kinds.MOVED.code, player=alice.player_id)
    assert (withdrawn.status, withdrawn.status_reason) == (PushStatus.WITHDRAWN, "answered while held")
    sent = Push.objects.filter(kind=kinds.MOVED.code, status=PushStatus.SENT)
    texts = {"Training moved: Speed session", "Entraînement déplacé : Speed session"}  # their languages
    assert len(sent) == 2 and {p.title for p in sent} <= texts


def test_a_move_to_before_the_quiet_hours_end_breaks_through_with_the_reason(
    training: Training, rules: dict[str, ReminderRule], push_queue: str, team: Team
) -> None:
    fire(_pre(training, rules, 90))
    drain_queue(push_queue, expect=3)
    _quiet_now(team, before=60, after=180)
    soon = timezone.now().replace(second=0, microsecond=0) + dt.timedelta(minutes=120)

    training = training_update(training=training, start=soon, end=soon + dt.timedelta(hours=1))
    fire(_notice(training))

    assert len(drain_queue(push_queue, expect=3)) == 3
    moved = list(Push.objects.filter(kind=kinds.MOVED.code))
    assert {p.status for p in moved} == {PushStatus.SENT}
    assert all(p.status_reason.startswith("sent in quiet hours: the training now starts") for p in moved)


def test_a_held_reminder_is_released_with_the_new_start_time(
    team: Team, rules: dict[str, ReminderRule], push_queue: str
) -> None:
    team.quiet_start, team.quiet_end = dt.time(22), dt.time(7)
    team.save()
    start = dt.datetime(2030, 6, 11, 5, 30, tzinfo=dt.UTC)  # 07:30 Paris; the 90 fires at 06:00, held
    training = training_create(team=team, title="Dawn", start=start, end=start + dt.timedelta(hours=1),
                               time_zone="Europe/Paris")  # fmt: skip
    fire(_pre(training, rules, 90))
    assert {p.status for p in Push.objects.all()} == {PushStatus.HELD}

    training = _move(training, -20)  # 07:10: still after the window's end, 07:00
    release = Occurrence.objects.get(
        job__key=quiet_release_key(training_id=training.pk, rule=rules["pre-questionnaire"])
    )
    fire(release)

    bodies = [json.loads(m.body) for m in drain_queue(push_queue, expect=3)]
    assert {b["expires_at"] for b in bodies} == {training.start.isoformat()}
    english = next(b for b in bodies if b["language"] == "en")
    assert "7:10" in english["body"] and "7:30" not in english["body"], english["body"]


def test_a_held_reminder_is_skipped_when_a_move_makes_it_arrive_after_the_start(
    team: Team, rules: dict[str, ReminderRule], push_queue: str
) -> None:
    team.quiet_start, team.quiet_end = dt.time(22), dt.time(7)
    team.save()
    start = dt.datetime(2030, 6, 11, 5, 30, tzinfo=dt.UTC)  # 07:30 Paris
    training = training_create(team=team, title="Dawn", start=start, end=start + dt.timedelta(hours=1),
                               time_zone="Europe/Paris")  # fmt: skip
    fire(_pre(training, rules, 90))

    training = _move(training, -40)  # 06:50, before the window ends at 07:00
    release = Occurrence.objects.get(
        job__key=quiet_release_key(training_id=training.pk, rule=rules["pre-questionnaire"])
    )
    fire(release)

    assert drain_queue(push_queue) == []
    pushes = list(Push.objects.exclude(kind=kinds.MOVED.code))
    assert {p.status for p in pushes} == {PushStatus.SKIPPED}
    assert all("of no use after" in p.status_reason for p in pushes)


def test_a_held_reminder_of_a_training_moved_a_long_way_is_withdrawn_and_reminded_again(
    team: Team, rules: dict[str, ReminderRule], push_queue: str, settings: Any
) -> None:
    settings.TRAININGS_MOVE_REPEAT_MINUTES = 120
    team.quiet_start, team.quiet_end = dt.time(22), dt.time(7)
    team.save()
    start = dt.datetime(2030, 6, 11, 5, 30, tzinfo=dt.UTC)  # 07:30 Paris; the 90 fires at 06:00, held
    training = training_create(team=team, title="Dawn", start=start, end=start + dt.timedelta(hours=1),
                               time_zone="Europe/Paris")  # fmt: skip
    fire(_pre(training, rules, 90))

    training = _move(training, 24 * 60)  # to the next day: its own 90-minute reminder will come
    fire(Occurrence.objects.get(job__key=quiet_release_key(training_id=training.pk,
                                                           rule=rules["pre-questionnaire"])))  # fmt: skip

    assert drain_queue(push_queue) == []
    assert {p.status for p in Push.objects.all()} == {PushStatus.WITHDRAWN}
    fire(_pre(training, rules, 90))  # 06:00 the next day: held again for that night's window
    assert Push.objects.filter(status=PushStatus.HELD).count() == 3
