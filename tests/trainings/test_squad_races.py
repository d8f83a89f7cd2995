"""Two accepts racing for a training's last place, on PostgreSQL, in threads with their own connections:
exactly one gets the place and the other goes on the waiting list, whether they come through the answer
link (its one-statement path hands a squad's response to the training's lock) or a coach's record; and a
decline racing an accept never leaves a place free while somebody waits."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from tests.concurrency import run_together
from tests.factories import MembershipFactory, PlayerFactory, TeamFactory, training_made
from trainings.answers.following import answer_link_answer
from trainings.answers.links import answer_link_read, answer_token
from trainings.models import Invitation, InvitationStatus, ReminderRule, ReminderTemplate, Training
from trainings.planning.defaults import rules_seed
from trainings.planning.writes import invitation_respond

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)
ROUNDS = 6


@pytest.fixture
def trainings() -> list[Training]:
    rules_seed(ReminderRule, ReminderTemplate)  # a transactional test starts from flushed tables
    team = TeamFactory(name="U15")
    for name in ("Alice", "Bruno", "Chloe"):
        MembershipFactory(team=team, player=PlayerFactory(name=name))
    return [training_made(team, START + dt.timedelta(days=n), max_players=2) for n in range(ROUNDS)]


def _statuses(training: Training) -> dict[str, str]:
    return dict(Invitation.objects.filter(training=training).values_list("player__name", "status"))


def test_two_links_accepting_the_last_place_at_once_give_it_to_one(trainings: list[Training]) -> None:
    for training in trainings:
        invitation_respond(invitation=Invitation.objects.get(training=training, player__name="Alice"),
                           status=InvitationStatus.ACCEPTED)  # fmt: skip
        links = [
            answer_link_read(answer_token(player_id=pk, training_id=training.pk, kind="INVITATION"))
            for pk in Invitation.objects.filter(training=training).exclude(player__name="Alice")
            .order_by("player__name").values_list("player_id", flat=True)
        ]  # fmt: skip

        def accept(slot: int, links: list[Any] = links) -> str:
            return str(answer_link_answer(links[slot], response="accepted")[1].answer["response"])

        assert sorted(run_together(accept)) == ["accepted", "waitlisted"]
        assert sorted(_statuses(training).values()) == ["ACCEPTED", "ACCEPTED", "WAITLISTED"]


def test_two_coaches_records_and_a_decline_racing_an_accept_keep_the_count(trainings: list[Training]) -> None:
    for training in trainings:
        rows = list(Invitation.objects.filter(training=training).order_by("player__name"))
        invitation_respond(invitation=rows[0], status=InvitationStatus.ACCEPTED)

        def accept(slot: int, rows: list[Invitation] = rows) -> str:
            return invitation_respond(invitation=rows[slot + 1], status=InvitationStatus.ACCEPTED).status

        assert sorted(run_together(accept)) == ["ACCEPTED", "WAITLISTED"]

        def churn(slot: int, rows: list[Invitation] = rows) -> str:
            # Alice declines while Chloe (or Bruno, whoever waits) taps accept again.
            row = rows[0] if slot == 0 else next(r for r in rows[1:] if Invitation.objects.get(pk=r.pk).status
                                                  == InvitationStatus.WAITLISTED)  # fmt: skip
            status = InvitationStatus.DENIED if slot == 0 else InvitationStatus.ACCEPTED
            return invitation_respond(invitation=row, status=status).status

        run_together(churn)
        assert sorted(_statuses(training).values()) == ["ACCEPTED", "ACCEPTED", "DENIED"]
