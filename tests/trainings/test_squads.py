"""Squad size end to end: a training with `max_players` puts a further accept on the waiting list (the
response reads `waitlisted` in the answer link's answer, the API and the coach's grid), a full squad's
invitation reminder says so and offers the waiting list, and a decline by an accepted player promotes the
first on the waiting list, whose phone (the loopback APNs peer) gets "you're in" in their language."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from django.test import Client

from delivery.gateway.consumer import Outcome, PushSender
from delivery.models import Device
from reminders.models import Occurrence
from tests.clients import api_as
from tests.factories import MembershipFactory, PlayerFactory, TeamFactory, training_made
from tests.peers.apns_fcm import ApnsPeer
from tests.trainings.conftest import fire
from tests.trainings.push_fixtures import left_on
from trainings.admin.html import player_grid_html
from trainings.answers.links import answer_token
from trainings.models import Invitation, InvitationStatus, Player, Push, ReminderRule, Team, Training
from trainings.planning.writes import invitation_respond, training_update
from trainings.selectors import job_key
from trainings.squads.notices import squad_in_key

pytestmark = pytest.mark.django_db

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)  # 18:00 in Paris
NAMES = (("Alice", "en"), ("Bruno", "fr"), ("Chloé", "fr"), ("Dan", "en"))


@pytest.fixture
def squad_team(coach: Any) -> Team:
    team = TeamFactory(name="U15", coaches=[coach])
    for name, language in NAMES:
        player = PlayerFactory(name=name, language=language, time_zone="Europe/Paris")
        MembershipFactory(team=team, player=player)
        Device.objects.create(player=player, provider="apns", platform="ios", token=f"{name}-iphone")
    return team


@pytest.fixture
def two_places(squad_team: Team) -> Training:
    return training_made(squad_team, START, max_players=2)


def _player(name: str) -> Player:
    return Player.objects.get(name=name)


def _answer(client: Client, name: str, training: Training, response: str) -> dict[str, Any]:
    token = answer_token(player_id=_player(name).pk, training_id=training.pk, kind="INVITATION")
    reply = client.post(f"/api/answer-links/{token}/", data=json.dumps({"response": response}),
                        content_type="application/json")  # fmt: skip
    assert reply.status_code == 200, reply.content
    return reply.json()


def _statuses(training: Training) -> dict[str, str]:
    return dict(Invitation.objects.filter(training=training).values_list("player__name", "status"))


def test_an_accept_past_the_maximum_goes_on_the_waiting_list(
    client: Client, two_places: Training, coach: Any
) -> None:
    assert _answer(client, "Alice", two_places, "accepted")["answer"]["response"] == "accepted"
    assert _answer(client, "Bruno", two_places, "accepted")["answer"]["response"] == "accepted"
    third = _answer(client, "Chloé", two_places, "accepted")
    assert (third["changed"], third["answer"]["response"]) == (True, "waitlisted")
    again = _answer(client, "Chloé", two_places, "accepted")  # the same tap again: still in turn
    assert (again["changed"], again["answer"]["response"]) == (False, "waitlisted")
    invitation_respond(invitation=Invitation.objects.get(training=two_places, player__name="Dan"),
                       status=InvitationStatus.ACCEPTED)  # a coach's record of it: the same rule  # fmt: skip
    assert _statuses(two_places) == {"Alice": "ACCEPTED", "Bruno": "ACCEPTED", "Chloé": "WAITLISTED",
                                     "Dan": "WAITLISTED"}  # fmt: skip

    body = api_as(coach).get(f"/api/trainings/{two_places.pk}/").json()
    assert (body["min_players"], body["max_players"]) == (None, 2)
    responses = {row["player"]: row["response"] for row in body["invitations"]}
    assert responses[_player("Chloé").pk] == "waitlisted"
    assert responses[_player("Alice").pk] == "accepted"
    grid = str(player_grid_html(two_places))
    assert grid.count("Waiting list") == 2


def test_a_full_squads_invitation_reminder_offers_the_waiting_list(
    two_places: Training, file_broker: str, settings: Any
) -> None:
    rule = ReminderRule.objects.get(slug="invitation")
    first, second = (
        Occurrence.objects.get(job__key=job_key(training_id=two_places.pk, rule=rule), fire_at=START - days)
        for days in (dt.timedelta(days=3), dt.timedelta(days=2))
    )
    fire(first)  # places open: the usual question
    assert Push.objects.get(occurrence_key=first.idempotency_key, player__name="Dan").title == (
        "Will you come to Speed session?"
    )
    for name in ("Alice", "Bruno"):
        invitation_respond(invitation=Invitation.objects.get(training=two_places, player__name=name),
                           status=InvitationStatus.ACCEPTED)  # fmt: skip
    fire(second)
    pushed = {p.player.name: p for p in Push.objects.filter(occurrence_key=second.idempotency_key)}
    assert sorted(pushed) == ["Chloé", "Dan"]  # the pending ones only
    assert pushed["Dan"].title == "Speed session: the squad is full"
    assert pushed["Dan"].body.startswith("U15: Speed session on ")
    assert "Accept to join the waiting list" in pushed["Dan"].body
    assert pushed["Chloé"].title == "Speed session : l'effectif est complet"
    assert "liste d'attente" in pushed["Chloé"].body
    left_on(file_broker, settings.TRAININGS_PUSH_QUEUE)


def test_a_decline_promotes_the_first_on_the_waiting_list_who_is_told_they_are_in(
    client: Client, two_places: Training, file_broker: str, settings: Any, sender: PushSender,
    apns: ApnsPeer, django_capture_on_commit_callbacks: Any,
) -> None:  # fmt: skip
    for name in ("Alice", "Bruno", "Chloé", "Dan"):  # Chloé first on the waiting list, then Dan
        _answer(client, name, two_places, "accepted")
    assert _answer(client, "Alice", two_places, "denied")["answer"]["response"] == "denied"
    assert _statuses(two_places) == {"Alice": "DENIED", "Bruno": "ACCEPTED", "Chloé": "ACCEPTED",
                                     "Dan": "WAITLISTED"}  # fmt: skip
    notice = Occurrence.objects.get(
        job__key=squad_in_key(training_id=two_places.pk, player_id=_player("Chloé").pk)
    )
    assert (
        not Occurrence.objects.filter(job__key__startswith="trainings-squad-in-")
        .exclude(pk=notice.pk)
        .exists()
    )
    fire(notice)
    bodies = left_on(file_broker, settings.TRAININGS_PUSH_QUEUE)
    assert [(b["player"], b["kind"]) for b in bodies] == [(_player("Chloé").pk, "PROMOTED")]
    assert {h.outcome for h in sender.handle(bodies)} == {Outcome.DELIVERED}
    (phone,) = apns.received
    assert phone.token == "Chloé-iphone"
    assert phone.body["aps"]["alert"] == {
        "title": "C'est bon, tu es dans l'effectif : Speed session",
        "body": "Une place s'est libérée : tu es dans l'effectif pour Speed session le 11 juin 2030 à 18:00 "
        "(Europe/Paris).",
    }

    # A waiting player who declines leaves the list; raising the maximum gives the next one a place at once.
    training_update(training=two_places, max_players=3)
    assert _statuses(two_places)["Dan"] == "ACCEPTED"
    assert Occurrence.objects.filter(
        job__key=squad_in_key(training_id=two_places.pk, player_id=_player("Dan").pk)
    ).exists()


def test_without_a_maximum_nobody_waits_and_clearing_it_takes_everyone(
    client: Client, squad_team: Team
) -> None:
    open_training = training_made(squad_team, START)
    for name in ("Alice", "Bruno", "Chloé"):
        assert _answer(client, name, open_training, "accepted")["answer"]["response"] == "accepted"
    one_place = training_made(squad_team, START + dt.timedelta(days=1), max_players=1)
    for name in ("Alice", "Bruno", "Chloé"):
        _answer(client, name, one_place, "accepted")
    training_update(training=one_place, max_players=None)
    assert set(_statuses(one_place).values()) == {"ACCEPTED", "PENDING"}


def test_the_api_takes_the_squad_size_and_refuses_a_minimum_above_the_maximum(
    squad_team: Team, coach: Any
) -> None:
    api = api_as(coach)
    end = (START + dt.timedelta(hours=2)).isoformat()
    body = {"team": squad_team.pk, "title": "Match", "start": START.isoformat(), "end": end,
            "min_players": 3, "max_players": 2}  # fmt: skip
    refused = api.post("/api/trainings/", body, format="json")
    assert refused.status_code == 400
    assert "min_players" in refused.json()
    assert not Training.objects.filter(title="Match").exists()
    made = api.post("/api/trainings/", {**body, "max_players": 11}, format="json")
    assert made.status_code == 201, made.content
    assert (made.json()["min_players"], made.json()["max_players"]) == (3, 11)
    changed = api.patch(f"/api/trainings/{made.json()['id']}/", {"max_players": None}, format="json")
    assert changed.status_code == 200, changed.content
    assert changed.json()["max_players"] is None
    zero = api.patch(f"/api/trainings/{made.json()['id']}/", {"min_players": 0}, format="json")
    assert zero.status_code == 400 and "min_players" in zero.json()
