"""Reminder kinds are one table (trainings/planning/kinds.py): a kind added as one entry and its default rule
is scheduled, fired to the players it still chases, answered and shown like the others."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from delivery.messages import PushMessage
from reminders.models import Occurrence, OccurrenceStatus
from tests.conftest import drain_queue
from tests.factories import UserFactory, training_made
from tests.trainings.conftest import fire
from tests.trainings.lineup_kind import LINEUP, RULE
from trainings.admin.operators import ReminderRuleAdmin
from trainings.models import (
    InvitationStatus,
    Player,
    Push,
    ReminderRule,
    ReminderRun,
    ReminderTemplate,
    RunOutcome,
    Team,
    Training,
)
from trainings.planning import kinds
from trainings.planning.defaults import rules_seed
from trainings.planning.windows import CLOSED, NOT_YET, OPEN, window_state
from trainings.planning.writes import answer_record, invitation_respond
from trainings.reminding.recipients import reminder_recipients, reminder_recipients_many
from trainings.selectors import job_key

pytestmark = pytest.mark.django_db

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)


@pytest.fixture
def lineup(rules: dict[str, ReminderRule]) -> Iterator[ReminderRule]:
    kinds.register(LINEUP)
    rules_seed(ReminderRule, ReminderTemplate, specs=[RULE])
    yield ReminderRule.objects.get(slug=RULE["slug"])
    del kinds.KINDS[LINEUP.code]


def _player(name: str) -> Player:
    return Player.objects.get(name=name)


def _operator_api() -> APIClient:
    api = APIClient()
    api.force_authenticate(UserFactory(is_staff=True, is_superuser=True))
    return api


def _lineup_occurrence(training: Training, rule: ReminderRule) -> Occurrence:
    return Occurrence.objects.get(job__key=job_key(training_id=training.pk, rule=rule))


def test_it_schedules_the_new_kind_from_its_anchor(team: Team, lineup: ReminderRule) -> None:
    training = training_made(team, START)

    occurrence = _lineup_occurrence(training, lineup)
    assert (occurrence.fire_at, occurrence.status) == (
        START - dt.timedelta(hours=2),
        OccurrenceStatus.SCHEDULED,
    )


@pytest.mark.rabbitmq  # reads the push queue
def test_it_fires_to_the_players_it_still_chases_only(
    team: Team, lineup: ReminderRule, push_queue: str
) -> None:
    training = training_made(team, START)
    for name in ("Alice", "Bruno"):
        invitation_respond(
            invitation=training.invitations.get(player__name=name), status=InvitationStatus.ACCEPTED
        )
    answer_record(training=training, player=_player("Alice"), phase=LINEUP.code, answers={"confirmed": True})
    # Chloe has not accepted: the lineup does not ask her.

    expected = {_player("Bruno").pk}
    assert set(reminder_recipients(training=training, rule=lineup).values_list("pk", flat=True)) == expected
    many = reminder_recipients_many([(training, LINEUP.code)])
    assert {r.pk for r in many[training.pk, LINEUP.code]} == expected

    occurrence = _lineup_occurrence(training, lineup)
    assert fire(occurrence).delivered == 1

    push = Push.objects.get(occurrence_key=occurrence.idempotency_key)
    assert (push.player_id, push.kind, push.expires_at, push.title) == (
        _player("Bruno").pk, "LINEUP", START, "Lineup: Speed session"
    )  # fmt: skip
    assert push.get_kind_display() == "Match-day lineup confirmation"
    [message] = [json.loads(m.body) for m in drain_queue(push_queue, expect=1)]
    assert (message["kind"], message["player"]) == ("LINEUP", _player("Bruno").pk)
    on_the_phone = PushMessage.from_body(message)
    assert on_the_phone.data["screen"] == "lineup"  # the app opens the kind's own screen
    assert on_the_phone.answer_fields["category"] == "TRAINING_QUESTIONNAIRE"
    assert "actions" not in on_the_phone.answer_fields
    run = ReminderRun.objects.get(occurrence_key=occurrence.idempotency_key)
    assert (run.outcome, run.recipients) == (RunOutcome.SENT, 1)


def test_its_answer_and_its_rule_are_accepted_where_the_others_are(team: Team, lineup: ReminderRule) -> None:
    training = training_made(team, START)
    api = _operator_api()

    answered = api.post(
        f"/api/trainings/{training.pk}/answers/",
        {"player": _player("Alice").pk, "phase": "LINEUP", "answers": {"confirmed": True}},
        format="json",
    )
    assert answered.status_code == 201, answered.content
    changed = api.patch(f"/api/reminder-rules/{lineup.slug}/", {"offsets": ["3h"]}, format="json")
    assert changed.status_code == 200, changed.content

    ReminderRule(slug="lineup-copy", kind="LINEUP", offsets=["1h"]).full_clean()
    assert ReminderRuleAdmin(ReminderRule, admin.site).readable_offsets(lineup) == "2 h before the start"
    lineup.refresh_from_db()  # 3 h before the start: the window of its answers opens then
    states = [window_state(training, "LINEUP", [lineup], START - dt.timedelta(hours=h)) for h in (4, 2, 0)]
    assert states == [NOT_YET, OPEN, CLOSED]


def test_the_coachs_list_and_grid_show_its_answers_in_a_column_of_their_own(
    team: Team, lineup: ReminderRule
) -> None:
    training = training_made(team, timezone.now() + dt.timedelta(hours=1), title="Match day")
    for name in ("Alice", "Bruno"):
        invitation_respond(
            invitation=training.invitations.get(player__name=name), status=InvitationStatus.ACCEPTED
        )
    answer_record(training=training, player=_player("Alice"), phase=LINEUP.code, answers={"confirmed": True})
    coach = Client()
    coach.force_login(UserFactory(is_staff=True, is_superuser=True))

    listing = coach.get("/admin/trainings/training/").content.decode()
    # Beside the others, not instead of them.
    assert "<span>Lineup answers</span>" in listing and "<span>Pre answers</span>" in listing
    row = listing.split("Match day", 1)[1].split("</tr>", 1)[0]
    lineup_cell = row.split('class="field-lineup_questionnaire"', 1)[1].split("</td>", 1)[0]
    assert "1 ✓" in lineup_cell and "1 owed" in lineup_cell  # Bruno; Chloe has not accepted: not asked

    page = coach.get(f"/admin/trainings/training/{training.pk}/change/").content.decode()
    grid = page.split('class="player-grid"', 1)[1].split("</table>", 1)[0]
    headings = [h.split("</th>", 1)[0] for h in grid.split("<th>")[1:]]
    assert headings[2:5] == ["pre questionnaire", "post questionnaire", "lineup questionnaire"]
    rows = {r.split("<td>", 2)[1].split("</td>", 1)[0]: r.split("<td>")[1:] for r in grid.split("<tr>")[2:]}
    assert "grid-ok" in rows["Alice"][4] and "grid-owed" in rows["Bruno"][4]


def test_a_code_no_kind_has_is_refused_at_the_boundaries(team: Team) -> None:
    with pytest.raises(ValidationError, match="kind"):
        ReminderRule(slug="lineup-copy", kind="LINEUP", offsets=["1h"]).full_clean()
    training = training_made(team, START)
    api = _operator_api()
    refused = api.patch("/api/reminder-rules/invitation/", {"kind": "LINEUP"}, format="json")
    assert refused.status_code == 400
    assert "kind" in refused.json()
    answered = api.post(
        f"/api/trainings/{training.pk}/answers/",
        {"player": _player("Alice").pk, "phase": "LINEUP", "answers": {"confirmed": True}},
        format="json",
    )
    assert answered.status_code == 400
    assert "phase" in answered.json()


def test_the_table_says_where_each_kind_counts_from_and_when_it_closes(settings: Any) -> None:
    settings.TRAININGS_POST_QUESTIONNAIRE_HOURS = 24
    training = Training(start=START, end=START + dt.timedelta(minutes=90), time_zone="Europe/Paris")
    assert [(k.code, k.when, k.closes(training)) for k in kinds.KINDS.values()] == [
        ("PRE", "before the start", START),
        ("POST", "after the end", START + dt.timedelta(minutes=90, hours=24)),
        ("INVITATION", "before the start", START),
        ("MOVED", "before the start", START),
        ("CANCELLED", "before the start", START),
        ("DIGEST", "before the start", START),
        ("SUMMARY", "before the start", START),
        ("DECLINED", "before the start", START),
    ]
    assert [code for code, _ in kinds.rule_choices()] == ["PRE", "POST", "INVITATION"]
    assert [code for code, _ in kinds.any_rule_choices()] == [
        "PRE", "POST", "INVITATION", "DIGEST", "SUMMARY", "DECLINED"
    ]  # fmt: skip
    assert [code for code, _ in kinds.questionnaire_choices()] == ["PRE", "POST"]


def test_a_kind_is_refused_when_its_code_does_not_fit_or_it_waits_for_nothing() -> None:
    with pytest.raises(ValueError, match="kind code"):
        kinds.Kind(code="lineup", label="", anchor="start", sign=-1, closes=kinds.at_start,
                   answer=None, screen="", rule=False)  # fmt: skip
    with pytest.raises(ValueError, match="wait for an answer"):
        kinds.Kind(
            code="LINEUP", label="", anchor="start", sign=-1, closes=kinds.at_start, answer=None, screen=""
        )
    with pytest.raises(ValueError, match="notice says something"):
        kinds.Kind(code="CANCELLED", label="", anchor="start", sign=-1, closes=kinds.at_start, answer=None,
                   screen="", rule=False, notice={"fr": ("Annulé", "{title} est annulé.")})  # fmt: skip
    with pytest.raises(ValueError, match="already registered"):
        kinds.register(kinds.Kind(code="PRE", label="Other", anchor="end", sign=1, closes=kinds.at_start,
                                  answer=kinds.Response(), screen=""))  # fmt: skip
