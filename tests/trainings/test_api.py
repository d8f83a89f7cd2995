"""Trainings API: CRUD with the player list, answers, invitation responses, timeline, and who may do what."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from rest_framework.test import APIClient

from reminders.models import Occurrence, OccurrenceStatus
from tests.factories import MembershipFactory, PlayerFactory, TeamFactory, UserFactory, training_made
from trainings.models import InvitationStatus, Player, QuestionnaireAnswer, Team, Training

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)


def _client(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def api_a(coach) -> APIClient:
    return _client(coach)


@pytest.fixture
def team_b(db: None) -> Team:
    team = TeamFactory(name="Seniors", coaches=[UserFactory(username="coach-b")])
    MembershipFactory(team=team, player=PlayerFactory(name="Zoe"))
    return team


@pytest.fixture
def training_b(team_b: Team) -> Training:
    return training_made(team_b, START, minutes=60, title="B session")


def _body(team: Team, **overrides: Any) -> dict[str, Any]:
    body = {
        "team": team.pk,
        "title": "Speed session",
        "start": "2030-06-11T18:00:00+02:00",
        "end": "2030-06-11T19:30:00+02:00",
        "time_zone": "Europe/Paris",
        "location": "Stadium",
    }
    body.update(overrides)
    return body


def _pending(training_id: str) -> int:
    return Occurrence.objects.filter(
        job__key__startswith=f"training-{training_id}-", status=OccurrenceStatus.SCHEDULED
    ).count()


def test_it_creates_a_training_with_its_players_and_schedules_its_reminders(api_a, team) -> None:
    alice, bruno = Player.objects.get(name="Alice"), Player.objects.get(name="Bruno")
    response = api_a.post("/api/trainings/", _body(team, players=[alice.pk, bruno.pk]), format="json")
    assert response.status_code == 201, response.json()
    data = response.json()
    assert data["players"] == sorted([alice.pk, bruno.pk])
    assert data["start"] == "2030-06-11T16:00:00+00:00"
    assert {i["status"] for i in data["invitations"]} == {"PENDING"}
    assert _pending(data["id"]) == 22


def test_it_updates_partially_and_moves_the_reminders(api_a, team) -> None:
    created = api_a.post("/api/trainings/", _body(team), format="json").json()
    response = api_a.patch(
        f"/api/trainings/{created['id']}/",
        {"start": "2030-06-11T18:30:00+02:00", "end": "2030-06-11T20:00:00+02:00"},
        format="json",
    )
    assert response.status_code == 200, response.json()
    first = Occurrence.objects.filter(
        job__key=f"training-{created['id']}-pre-questionnaire", status=OccurrenceStatus.SCHEDULED
    ).earliest("fire_at")
    assert first.fire_at == START + dt.timedelta(minutes=30 - 90)
    assert _pending(created["id"]) == 22


def test_it_replaces_a_training_and_its_player_list(api_a, team) -> None:
    created = api_a.post("/api/trainings/", _body(team), format="json").json()
    chloe = Player.objects.get(name="Chloe")
    response = api_a.put(
        f"/api/trainings/{created['id']}/", _body(team, title="Renamed", players=[chloe.pk]), format="json"
    )
    assert response.status_code == 200, response.json()
    assert response.json()["title"] == "Renamed"
    assert response.json()["players"] == [chloe.pk]


def test_cancelling_through_patch_cancels_the_reminders(api_a, team) -> None:
    created = api_a.post("/api/trainings/", _body(team), format="json").json()
    response = api_a.patch(f"/api/trainings/{created['id']}/", {"cancelled": True}, format="json")
    assert response.status_code == 200
    assert _pending(created["id"]) == 0


def test_delete_cancels_every_pending_reminder(api_a, team) -> None:
    created = api_a.post("/api/trainings/", _body(team), format="json").json()
    assert api_a.delete(f"/api/trainings/{created['id']}/").status_code == 204
    assert _pending(created["id"]) == 0
    assert not Training.objects.filter(pk=created["id"]).exists()


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"start": "2030-06-11T18:00:00"}, "start"),
        ({"end": "2030-06-11T17:00:00+02:00"}, "end"),
        ({"time_zone": "Mars/Olympus"}, "time_zone"),
        ({"title": ""}, "title"),
        ({"cancelled": True}, "cancelled"),
        ({"players": [999999]}, "players"),
    ],
)
def test_bad_input_is_a_400_naming_the_field_and_writes_nothing(api_a, team, overrides, field) -> None:
    response = api_a.post("/api/trainings/", _body(team, **overrides), format="json")
    assert response.status_code == 400
    assert field in response.json()
    assert not Training.objects.exists()
    assert not Occurrence.objects.exists()


def test_a_player_who_left_the_team_cannot_be_listed(api_a, team) -> None:
    gone = Player.objects.get(name="Gone")
    response = api_a.post("/api/trainings/", _body(team, players=[gone.pk]), format="json")
    assert response.status_code == 400
    assert "players" in response.json()


def test_it_records_an_answer_and_an_invitation_response(api_a, team) -> None:
    created = api_a.post("/api/trainings/", _body(team), format="json").json()
    alice = Player.objects.get(name="Alice")
    url = f"/api/trainings/{created['id']}"
    answer = api_a.post(
        f"{url}/answers/", {"player": alice.pk, "phase": "POST", "answers": {"rpe": 6}}, format="json"
    )
    assert answer.status_code == 201, answer.json()
    assert QuestionnaireAnswer.objects.get(training_id=created["id"], player=alice).answers == {"rpe": 6}

    response = api_a.post(f"{url}/invitation/", {"player": alice.pk, "status": "ACCEPTED"}, format="json")
    assert response.status_code == 200
    assert response.json()["status"] == InvitationStatus.ACCEPTED
    assert response.json()["responded_at"] is not None


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("answers", {"phase": "DURING"}, "phase"),
        ("answers", {"player": 999999, "phase": "PRE"}, "player"),
        ("invitation", {"status": "PENDING"}, "status"),
        ("invitation", {"player": 999999, "status": "DENIED"}, "player"),
    ],
)
def test_bad_responses_are_400s_naming_the_field(api_a, team, path, body, field) -> None:
    created = api_a.post("/api/trainings/", _body(team), format="json").json()
    body = {"player": Player.objects.get(name="Alice").pk, **body}
    response = api_a.post(f"/api/trainings/{created['id']}/{path}/", body, format="json")
    assert response.status_code == 400
    assert field in response.json()


def test_the_timeline_lists_every_occurrence_with_its_rule(api_a, team) -> None:
    created = api_a.post("/api/trainings/", _body(team), format="json").json()
    response = api_a.get(f"/api/trainings/{created['id']}/timeline/")
    assert response.status_code == 200
    entries = response.json()
    assert len(entries) == 22
    assert entries[0]["rule"] == "invitation" and entries[0]["fire_at"] == "2030-06-08T16:00:00Z"
    assert {e["status"] for e in entries} == {"scheduled"}
    assert entries[0]["players_reached"] == 0 and entries[0]["outcome"] is None


# --- permissions ----------------------------------------------------------------------------------------


def test_anonymous_is_401(team, training_b) -> None:
    client = APIClient()
    assert client.get("/api/trainings/").status_code == 401
    assert client.get(f"/api/trainings/{training_b.pk}/").status_code == 401
    assert client.post("/api/trainings/", _body(team), format="json").status_code == 401


def test_coach_a_cannot_see_or_change_coach_bs_trainings(api_a, training_b) -> None:
    url = f"/api/trainings/{training_b.pk}"
    assert api_a.get("/api/trainings/").json()["results"] == []
    assert api_a.get(f"{url}/").status_code == 404
    assert api_a.patch(f"{url}/", {"title": "mine"}, format="json").status_code == 404
    assert api_a.put(f"{url}/", _body(training_b.team), format="json").status_code == 404
    assert api_a.delete(f"{url}/").status_code == 404
    assert api_a.get(f"{url}/timeline/").status_code == 404
    zoe = Player.objects.get(name="Zoe")
    assert api_a.post(f"{url}/answers/", {"player": zoe.pk, "phase": "PRE"}, format="json").status_code == 404
    response = api_a.post(f"{url}/invitation/", {"player": zoe.pk, "status": "DENIED"}, format="json")
    assert response.status_code == 404
    training_b.refresh_from_db()
    assert training_b.title == "B session" and _pending(str(training_b.pk)) == 22


def test_coach_a_cannot_schedule_for_coach_bs_team_or_players(api_a, team, team_b) -> None:
    response = api_a.post("/api/trainings/", _body(team_b), format="json")
    assert response.status_code == 400 and "team" in response.json()
    zoe = Player.objects.get(name="Zoe")
    response = api_a.post("/api/trainings/", _body(team, players=[zoe.pk]), format="json")
    assert response.status_code == 400 and "players" in response.json()
    assert not Training.objects.filter(team=team_b).exists()


def test_the_player_list_is_looked_up_in_one_query_with_the_per_id_answers(
    api_a, coach, team, team_b, django_assert_max_num_queries
) -> None:
    """Each item of `players` gets what DRF's per-id field answers (the player, or the same error at the
    same index), but the ids are looked up together: a list of 1,000 costs no more queries than one."""
    from rest_framework import serializers
    from rest_framework.request import Request
    from rest_framework.test import APIRequestFactory

    from trainings.serializers import TrainingInputSerializer, _ScopedPlayerField

    class PerId(TrainingInputSerializer):
        players = serializers.ListField(child=_ScopedPlayerField(), required=False, max_length=1000)

    request = Request(APIRequestFactory().post("/"))
    request.user = coach
    alice, bruno = Player.objects.filter(name__in=["Alice", "Bruno"]).order_by("name")
    zoe = Player.objects.get(name="Zoe")  # coach B's: not visible, so "does not exist"
    # (A float is cut to its integer by Django's lookup, in both: alice.pk + 0.5 is Alice.)
    mixed = [
        alice.pk,
        str(bruno.pk),
        alice.pk + 0.5,
        zoe.pk,
        999999,
        -1,
        True,
        "x",
        None,
        "",
        2**40,
        2**70,
        [1],
        {},
    ]
    answers = []
    for players in (mixed, [alice.pk, str(bruno.pk)], [alice.pk, str(alice.pk)]):
        per_id, batched = (
            serializer_class(data=_body(team, players=players), context={"request": request})
            for serializer_class in (PerId, TrainingInputSerializer)
        )
        assert (per_id.is_valid(), per_id.errors) == (batched.is_valid(), batched.errors), players
        answers.append(batched)
    assert set(answers[0].errors["players"]) == set(range(3, len(mixed)))  # all but Alice and Bruno
    assert answers[1].errors == {} and answers[1].validated_data["players"] == [alice, bruno]
    assert answers[2].errors == {"players": ["a player is listed twice."]}

    body = _body(team, players=[alice.pk] * 1000)
    with django_assert_max_num_queries(8):
        response = api_a.post("/api/trainings/", body, format="json")
    assert response.json() == {"players": ["a player is listed twice."]}


def test_coach_a_cannot_move_a_training_to_coach_bs_team(api_a, team, team_b) -> None:
    created = api_a.post("/api/trainings/", _body(team), format="json").json()
    response = api_a.patch(f"/api/trainings/{created['id']}/", {"team": team_b.pk}, format="json")
    assert response.status_code == 400 and "team" in response.json()


def test_staff_without_the_operator_permission_are_scoped_like_coaches(training_b) -> None:
    staff = UserFactory(username="staff-coach", is_staff=True)
    assert _client(staff).get(f"/api/trainings/{training_b.pk}/").status_code == 404


def test_operators_see_every_team(training_b) -> None:
    from django.contrib.auth.models import Permission

    operator = UserFactory(username="operator")
    operator.user_permissions.add(Permission.objects.get(codename="manage_all_teams"))
    assert _client(operator).get(f"/api/trainings/{training_b.pk}/").status_code == 200
    superuser = UserFactory(username="root", is_staff=True, is_superuser=True)
    assert _client(superuser).get(f"/api/trainings/{training_b.pk}/").status_code == 200


# --- reminder rules -------------------------------------------------------------------------------------


def test_anyone_signed_in_reads_the_rules(api_a) -> None:
    rules = api_a.get("/api/reminder-rules/").json()
    assert {r["slug"]: r["offsets"] for r in rules}["invitation"] == ["3d", "2d", "1d", "6h"]
    assert APIClient().get("/api/reminder-rules/").status_code == 401


def test_a_coach_cannot_change_a_rule(api_a) -> None:
    response = api_a.patch("/api/reminder-rules/invitation/", {"offsets": ["1d"]}, format="json")
    assert response.status_code == 403


def test_an_operator_changes_a_rule_and_future_trainings_are_rescheduled_after_commit(
    team, django_capture_on_commit_callbacks
) -> None:
    from config.celery import app

    training = training_made(team, START, minutes=60, title="T")
    operator = _client(UserFactory(username="root", is_staff=True, is_superuser=True))
    app.conf.task_always_eager = True
    try:
        with django_capture_on_commit_callbacks(execute=True):
            response = operator.patch(
                "/api/reminder-rules/invitation/", {"offsets": ["1d", "2h"]}, format="json"
            )
    finally:
        app.conf.task_always_eager = False
    assert response.status_code == 200, response.json()
    pending = Occurrence.objects.filter(
        job__key=f"training-{training.pk}-invitation", status=OccurrenceStatus.SCHEDULED
    ).order_by("fire_at")
    assert list(pending.values_list("fire_at", flat=True)) == [
        START - dt.timedelta(days=1),
        START - dt.timedelta(hours=2),
    ]


@pytest.mark.parametrize("body", [{"offsets": ["90 minutes"]}, {"offsets": []}, {"kind": "LATER"}])
def test_a_bad_rule_change_is_a_400_naming_the_field(body) -> None:
    operator = _client(UserFactory(username="root", is_staff=True, is_superuser=True))
    response = operator.patch("/api/reminder-rules/invitation/", body, format="json")
    assert response.status_code == 400
    assert set(response.json()) == set(body)


def test_the_time_zone_defaults_to_the_teams(api_a, team) -> None:
    body = _body(team)
    del body["time_zone"]
    response = api_a.post("/api/trainings/", body, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["time_zone"] == team.time_zone
