"""Scenario 10: who may do what, for every trainings API route and every trainings admin page.

Actors: anonymous; coach A on A's own team; coach A and a staff user (no operator permission, coaching no
team) on coach B's team; operators (a user with `trainings.manage_all_teams`, a superuser) on B's team.
The rules: anonymous is 401 everywhere; another team's training is 404 (it does not exist for you), a
write that names another team or its players is a 400 on that field, a list simply leaves it out; reminder
rules are read by anyone signed in and changed by operators only (403). A refused write changes nothing.
Through the engine's API (jobs, bulk, schedules) no caller, operators included, can name the trainings
handler or take a training's job key (400 naming the field).

A route (or admin model) added to the trainings app without a row here fails the coverage tests.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fnmatch import fnmatch
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, resolve, reverse
from rest_framework.test import APIClient

from delivery.models import Device, PushSend, SendStatus
from reminders.models import Job, Occurrence, OccurrenceStatus, Schedule
from tests.data_once import built_once, fresh_copy
from tests.factories import (
    GuardianFactory,
    MembershipFactory,
    PlayerFactory,
    TeamFactory,
    UserFactory,
    rules_seeded,
    scheduler_caller_grant,
    training_made,
)
from tests.fault_table import record
from trainings.access import coach_group_ensure
from trainings.models import (
    Coach,
    CoachPush,
    Experiment,
    Guardian,
    Player,
    Push,
    Questionnaire,
    ReminderRule,
    ReminderRun,
    RunOutcome,
    Team,
    Training,
    WebhookSubscription,
)
from trainings.models.coaches import CoachPushStatus

pytestmark = [pytest.mark.faults, pytest.mark.django_db]

START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)
LISTED, HIDDEN = "listed", "hidden"  # a list answers 200 either way; what matters is the row
_PASSED: Counter[str] = Counter()  # cases that passed, for the fault table's row


@pytest.fixture(scope="module", autouse=True)
def _fault_table_row() -> Iterator[None]:
    yield
    if _PASSED:
        record(
            scenario="Authorization matrix: every route; each trainings API route and admin model",
            fault="requests by anonymous callers, another team's coach, staff without the operator "
            "permission, operators and superusers",
            result=f"{_PASSED['api']} API cases ({len(MATRIX)} route-methods x {len(COLUMNS)} callers) and "
            f"{_PASSED['admin']} admin cases passed: anonymous 401; another team's training 404 (hidden from "
            "lists; create or player list naming it 400); rule changes 403 for non-operators; a refused "
            "write changes nothing; a route or admin model without a row fails the suite; "
            f"{_PASSED['engine']} engine API cases against another team's training ({len(ENGINE_ATTACKS)} "
            f"attacks and a read/cancel of its jobs x {len(ENGINE_CALLERS)} callers, operators included): "
            "the trainings handler named in a job, bulk or schedule, or a training's job key taken first "
            "(by callers holding the scheduler permission and every queue's grant), "
            "is a 400 naming the field; its jobs are 404 to read or cancel; nothing changes; "
            f"{_PASSED['routes']} routes of the whole site (URL conf and OpenAPI schema, {len(ROUTES)} rows "
            "of owner, rule and limit) answered an anonymous caller as their row's rule says",
        )


@dataclass
class Side:
    """One coach's corner: their team, a training of it, a player on it and the player's guardian."""

    coach: Any
    team: Team
    training: Training
    player: Player
    guardian: Guardian


@dataclass
class World:
    a: Side
    b: Side
    users: dict[str, Any]


def _side(name: str, player_name: str) -> Side:
    coach = UserFactory(username=f"coach-{name}", is_staff=True)
    coach.groups.add(coach_group_ensure())
    team = TeamFactory(name=f"Team {name.upper()}", coaches=[coach])
    player = PlayerFactory(name=player_name)
    MembershipFactory(team=team, player=player)
    training = training_made(team, START, minutes=60, title=f"Session {name.upper()}")
    guardian = GuardianFactory(name=f"{player_name}'s mother", player=player)
    return Side(coach=coach, team=team, training=training, player=player, guardian=guardian)


def _world_build() -> World:
    rules_seeded()
    a, b = _side("a", "Alice"), _side("b", "Zoe")
    operator = UserFactory(username="operator", is_staff=True)
    operator.groups.add(coach_group_ensure())  # the admin pages need the model permissions too
    operator.user_permissions.add(Permission.objects.get(codename="manage_all_teams"))
    users = {
        "coach_a": a.coach,
        "staff": UserFactory(username="staff", is_staff=True),
        "operator": operator,
        "superuser": UserFactory(username="root", is_staff=True, is_superuser=True),
    }
    return World(a=a, b=b, users=users)


@pytest.fixture(scope="module")
def _world_shared(django_db_setup: None, django_db_blocker: Any) -> Iterator[World]:
    """Built once for the module's couple of hundred cases (tests/data_once.py): building two teams with
    trainings and reminders took most of each case's time."""
    with built_once(django_db_blocker, _world_build) as shared:
        yield shared


@pytest.fixture
def world(_world_shared: World, db: None) -> World:
    return fresh_copy(_world_shared)


def _training_body(side: Side) -> dict[str, Any]:
    return {
        "team": side.team.pk,
        "title": "Replaced",
        "start": START.isoformat(),
        "end": (START + dt.timedelta(minutes=90)).isoformat(),
        "time_zone": "Europe/Paris",
    }


def _detail(side: Side, suffix: str = "") -> str:
    return f"/api/trainings/{side.training.pk}/{suffix}"


def _experiment(side: Side) -> Experiment:
    """The one timing experiment (on the pre-training rule; every team's, so both sides share it), adaptive
    so that its probabilities route answers too."""
    from trainings.experiments.control import experiment_start

    pre = ReminderRule.objects.get(slug="pre-questionnaire")
    early = [("early", ["120m"])]
    return Experiment.objects.first() or experiment_start(
        rule=pre, name="matrix", variants=early, mode="adaptive"
    )


def _guardian(side: Side, suffix: str = "") -> str:
    return f"/api/guardians/{side.guardian.pk}/{suffix}"


def _coach(side: Side) -> Coach:
    """The side's coach's profile (the digests' recipient), made when first asked."""
    coach, _ = Coach.objects.get_or_create(user=side.coach, defaults={"time_zone": side.team.time_zone})
    return coach


def _coach_device(side: Side) -> Device:
    """The side's coach's one device (an email address for the digests), made when first asked."""
    device, _ = Device.objects.get_or_create(
        coach=_coach(side),
        defaults={"provider": "email", "platform": "email", "token": f"{side.coach}@example.com"},
    )
    return device


def _coach_push(side: Side) -> CoachPush:
    return CoachPush.objects.create(
        key=f"digest-{side.team.name}", occurrence_key=f"occ-digest-{side.team.name}", coach=_coach(side),
        team=side.team, training=side.training, kind="DIGEST", language="en", title="t", body="b",
        fire_at=START, status=CoachPushStatus.SENT,
    )  # fmt: skip


def _webhook(side: Side) -> WebhookSubscription:
    """A subscription of the side's platform (an integration caller, not the coach)."""
    owner = UserFactory(username=f"platform-{side.team.name}")
    owner.user_permissions.add(Permission.objects.get(codename="use_integration_api"))
    subscription, _ = WebhookSubscription.objects.get_or_create(
        owner=owner, defaults={"url": "https://example.com/hook", "events": ["push.outcome"], "secret": "s"}
    )
    return subscription


# What each route is asked, for the given side's objects: (path, JSON body or None).
REQUESTS: dict[tuple[str, str], Callable[[Side], tuple[str, dict[str, Any] | None]]] = {
    ("training-list", "GET"): lambda s: ("/api/trainings/", None),
    ("training-list", "POST"): lambda s: ("/api/trainings/", _training_body(s)),
    ("training-detail", "GET"): lambda s: (_detail(s), None),
    ("training-detail", "PUT"): lambda s: (_detail(s), _training_body(s)),
    ("training-detail", "PATCH"): lambda s: (_detail(s), {"title": "Renamed", "cancelled": True}),
    ("training-detail", "DELETE"): lambda s: (_detail(s), None),
    ("training-answers", "POST"): lambda s: (
        _detail(s, "answers/"),
        {"player": s.player.pk, "phase": "POST", "answers": {"rpe": 5}},  # the built-in session RPE
    ),
    ("training-invitation", "POST"): lambda s: (
        _detail(s, "invitation/"),
        {"player": s.player.pk, "status": "DENIED"},
    ),
    ("training-timeline", "GET"): lambda s: (_detail(s, "timeline/"), None),
    ("reminder-rule-list", "GET"): lambda s: ("/api/reminder-rules/", None),
    ("reminder-rule-detail", "GET"): lambda s: ("/api/reminder-rules/invitation/", None),
    ("reminder-rule-detail", "PUT"): lambda s: (
        "/api/reminder-rules/invitation/",
        {"kind": "INVITATION", "offsets": ["1d"], "active": True},
    ),
    ("reminder-rule-detail", "PATCH"): lambda s: ("/api/reminder-rules/invitation/", {"offsets": ["1d"]}),
    ("player-devices", "GET"): lambda s: (f"/api/players/{s.player.pk}/devices/", None),
    ("player-preferences", "GET"): lambda s: (f"/api/players/{s.player.pk}/preferences/", None),
    ("player-preferences", "PUT"): lambda s: (
        f"/api/players/{s.player.pk}/preferences/",
        {"kinds": [{"kind": "PRE", "muted": True}]},
    ),
    ("player-preferences", "PATCH"): lambda s: (
        f"/api/players/{s.player.pk}/preferences/",
        {"quiet_start": "21:00", "quiet_end": "08:00"},
    ),
    ("player-devices", "POST"): lambda s: (
        f"/api/players/{s.player.pk}/devices/",
        {"platform": "android", "provider": "fcm", "token": "new-token"},
    ),
    ("player-device", "DELETE"): lambda s: (
        f"/api/players/{s.player.pk}/devices/{s.player.devices.get().pk}/",
        None,
    ),
    ("guardian-list", "GET"): lambda s: ("/api/guardians/", None),
    ("guardian-list", "POST"): lambda s: (
        "/api/guardians/",
        {"name": "New", "players": [{"player": s.player.pk}]},
    ),
    ("guardian-detail", "GET"): lambda s: (_guardian(s), None),
    ("guardian-detail", "PUT"): lambda s: (
        _guardian(s),
        {"name": "Renamed", "players": [{"player": s.player.pk, "relation": "father"}]},
    ),
    ("guardian-detail", "PATCH"): lambda s: (_guardian(s), {"name": "Renamed"}),
    ("guardian-detail", "DELETE"): lambda s: (_guardian(s), None),
    ("guardian-devices", "GET"): lambda s: (_guardian(s, "devices/"), None),
    ("guardian-devices", "POST"): lambda s: (
        _guardian(s, "devices/"),
        {"platform": "ios", "provider": "apns", "token": "ab" * 32},
    ),
    ("guardian-device", "DELETE"): lambda s: (_guardian(s, f"devices/{s.guardian.devices.get().pk}/"), None),
    ("guardian-preferences", "GET"): lambda s: (_guardian(s, "preferences/"), None),
    ("guardian-preferences", "PUT"): lambda s: (
        _guardian(s, "preferences/"),
        {"kinds": [{"kind": "PRE", "muted": True}]},
    ),
    ("guardian-preferences", "PATCH"): lambda s: (
        _guardian(s, "preferences/"),
        {"quiet_start": "21:00", "quiet_end": "08:00"},
    ),
    ("guardian-trainings", "GET"): lambda s: (_guardian(s, "trainings/"), None),
    ("analytics-offsets", "GET"): lambda s: (f"/api/analytics/offsets/?team={s.team.pk}", None),
    ("analytics-players", "GET"): lambda s: (f"/api/analytics/players/?team={s.team.pk}", None),
    ("experiment-list", "GET"): lambda s: ("/api/experiments/", None),
    ("experiment-detail", "GET"): lambda s: (f"/api/experiments/{_experiment(s).pk}/", None),
    ("experiment-results", "GET"): lambda s: (f"/api/experiments/{_experiment(s).pk}/results/", None),
    ("experiment-probabilities", "GET"): lambda s: (
        f"/api/experiments/{_experiment(s).pk}/probabilities/",
        None,
    ),
    # The caller's own coach profile and devices: the route names no team, so "on B" asks for one's own;
    # only deleting a device names someone's (the side's coach's).
    ("coach-profile", "GET"): lambda s: ("/api/coach/", None),
    ("coach-profile", "PUT"): lambda s: ("/api/coach/", {"language": "fr"}),
    ("coach-profile", "PATCH"): lambda s: ("/api/coach/", {"quiet_start": "22:00", "quiet_end": "07:00"}),
    ("coach-devices", "GET"): lambda s: ("/api/coach/devices/", None),
    ("coach-devices", "POST"): lambda s: (
        "/api/coach/devices/",
        {"provider": "email", "platform": "email", "token": "digests@example.com"},
    ),
    ("coach-device", "DELETE"): lambda s: (f"/api/coach/devices/{_coach_device(s).pk}/", None),
    ("webhook-list", "GET"): lambda s: ("/api/webhooks/", None),
    ("webhook-list", "POST"): lambda s: (
        "/api/webhooks/",
        {"url": "https://example.com/events", "events": ["answer.recorded"]},
    ),
    ("webhook-detail", "DELETE"): lambda s: (f"/api/webhooks/{_webhook(s).pk}/", None),
    # The roster (trainings/roster/): the side's team and player; creating names no team but a player's.
    ("team-list", "GET"): lambda s: ("/api/teams/", None),
    ("team-list", "POST"): lambda s: ("/api/teams/", {"name": "New team", "external_id": "new"}),
    ("team-detail", "GET"): lambda s: (f"/api/teams/{s.team.pk}/", None),
    ("team-detail", "PATCH"): lambda s: (f"/api/teams/{s.team.pk}/", {"name": "Renamed", "reminds": "both"}),
    ("team-detail", "DELETE"): lambda s: (f"/api/teams/{s.team.pk}/", None),
    ("team-members", "GET"): lambda s: (f"/api/teams/{s.team.pk}/members/", None),
    ("team-members", "PUT"): lambda s: (f"/api/teams/{s.team.pk}/members/", {"players": []}),
    ("player-list", "GET"): lambda s: ("/api/players/", None),
    ("player-list", "POST"): lambda s: ("/api/players/", {"name": "New", "team": s.team.pk}),
    ("player-detail", "GET"): lambda s: (f"/api/players/{s.player.pk}/", None),
    ("player-detail", "PATCH"): lambda s: (
        f"/api/players/{s.player.pk}/",
        {"name": "Renamed", "language": "fr"},
    ),
    ("player-detail", "DELETE"): lambda s: (f"/api/players/{s.player.pk}/", None),
    ("roster-sync", "POST"): lambda s: (
        "/api/roster/",
        {"teams": [{"external_id": "t", "name": "T", "players": [{"external_id": "p", "name": "P"}]}]},
    ),
}

# (actor, whose objects): the columns of the matrix.
COLUMNS = [
    ("anonymous", "b"),
    ("coach_a", "a"),
    ("coach_a", "b"),
    ("staff", "b"),
    ("operator", "b"),
    ("superuser", "b"),
]
# fmt: off
MATRIX: dict[tuple[str, str], tuple[int | str, ...]] = {
    #                                      anonymous  own      coach A on B  staff on B  operator  superuser
    ("training-list", "GET"):              (401,      LISTED,  HIDDEN,       HIDDEN,     LISTED,   LISTED),
    ("training-list", "POST"):             (401,      201,     400,          400,        201,      201),
    ("training-detail", "GET"):            (401,      200,     404,          404,        200,      200),
    ("training-detail", "PUT"):            (401,      200,     404,          404,        200,      200),
    ("training-detail", "PATCH"):          (401,      200,     404,          404,        200,      200),
    ("training-detail", "DELETE"):         (401,      204,     404,          404,        204,      204),
    ("training-answers", "POST"):          (401,      201,     404,          404,        201,      201),
    ("training-invitation", "POST"):       (401,      200,     404,          404,        200,      200),
    ("training-timeline", "GET"):          (401,      200,     404,          404,        200,      200),
    ("reminder-rule-list", "GET"):         (401,      200,     200,          200,        200,      200),
    ("reminder-rule-detail", "GET"):       (401,      200,     200,          200,        200,      200),
    ("reminder-rule-detail", "PUT"):       (401,      403,     403,          403,        200,      200),
    ("reminder-rule-detail", "PATCH"):     (401,      403,     403,          403,        200,      200),
    # Devices: coaches and operators read them (tests/trainings/test_devices_api.py).
    ("player-devices", "GET"):             (401,      200,     404,          404,        200,      200),
    # Coaches and operators read a player's preferences; only the player (an account linked to them) writes.
    ("player-preferences", "GET"):         (401,      200,     404,          404,        200,      200),
    ("player-preferences", "PUT"):         (401,      403,     404,          404,        403,      403),
    ("player-preferences", "PATCH"):       (401,      403,     404,          404,        403,      403),
    # Registering and removing: the player, or an integration caller on their behalf (superusers hold every
    # permission, trainings.use_integration_api too; tests/trainings/test_devices_on_behalf.py).
    ("player-devices", "POST"):            (401,      403,     404,          404,        403,      201),
    ("player-device", "DELETE"):           (401,      403,     404,          404,        403,      204),
    # Guardians: coaches of their players and operators manage them; only the guardian (an account linked
    # to them) writes preferences, and registers devices (or an integration caller on their behalf, as for
    # players) (tests/trainings/test_guardians_api.py).
    ("guardian-list", "GET"):              (401,      LISTED,  HIDDEN,       HIDDEN,     LISTED,   LISTED),
    ("guardian-list", "POST"):             (401,      201,     400,          400,        201,      201),
    ("guardian-detail", "GET"):            (401,      200,     404,          404,        200,      200),
    ("guardian-detail", "PUT"):            (401,      200,     404,          404,        200,      200),
    ("guardian-detail", "PATCH"):          (401,      200,     404,          404,        200,      200),
    ("guardian-detail", "DELETE"):         (401,      204,     404,          404,        204,      204),
    ("guardian-devices", "GET"):           (401,      200,     404,          404,        200,      200),
    ("guardian-devices", "POST"):          (401,      403,     404,          404,        403,      201),
    ("guardian-device", "DELETE"):         (401,      403,     404,          404,        403,      204),
    ("guardian-preferences", "GET"):       (401,      200,     404,          404,        200,      200),
    ("guardian-preferences", "PUT"):       (401,      403,     404,          404,        403,      403),
    ("guardian-preferences", "PATCH"):     (401,      403,     404,          404,        403,      403),
    ("guardian-trainings", "GET"):         (401,      200,     404,          404,        200,      200),
    # Analytics: a team the caller may not see is a 400 on `team`, like any other bad field.
    ("analytics-offsets", "GET"):          (401,      200,     400,          400,        200,      200),
    ("analytics-players", "GET"):          (401,      200,     400,          400,        200,      200),
    # Experiments span every team: operators only (trainings/experiments/views.py).
    ("experiment-list", "GET"):            (401,      403,     403,          403,        200,      200),
    ("experiment-detail", "GET"):          (401,      403,     403,          403,        200,      200),
    ("experiment-results", "GET"):         (401,      403,     403,          403,        200,      200),
    ("experiment-probabilities", "GET"):   (401,      403,     403,          403,        200,      200),
    # A coach's own digest settings: anyone who coaches no team (staff, operators, superusers here) is 404.
    ("coach-profile", "GET"):              (401,      200,     200,          404,        404,      404),
    ("coach-profile", "PUT"):              (401,      200,     200,          404,        404,      404),
    ("coach-profile", "PATCH"):            (401,      200,     200,          404,        404,      404),
    ("coach-devices", "GET"):              (401,      200,     200,          404,        404,      404),
    ("coach-devices", "POST"):             (401,      201,     201,          404,        404,      404),
    ("coach-device", "DELETE"):            (401,      204,     404,          404,        404,      404),
    # Webhooks: integration callers (use_integration_api) manage their own, operators everyone's; a coach
    # or staff without either is 403 (tests/trainings/test_webhooks.py: one caller never sees another's).
    ("webhook-list", "GET"):               (401,      403,     403,          403,        200,      200),
    ("webhook-list", "POST"):              (401,      403,     403,          403,        201,      201),
    ("webhook-detail", "DELETE"):          (401,      403,     403,          403,        204,      204),
    # The roster: a coach reads and changes their own teams, their members and players (as in the admin);
    # creating or deleting a team, deleting a player and the bulk sync are for integration callers and
    # operators (403); a team or player with history is kept (409). Integration callers, who see the rows
    # they created: tests/trainings/test_roster_api.py and test_roster_sync.py.
    ("team-list", "GET"):                  (401,      LISTED,  HIDDEN,       HIDDEN,     LISTED,   LISTED),
    ("team-list", "POST"):                 (401,      403,     403,          403,        201,      201),
    ("team-detail", "GET"):                (401,      200,     404,          404,        200,      200),
    ("team-detail", "PATCH"):              (401,      200,     404,          404,        200,      200),
    ("team-detail", "DELETE"):             (401,      403,     404,          404,        409,      409),
    ("team-members", "GET"):               (401,      200,     404,          404,        200,      200),
    ("team-members", "PUT"):               (401,      200,     404,          404,        200,      200),
    ("player-list", "GET"):                (401,      LISTED,  HIDDEN,       HIDDEN,     LISTED,   LISTED),
    ("player-list", "POST"):               (401,      201,     400,          400,        201,      201),
    ("player-detail", "GET"):              (401,      200,     404,          404,        200,      200),
    ("player-detail", "PATCH"):            (401,      200,     404,          404,        200,      200),
    ("player-detail", "DELETE"):           (401,      403,     404,          404,        409,      409),
    ("roster-sync", "POST"):               (401,      403,     403,          403,        200,      200),
}
# The field a 400 names: the team (not one of yours), or a guardian's players (not yours).
BAD_FIELD = {("guardian-list", "POST"): "players"}
# fmt: on
CASES = [
    pytest.param(
        route, method, actor, side, MATRIX[route, method][i], id=f"{route}-{method}-{actor}-on-{side}"
    )
    for (route, method) in MATRIX
    for i, (actor, side) in enumerate(COLUMNS)
]


def _client(world: World, actor: str) -> APIClient:
    client = APIClient()
    if actor != "anonymous":
        client.force_authenticate(world.users[actor])
    return client


def _state(side: Side) -> tuple[Any, ...]:
    """Everything a write through the API could change for this side, and the global rules."""
    training = (
        Training.objects.filter(pk=side.training.pk).values("title", "start", "cancelled", "team").first()
    )
    return (
        training,
        list(side.training.invitations.order_by("player").values_list("player", "status")),
        list(side.training.answers.values_list("player", "phase")),
        Occurrence.objects.filter(
            job__key__startswith=f"training-{side.training.pk}-", status=OccurrenceStatus.SCHEDULED
        ).count(),
        Training.objects.filter(team=side.team).count(),
        list(ReminderRule.objects.order_by("slug").values_list("slug", "offsets")),
        list(side.player.devices.order_by("pk").values_list("token", "disabled_at")),
        list(side.player.preferences.order_by("kind").values_list("kind", "channels", "muted")),
        Player.objects.filter(pk=side.player.pk).values_list("quiet_start", "quiet_end").get(),
        list(Guardian.objects.filter(pk=side.guardian.pk).values_list("name", "quiet_start", "quiet_end")),
        list(Guardian.objects.filter(players=side.player).values_list("name", flat=True)),
        list(side.guardian.devices.order_by("pk").values_list("token", "disabled_at")),
        list(side.guardian.preferences.order_by("kind").values_list("kind", "channels", "muted")),
        list(side.guardian.guardianships.values_list("player", "relation")),
        Team.objects.filter(pk=side.team.pk).values("name", "time_zone", "reminds", "quiet_start").first(),
        list(side.team.memberships.order_by("player").values_list("player", "active")),
        Player.objects.filter(pk=side.player.pk).values_list("name", "language", "time_zone").first(),
    )


@pytest.mark.parametrize(("route", "method", "actor", "whose", "expected"), CASES)
def test_api_matrix(
    world: World, route: str, method: str, actor: str, whose: str, expected: int | str
) -> None:
    side = world.a if whose == "a" else world.b
    path, body = REQUESTS[route, method](side)
    before = _state(side)
    client = _client(world, actor)
    if body is None:
        response = client.generic(method, path)
    else:
        response = getattr(client, method.lower())(path, body, format="json")

    if expected in (LISTED, HIDDEN):
        assert response.status_code == 200
        ids = {str(row["id"]) for row in response.json()["results"]}
        owns = {"guardian": side.guardian.pk, "team": side.team.pk, "player": side.player.pk}
        own = owns.get(route.split("-")[0], side.training.pk)
        assert (str(own) in ids) is (expected == LISTED), ids
        _PASSED["api"] += 1
        return
    assert response.status_code == expected, response.content[:500]
    if expected >= 400:
        assert _state(side) == before  # refused means nothing written
    if expected == 400:
        # Not one of yours: named like any other bad field.
        assert BAD_FIELD.get((route, method), "team") in response.json()
    _PASSED["api"] += 1


def test_a_coach_cannot_list_another_teams_player_on_their_own_training(world: World) -> None:
    client = _client(world, "coach_a")
    body = {**_training_body(world.a), "players": [world.a.player.pk, world.b.player.pk]}
    response = client.post("/api/trainings/", body, format="json")
    assert response.status_code == 400 and "players" in response.json()
    response = client.patch(_detail(world.a), {"players": [world.b.player.pk]}, format="json")
    assert response.status_code == 400 and "players" in response.json()
    assert list(world.a.training.invitations.values_list("player", flat=True)) == [world.a.player.pk]


# --- the engine's API cannot reach a training's reminders (issue 19) -------------------------------

# Any account with a token used to (1) schedule the trainings handler with another team's training in its
# payload, so the worker pushed to that team's pending players, and (2) create a training's job key before
# the trainings app did, which the app then took over, leaving the caller able to read and cancel it.
# Both are 400s naming the field, for every caller: no one schedules trainings reminders but the app.


def _engine_requests(side: Side) -> dict[str, tuple[str, dict[str, Any], str]]:
    """(path, body, the field the 400 must name) for each attack on `side`'s training."""
    rule = ReminderRule.objects.get(slug="pre-questionnaire")
    payload = {"training": str(side.training.pk), "rule": rule.pk}
    replay = {"type": "handler", "data": {"name": "trainings.reminder", "payload": payload}}
    queue = {"type": "rabbitmq", "data": {"queue": "q.attacker", "payload": {}}}
    now = dt.datetime.now(dt.UTC).isoformat()
    squat = f"training-{side.training.pk}-{rule.slug}"
    return {
        "replay": (
            "/api/jobs/",
            {"key": "replay-1", "schedules": [now], "callback": replay},
            "callback.data.name",
        ),
        "replay-bulk": (
            "/api/jobs/bulk/",
            {"jobs": [{"key": "replay-2", "schedules": [now], "callback": replay}]},
            "jobs.0.callback.data.name",
        ),
        "replay-schedule": (
            "/api/schedules/",
            {"key": "replay-3", "expression": "@every 1m", "callback": replay},
            "callback.data.name",
        ),
        "squat": ("/api/jobs/", {"key": squat, "schedules": [now], "callback": queue}, "key"),
        "squat-bulk": (
            "/api/jobs/bulk/",
            {"jobs": [{"key": squat, "schedules": [now], "callback": queue}]},
            "jobs.0.key",
        ),
    }


def _engine_callers(world: World) -> dict[str, Any]:
    """Every caller holding the scheduler API's permission and a grant of every queue: the trainings'
    reminders stay out of reach even so (without the permission the API is a 403, tested below)."""
    users = {**world.users, "nobody": UserFactory(username="nobody")}
    for user in users.values():
        scheduler_caller_grant(user, "*")
    return users


ENGINE_ATTACKS = ["replay", "replay-bulk", "replay-schedule", "squat", "squat-bulk"]
ENGINE_CALLERS = ["nobody", "coach_a", "staff", "operator", "superuser"]  # nobody: signed in, no team


def _engine_state(side: Side) -> tuple[Any, ...]:
    return (
        _state(side),
        tuple(Job.objects.order_by("pk").values_list("pk", "key", "owner", "target", "version")),
        Schedule.objects.count(),
        Push.objects.count(),
    )


@pytest.mark.parametrize("caller", ENGINE_CALLERS)
@pytest.mark.parametrize("attack", ENGINE_ATTACKS)
def test_no_engine_api_caller_can_schedule_a_trainings_reminder(
    world: World, attack: str, caller: str
) -> None:
    users = _engine_callers(world)
    path, body, field = _engine_requests(world.b)[attack]
    before = _engine_state(world.b)
    client = APIClient()
    client.force_authenticate(users[caller])
    response = client.post(path, body, format="json")
    assert response.status_code == 400, response.content[:500]
    errors: Any = response.json()
    for part in field.split("."):
        errors = errors[part]
    assert errors, response.json()
    assert _engine_state(world.b) == before
    _PASSED["engine"] += 1


@pytest.mark.parametrize("caller", ENGINE_CALLERS)
def test_no_engine_api_caller_can_read_or_cancel_a_trainings_jobs(world: World, caller: str) -> None:
    """A training's jobs are managed through the trainings API only. Coaches are staff users, and the
    engine's API shows staff every job: without this, coach A could cancel team B's reminders there."""
    users = _engine_callers(world)
    client = APIClient()
    client.force_authenticate(users[caller])
    keys = list(Job.objects.filter(training_job__training=world.b.training).values_list("key", flat=True))
    assert len(keys) == 3
    before = _engine_state(world.b)
    for key in keys:
        assert client.get(f"/api/jobs/{key}/").status_code == 404
        assert client.delete(f"/api/jobs/{key}/").status_code == 404
    listed = {row["key"] for row in client.get("/api/jobs/").json()["results"]}
    assert not listed & set(keys)
    assert _engine_state(world.b) == before
    _PASSED["engine"] += 1


def _trainings_routes() -> set[tuple[str, str]]:
    """Every (URL name, HTTP method) the URL resolver routes to a view of the trainings or delivery app."""
    found: set[tuple[str, str]] = set()

    def walk(patterns: list[Any]) -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns)
                continue
            assert isinstance(pattern, URLPattern)
            callback = pattern.callback
            view = getattr(callback, "cls", callback)
            if not view.__module__.startswith(("trainings.", "delivery.")):
                continue
            # A viewset route knows its methods, a DRF APIView the handlers it defines; any other view must
            # be added here by hand (fails below).
            handlers = [m for m in ("get", "post", "put", "patch", "delete") if hasattr(view, "initial")
                        and hasattr(view, m)]  # fmt: skip
            actions = getattr(callback, "actions", None) or dict.fromkeys(handlers) or {"*": None}
            # HEAD is DRF's GET without a body: the GET row covers it.
            found.update((str(pattern.name), method.upper()) for method in actions if method != "head")

    walk(get_resolver().url_patterns)
    return found


# Admin pages the trainings app adds beyond each model's own (tested by the admin tests below).
ADMIN_ROUTES = {
    ("trainings_training_remind", "*"),
    ("trainings_training_copy", "*"),
    ("trainings_training_answer", "*"),
    ("trainings_training_cancel", "*"),
    ("admin-status", "*"),
    ("admin-status-retry", "*"),
    ("admin-status-retrying", "*"),
    ("admin-dead-letters", "*"),
    ("admin-dead-letters-replay", "*"),
    ("trainings_player_user_search", "*"),
    ("admin-analytics", "*"),  # tests/trainings/test_analytics_admin.py: each coach's own teams
    # Operators only (the Experiment row below; stop and promote: tests/trainings/test_experiments.py).
    ("trainings_experiment_change", "*"),
    ("trainings_experiment_stop", "*"),
    ("trainings_experiment_promote", "*"),
    # A model's own pages the trainings app overrides (the admin:trainings_team and admin:trainings_coach
    # rows): the team page's "reaches nobody" warnings, a coach's own profile made on their first visit.
    ("trainings_team_change", "*"),
    ("trainings_coach_changelist", "*"),
}

# Routes whose only credential is a signed token in the URL (one player, one training, one kind), never the
# caller's session: a caller's role grants nothing there. Tokens of another player, training or kind,
# forged, expired or for a cancelled training are refused in tests/trainings/test_answer_links.py and
# tests/trainings/test_email_channel.py; below, every caller gets the same refusal for a forged one.
TOKEN_ROUTES = {
    ("answer-link", "GET"),
    ("answer-link", "POST"),
    ("answer-page", "*"),
    ("email-unsubscribe", "*"),
}
# The email provider's tracking webhook: its credential is the provider's signature over the event, and it
# is served only while the provider's signing key is set (tests/trainings/test_email_webhooks.py).
SIGNED_ROUTES = {("anymail-mailgun-tracking", "*")}


def test_every_trainings_route_has_a_row_in_the_matrix() -> None:
    routes = _trainings_routes()
    assert len(routes) >= len(MATRIX)  # the walk found the app at all
    assert routes >= ADMIN_ROUTES
    assert routes >= TOKEN_ROUTES | SIGNED_ROUTES
    assert routes - ADMIN_ROUTES - TOKEN_ROUTES - SIGNED_ROUTES == set(MATRIX) == set(REQUESTS)


@pytest.mark.parametrize("actor", ["anonymous", "coach_a", "staff", "operator", "superuser"])
def test_a_forged_answer_token_is_refused_whoever_asks(world: World, actor: str) -> None:
    """The caller's session adds nothing to a token route: a superuser gets what an anonymous caller gets."""
    before = _state(world.a)
    forged = "eyJwIjoxfQ:1v4Z9s:forged-signature"
    client = _client(world, actor)
    assert client.get(reverse("answer-link", args=[forged])).status_code == 400
    assert (
        client.post(
            reverse("answer-link", args=[forged]), {"response": "accepted"}, format="json"
        ).status_code
        == 400
    )
    assert _state(world.a) == before
    _PASSED["api"] += 1


# --- admin ------------------------------------------------------------------------------------------------

# SCOPED: a coach sees their own teams' objects. OPERATORS: coaches get 403; `manage_all_teams` is enough,
# as in the API (the rules). SUPERUSERS: coaches and operators get 403 unless also given the model's
# permissions (the gateway's log).
SCOPED, OPERATORS, SUPERUSERS = "scoped", "operators", "superusers"


def _run(side: Side) -> ReminderRun:
    return ReminderRun.objects.create(
        occurrence_key=f"run-{side.team.name}",
        training=side.training,
        fire_at=START,
        outcome=RunOutcome.SENT,
        recipients=1,
        ran_at=START,
    )


def _push(side: Side) -> Push:
    return Push.objects.create(
        key=f"push-{side.team.name}",
        occurrence_key=f"occ-{side.team.name}",
        training=side.training,
        player=side.player,
        kind="PRE",
        language="en",
        title="t",
        body="b",
        fire_at=START,
    )


def _send(side: Side) -> PushSend:
    """A device send of the side's push, as the gateway records it (delivery/gateway/records.py)."""
    device = side.player.devices.get()
    return PushSend.objects.create(
        push_key=_push(side).key, device=device, player_id=side.player.pk, provider=device.provider,
        status=SendStatus.ACCEPTED, recorded_at=START,
    )  # fmt: skip


# Per admin model: the object of each side, and how a coach's access is limited.
ADMIN: dict[type[Any], tuple[Callable[[Side], Any], str]] = {
    Team: (lambda s: s.team, SCOPED),
    Player: (lambda s: s.player, SCOPED),
    Training: (lambda s: s.training, SCOPED),
    ReminderRun: (_run, SCOPED),
    Push: (_push, SCOPED),
    ReminderRule: (lambda s: ReminderRule.objects.get(slug="invitation"), OPERATORS),
    Device: (lambda s: s.player.devices.get(), SCOPED),
    Guardian: (lambda s: s.guardian, SCOPED),
    Questionnaire: (lambda s: Questionnaire.objects.get_or_create(team=s.team, phase="POST")[0], SCOPED),
    PushSend: (_send, SUPERUSERS),  # coaches read a push's sends on the push's own page
    Experiment: (_experiment, OPERATORS),
    Coach: (_coach, SCOPED),  # a coach sees their own profile only
    CoachPush: (_coach_push, SCOPED),
    WebhookSubscription: (_webhook, OPERATORS),  # the platform's endpoints and their status
}


def _admin(world: World, actor: str) -> Client:
    client = Client()
    client.force_login(world.users[actor])
    return client


def _change_url(obj: Any) -> str:
    return reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_change", args=[obj.pk])


@pytest.mark.parametrize("model", list(ADMIN), ids=lambda m: m.__name__)
def test_admin_a_coach_reaches_only_their_own_teams_objects(world: World, model: type[Any]) -> None:
    make, access = ADMIN[model]
    own, theirs = make(world.a), make(world.b)
    coach = _admin(world, "coach_a")
    changelist = coach.get(reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist"))
    if access in (OPERATORS, SUPERUSERS):
        assert changelist.status_code == 403
        assert coach.get(_change_url(theirs)).status_code == 403
        _PASSED["admin"] += 1
        return
    assert changelist.status_code == 200
    page = changelist.content.decode()
    assert _change_url(own) in page and _change_url(theirs) not in page
    assert coach.get(_change_url(own)).status_code == 200
    response = coach.get(_change_url(theirs))
    assert response.status_code == 302 and response["Location"] == "/admin/"  # "does not exist"
    _PASSED["admin"] += 1


@pytest.mark.parametrize("actor", ["operator", "superuser"])
@pytest.mark.parametrize("model", list(ADMIN), ids=lambda m: m.__name__)
def test_admin_operators_reach_every_teams_objects(world: World, model: type[Any], actor: str) -> None:
    make, access = ADMIN[model]
    theirs = make(world.b)
    client = _admin(world, actor)
    changelist = client.get(reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist"))
    if access == SUPERUSERS and actor == "operator":
        # The operator permission widens the team scope and opens the rules; the gateway's log stays with
        # superusers unless an operator is also given that model's permissions.
        assert changelist.status_code == 403
        _PASSED["admin"] += 1
        return
    assert changelist.status_code == 200
    assert _change_url(theirs) in changelist.content.decode()
    assert client.get(_change_url(theirs)).status_code == 200
    _PASSED["admin"] += 1


def test_admin_a_coach_cannot_change_or_delete_another_teams_training(world: World) -> None:
    coach = _admin(world, "coach_a")
    theirs = world.b.training
    before = _state(world.b)
    assert coach.post(_change_url(theirs), {"title": "hijacked"}).status_code == 302
    delete = reverse("admin:trainings_training_delete", args=[theirs.pk])
    assert coach.post(delete, {"post": "yes"}).status_code == 302
    assert _state(world.b) == before


def test_admin_training_actions_reach_only_the_coachs_own_trainings(world: World) -> None:
    coach = _admin(world, "coach_a")
    rule = ReminderRule.objects.get(slug="invitation")
    before = _state(world.b)
    answer = {"player": world.b.player.pk, "phase": "PRE", "q-fatigue": "3"}
    for action, body in (("remind", {"rule": rule.pk, "click": "c1"}), ("copy", {}), ("cancel", {}),
                         ("answer", answer)):  # fmt: skip
        theirs = reverse(f"admin:trainings_training_{action}", args=[world.b.training.pk])
        response = coach.post(theirs, body)
        assert response.status_code == 302 and response["Location"] == "/admin/"  # "does not exist"
        anonymous = Client().post(theirs, body)
        assert anonymous.status_code == 302 and "/admin/login/" in anonymous["Location"]
        _PASSED["admin"] += 1
    assert _state(world.b) == before
    assert not Push.objects.filter(training=world.b.training).exists()
    own = reverse("admin:trainings_training_copy", args=[world.a.training.pk])
    assert coach.post(own).status_code == 302
    assert Training.objects.filter(team=world.a.team).count() == 2


@pytest.mark.parametrize(
    ("actor", "allowed"), [("coach_a", False), ("staff", False), ("operator", True), ("superuser", True)]
)
def test_admin_the_status_page_is_for_operators(world: World, actor: str, allowed: bool) -> None:
    client = _admin(world, actor)
    assert client.get(reverse("admin-status")).status_code == (200 if allowed else 403)
    retrying = client.post(reverse("admin-status-retrying"), {"error": "", "action": "retry"})
    assert retrying.status_code == (302 if allowed else 403)
    assert client.get(reverse("admin-dead-letters")).status_code == (200 if allowed else 403)
    retry = client.post(reverse("admin-status-retry"), {"error": ""})
    assert retry.status_code == (302 if allowed else 403)
    assert Client().get(reverse("admin-status")).status_code == 302  # anonymous: to the login page
    _PASSED["admin"] += 1


def test_every_trainings_admin_model_has_a_row() -> None:
    registered = {
        model for model in admin.site._registry if model._meta.app_label in ("trainings", "delivery")
    }
    assert registered == set(ADMIN)


# --- every route of the site: its owner, who may call it, its limit -----------------------------------------


# The rules a row names. `anonymous` is what a caller with no credentials gets (from a public address, on a
# sample path of the route): checked for every row below; the matrix above and the tests it names check the
# rest of each rule.
@dataclass(frozen=True)
class Rule:
    says: str
    anonymous: frozenset[int]


PUBLIC = Rule("anyone; it holds no one's data", frozenset({200, 302}))
HEALTH = Rule("anyone: the status; details to loopback and operators (item 6)", frozenset({200, 503}))
METRICS = Rule("loopback/private addresses, or METRICS_BEARER_TOKEN when set", frozenset({403, 404}))
SIGNED_IN = Rule("any signed-in user; rows scoped to the caller (matrix above)", frozenset({401}))
SCHEDULER = Rule(
    "reminders.use_scheduler_api: own jobs (staff holding it: all); rabbitmq queues the caller was granted, "
    "never the service's own (tests/security/test_scheduler_callers.py)",
    frozenset({401}),
)
TEAM = Rule("a coach of the row's team, or manage_all_teams; others 404 (matrix above)", frozenset({401}))
RULES_WRITE = Rule("read: signed in; change: manage_all_teams (matrix above)", frozenset({401}))
OPERATORS_API = Rule("manage_all_teams or superuser (matrix above)", frozenset({401}))
ROSTER = Rule(
    "read and change: a coach of the team (a player: of one of theirs), the integration caller "
    "(use_integration_api) that created it, or manage_all_teams; others 404; create a team, delete: "
    "use_integration_api or manage_all_teams, else 403 (matrix above, tests/trainings/test_roster_api.py)",
    frozenset({401}),
)
ROSTER_SYNC = Rule(
    "use_integration_api or manage_all_teams, else 403; writes the caller's own rows by their external ids "
    "(tests/trainings/test_roster_sync.py)",
    frozenset({401}),
)
LINKED = Rule("read: the team's coaches; write: the account linked to the player/guardian", frozenset({401}))
WEBHOOK_CALLERS = Rule(
    "use_integration_api: the caller's own subscriptions; manage_all_teams: everyone's (matrix above)",
    frozenset({401}),
)
ON_BEHALF = Rule(
    "read: the team's coaches; write: the account linked to the player/guardian, or an integration caller "
    "(trainings.use_integration_api) among the people it reads (tests/trainings/test_devices_on_behalf.py)",
    frozenset({401}),
)
COACH_SELF = Rule("the signed-in coach's own profile and devices; others 404", frozenset({401}))
LINK_TOKEN = Rule("the signed, expiring token in the URL; a session adds nothing", frozenset({400, 404}))
# The configured provider's tracking webhook alone; 404 while its signing key is unset
# (delivery/channels/email/webhooks.py, tests/trainings/test_email_webhooks.py).
PROVIDER = Rule("the email provider's signature with its key; 404 while the key is unset", frozenset({404}))
ADMIN_LOGIN = Rule("anyone (the login page itself)", frozenset({200, 302}))
STAFF_ADMIN = Rule(
    "staff session, the model's permissions; coaches: their teams' rows (ADMIN)", frozenset({302})
)
ADMIN_OPERATORS = Rule("staff session with manage_all_teams (status, dead letters)", frozenset({302}))
ADMIN_SUPERUSERS = Rule("superusers, or staff given the model's permissions", frozenset({302}))

# The limits a row names (reminders/http/limits.py, config/settings.py; counts: reminders.RequestCount, one
# upsert per request, reminders/http/counts.py).
API = "API_THROTTLE_IP_RATE per address before authentication, API_THROTTLE_TOKEN_RATE per token; body limit"
API_ADDRESS = "API_THROTTLE_IP_RATE per address; body limit"
ANSWER_LINK = (
    "API_THROTTLE_ANSWER_LINK_RATE per link whose signature holds, API_THROTTLE_IP_RATE per address, counted "
    "in one statement before the view; body limit"
)
EMAIL_LINK = "API_THROTTLE_ANSWER_LINK_RATE per link whose signature holds, API_THROTTLE_IP_RATE per address"
READY = "REMINDERS_HEALTH_READY_RATE per address, for callers other than loopback and operators"
LOGIN = "django-axes: AXES_FAILURE_LIMIT failed logins per username and address; body limit"
BODY = "body limit (REMINDERS_MAX_REQUEST_BYTES) only"

# (URL name, method): (owner, rule, limit). A route the URL conf or the OpenAPI schema has without a row here
# fails `test_every_route_has_a_row`: add one line. "*" is every method of a view that is not DRF's. An
# admin model's own views (changelist, add, change, delete, history and its versions) share the row
# "admin:<app>_<model>"; the model admin's extra views have rows of their own. A name may end in "*" for
# every route of a namespace a package mounts (anymail's webhooks).
# fmt: off
ROUTES: dict[tuple[str, str], tuple[str, Rule, str]] = {
    # -- the scheduler API (reminders/http/)
    ("api-root", "GET"):                         ("rest_framework",          SIGNED_IN,        API),
    ("job-list", "GET"):                         ("reminders.http",          SCHEDULER,        API),
    ("job-list", "POST"):                        ("reminders.http",          SCHEDULER,        API),
    ("job-bulk", "POST"):                        ("reminders.http",          SCHEDULER,        API),
    ("job-detail", "GET"):                       ("reminders.http",          SCHEDULER,        API),
    ("job-detail", "DELETE"):                    ("reminders.http",          SCHEDULER,        API),
    ("occurrence-list", "GET"):                  ("reminders.http",          SCHEDULER,        API),
    ("occurrence-detail", "GET"):                ("reminders.http",          SCHEDULER,        API),
    ("schedule-list", "GET"):                    ("reminders.http",          SCHEDULER,        API),
    ("schedule-list", "POST"):                   ("reminders.http",          SCHEDULER,        API),
    ("schedule-detail", "GET"):                  ("reminders.http",          SCHEDULER,        API),
    ("schedule-detail", "PATCH"):                ("reminders.http",          SCHEDULER,        API),
    ("schedule-detail", "DELETE"):               ("reminders.http",          SCHEDULER,        API),
    ("schedule-pause", "POST"):                  ("reminders.http",          SCHEDULER,        API),
    ("schedule-resume", "POST"):                 ("reminders.http",          SCHEDULER,        API),
    ("schedule-preview", "GET"):                 ("reminders.http",          SCHEDULER,        API),
    ("throttle-policy-list", "GET"):             ("reminders.http",          SCHEDULER,        API),
    ("throttle-policy-list", "POST"):            ("reminders.http",          SCHEDULER,        API),
    ("throttle-policy-detail", "GET"):           ("reminders.http",          SCHEDULER,        API),
    ("throttle-policy-detail", "PUT"):           ("reminders.http",          SCHEDULER,        API),
    ("throttle-policy-detail", "PATCH"):         ("reminders.http",          SCHEDULER,        API),
    ("throttle-policy-detail", "DELETE"):        ("reminders.http",          SCHEDULER,        API),
    ("schema", "GET"):                           ("drf_spectacular",         PUBLIC,           API_ADDRESS),
    ("api-docs", "GET"):                         ("drf_spectacular",         PUBLIC,           API_ADDRESS),
    # -- the trainings API (each row's answers per caller: MATRIX above)
    ("training-list", "GET"):                    ("trainings",               TEAM,             API),
    ("training-list", "POST"):                   ("trainings",               TEAM,             API),
    ("training-detail", "GET"):                  ("trainings",               TEAM,             API),
    ("training-detail", "PUT"):                  ("trainings",               TEAM,             API),
    ("training-detail", "PATCH"):                ("trainings",               TEAM,             API),
    ("training-detail", "DELETE"):               ("trainings",               TEAM,             API),
    ("training-answers", "POST"):                ("trainings",               TEAM,             API),
    ("training-invitation", "POST"):             ("trainings",               TEAM,             API),
    ("training-timeline", "GET"):                ("trainings",               TEAM,             API),
    ("reminder-rule-list", "GET"):               ("trainings",               RULES_WRITE,      API),
    ("reminder-rule-detail", "GET"):             ("trainings",               RULES_WRITE,      API),
    ("reminder-rule-detail", "PUT"):             ("trainings",               RULES_WRITE,      API),
    ("reminder-rule-detail", "PATCH"):           ("trainings",               RULES_WRITE,      API),
    ("player-devices", "GET"):                   ("trainings",               LINKED,           API),
    ("player-devices", "POST"):                  ("trainings",               ON_BEHALF,        API),
    ("player-device", "DELETE"):                 ("trainings",               ON_BEHALF,        API),
    ("player-preferences", "GET"):               ("trainings",               LINKED,           API),
    ("player-preferences", "PUT"):               ("trainings",               LINKED,           API),
    ("player-preferences", "PATCH"):             ("trainings",               LINKED,           API),
    ("guardian-list", "GET"):                    ("trainings",               TEAM,             API),
    ("guardian-list", "POST"):                   ("trainings",               TEAM,             API),
    ("guardian-detail", "GET"):                  ("trainings",               TEAM,             API),
    ("guardian-detail", "PUT"):                  ("trainings",               TEAM,             API),
    ("guardian-detail", "PATCH"):                ("trainings",               TEAM,             API),
    ("guardian-detail", "DELETE"):               ("trainings",               TEAM,             API),
    ("guardian-devices", "GET"):                 ("trainings",               LINKED,           API),
    ("guardian-devices", "POST"):                ("trainings",               ON_BEHALF,        API),
    ("guardian-device", "DELETE"):               ("trainings",               ON_BEHALF,        API),
    ("guardian-preferences", "GET"):             ("trainings",               LINKED,           API),
    ("guardian-preferences", "PUT"):             ("trainings",               LINKED,           API),
    ("guardian-preferences", "PATCH"):           ("trainings",               LINKED,           API),
    ("guardian-trainings", "GET"):               ("trainings",               TEAM,             API),
    ("analytics-offsets", "GET"):                ("trainings",               TEAM,             API),
    ("analytics-players", "GET"):                ("trainings",               TEAM,             API),
    ("experiment-list", "GET"):                  ("trainings",               OPERATORS_API,    API),
    ("experiment-detail", "GET"):                ("trainings",               OPERATORS_API,    API),
    ("experiment-results", "GET"):               ("trainings",               OPERATORS_API,    API),
    ("experiment-probabilities", "GET"):         ("trainings",               OPERATORS_API,    API),
    ("coach-profile", "GET"):                    ("trainings",               COACH_SELF,       API),
    ("coach-profile", "PUT"):                    ("trainings",               COACH_SELF,       API),
    ("coach-profile", "PATCH"):                  ("trainings",               COACH_SELF,       API),
    ("coach-devices", "GET"):                    ("trainings",               COACH_SELF,       API),
    ("coach-devices", "POST"):                   ("trainings",               COACH_SELF,       API),
    ("coach-device", "DELETE"):                  ("trainings",               COACH_SELF,       API),
    ("webhook-list", "GET"):                     ("trainings",               WEBHOOK_CALLERS,  API),
    ("webhook-list", "POST"):                    ("trainings",               WEBHOOK_CALLERS,  API),
    ("webhook-detail", "DELETE"):                ("trainings",               WEBHOOK_CALLERS,  API),
    ("team-list", "GET"):                        ("trainings.roster",        ROSTER,           API),
    ("team-list", "POST"):                       ("trainings.roster",        ROSTER,           API),
    ("team-detail", "GET"):                      ("trainings.roster",        ROSTER,           API),
    ("team-detail", "PATCH"):                    ("trainings.roster",        ROSTER,           API),
    ("team-detail", "DELETE"):                   ("trainings.roster",        ROSTER,           API),
    ("team-members", "GET"):                     ("trainings.roster",        ROSTER,           API),
    ("team-members", "PUT"):                     ("trainings.roster",        ROSTER,           API),
    ("player-list", "GET"):                      ("trainings.roster",        ROSTER,           API),
    ("player-list", "POST"):                     ("trainings.roster",        ROSTER,           API),
    ("player-detail", "GET"):                    ("trainings.roster",        ROSTER,           API),
    ("player-detail", "PATCH"):                  ("trainings.roster",        ROSTER,           API),
    ("player-detail", "DELETE"):                 ("trainings.roster",        ROSTER,           API),
    ("roster-sync", "POST"):                     ("trainings.roster",        ROSTER_SYNC,      API),
    # -- links in pushes and emails, the provider's webhooks
    ("answer-link", "GET"):                      ("trainings",               LINK_TOKEN,       ANSWER_LINK),
    ("answer-link", "POST"):                     ("trainings",               LINK_TOKEN,       ANSWER_LINK),
    ("answer-page", "*"):                        ("trainings",               LINK_TOKEN,       EMAIL_LINK),
    ("email-unsubscribe", "*"):                  ("trainings",               LINK_TOKEN,       EMAIL_LINK),
    ("anymail-mailgun-tracking", "*"):           ("delivery",                PROVIDER,         API_ADDRESS),
    # -- operations
    ("home", "*"):                               ("django.views",            PUBLIC,           BODY),
    ("metrics", "*"):                            ("reminders.ops",           METRICS,          BODY),
    ("health-live", "*"):                        ("reminders.ops",           PUBLIC,           BODY),
    ("health-ready", "*"):                       ("reminders.ops",           HEALTH,           READY),
    # -- the admin's own pages
    ("admin:index", "*"):                        ("django.contrib.admin",    STAFF_ADMIN,      LOGIN),
    ("admin:login", "*"):                        ("django.contrib.admin",    ADMIN_LOGIN,      LOGIN),
    ("admin:logout", "*"):                       ("django.contrib.admin",    ADMIN_LOGIN,      LOGIN),
    ("admin:password_change", "*"):              ("django.contrib.admin",    STAFF_ADMIN,      LOGIN),
    ("admin:password_change_done", "*"):         ("django.contrib.admin",    STAFF_ADMIN,      LOGIN),
    ("admin:autocomplete", "*"):                 ("django.contrib.admin",    STAFF_ADMIN,      LOGIN),
    ("admin:jsi18n", "*"):                       ("django.contrib.admin",    STAFF_ADMIN,      LOGIN),
    ("admin:view_on_site", "*"):                 ("django.contrib",          STAFF_ADMIN,      LOGIN),
    ("admin:app_list", "*"):                     ("django.contrib.admin",    STAFF_ADMIN,      LOGIN),
    ("admin:catch_all", "*"):                    ("django.contrib.admin",    STAFF_ADMIN,      LOGIN),
    ("admin-time-zone", "*"):                    ("reminders.admin",         STAFF_ADMIN,      LOGIN),
    ("admin-status", "*"):                       ("trainings.admin",         ADMIN_OPERATORS,  LOGIN),
    ("admin-status-retry", "*"):                 ("trainings.admin",         ADMIN_OPERATORS,  LOGIN),
    ("admin-status-retrying", "*"):              ("trainings.admin",         ADMIN_OPERATORS,  LOGIN),
    ("admin-dead-letters", "*"):                 ("trainings.admin",         ADMIN_OPERATORS,  LOGIN),
    ("admin-dead-letters-replay", "*"):          ("trainings.admin",         ADMIN_OPERATORS,  LOGIN),
    ("admin-analytics", "*"):                    ("trainings.admin",         STAFF_ADMIN,      LOGIN),
    # -- the admin's models (ADMIN above: how far a coach reaches in each trainings model)
    ("admin:reminders_job", "*"):                ("reminders.admin",         ADMIN_SUPERUSERS, LOGIN),
    ("admin:reminders_occurrence", "*"):         ("reminders.admin",         ADMIN_SUPERUSERS, LOGIN),
    ("admin:reminders_schedule", "*"):           ("reminders.admin",         ADMIN_SUPERUSERS, LOGIN),
    ("admin:reminders_throttlepolicy", "*"):     ("reminders.admin",         ADMIN_SUPERUSERS, LOGIN),
    ("admin:reminders_queuegrant", "*"):         ("reminders.admin",         ADMIN_SUPERUSERS, LOGIN),
    ("admin:trainings_team", "*"):               ("trainings.admin",         STAFF_ADMIN,      LOGIN),
    ("admin:trainings_player", "*"):             ("trainings.admin",         STAFF_ADMIN,      LOGIN),
    ("admin:trainings_player_user_search", "*"): ("trainings.admin",         STAFF_ADMIN,      LOGIN),
    ("admin:trainings_training", "*"):           ("trainings.admin",         STAFF_ADMIN,      LOGIN),
    ("admin:trainings_training_remind", "*"):    ("trainings.admin",         STAFF_ADMIN,      LOGIN),
    ("admin:trainings_training_copy", "*"):      ("trainings.admin",         STAFF_ADMIN,      LOGIN),
    ("admin:trainings_training_answer", "*"):    ("trainings.admin",         STAFF_ADMIN,      LOGIN),
    ("admin:trainings_training_cancel", "*"):    ("trainings.admin",         STAFF_ADMIN,      LOGIN),
    ("admin:trainings_guardian", "*"):           ("trainings.admin",         STAFF_ADMIN,      LOGIN),
    ("admin:trainings_questionnaire", "*"):      ("trainings.admin",         STAFF_ADMIN,      LOGIN),
    ("admin:trainings_coach", "*"):              ("trainings.admin",         STAFF_ADMIN,      LOGIN),
    ("admin:trainings_coachpush", "*"):          ("trainings.admin",         STAFF_ADMIN,      LOGIN),
    ("admin:trainings_reminderrun", "*"):        ("trainings.admin",         STAFF_ADMIN,      LOGIN),
    ("admin:trainings_push", "*"):               ("trainings.admin",         STAFF_ADMIN,      LOGIN),
    ("admin:delivery_device", "*"):             ("trainings.admin.pushes",    STAFF_ADMIN,      LOGIN),
    ("admin:trainings_reminderrule", "*"):       ("trainings.admin",         ADMIN_OPERATORS,  LOGIN),
    ("admin:trainings_experiment", "*"):         ("trainings.admin",         ADMIN_OPERATORS,  LOGIN),
    ("admin:trainings_experiment_stop", "*"):    ("trainings.admin",         ADMIN_OPERATORS,  LOGIN),
    ("admin:trainings_experiment_promote", "*"): ("trainings.admin",         ADMIN_OPERATORS,  LOGIN),
    ("admin:delivery_pushsend", "*"):           ("trainings.admin",         ADMIN_SUPERUSERS, LOGIN),
    ("admin:trainings_webhooksubscription", "*"): ("trainings.admin",         ADMIN_OPERATORS,  LOGIN),
    ("admin:auth_user", "*"):                    ("django.contrib.auth",     ADMIN_SUPERUSERS, LOGIN),
    ("admin:auth_user_password_change", "*"):    ("django.contrib.auth",     ADMIN_SUPERUSERS, LOGIN),
    ("admin:auth_group", "*"):                   ("django.contrib.auth",     ADMIN_SUPERUSERS, LOGIN),
    ("admin:authtoken_tokenproxy", "*"):         ("rest_framework.authtoken", ADMIN_SUPERUSERS, LOGIN),
    ("admin:axes_accessattempt", "*"):           ("axes",                    ADMIN_SUPERUSERS, LOGIN),
    ("admin:axes_accessfailurelog", "*"):        ("axes",                    ADMIN_SUPERUSERS, LOGIN),
    ("admin:axes_accesslog", "*"):               ("axes",                    ADMIN_SUPERUSERS, LOGIN),
    ("admin:django_celery_beat_periodictask", "*"): ("reminders.admin",         ADMIN_SUPERUSERS, LOGIN),
    ("admin:django_celery_beat_intervalschedule", "*"): ("reminders.admin",         ADMIN_SUPERUSERS, LOGIN),
    ("admin:django_celery_beat_crontabschedule", "*"): ("reminders.admin",         ADMIN_SUPERUSERS, LOGIN),
    ("admin:django_celery_beat_solarschedule", "*"): ("reminders.admin",         ADMIN_SUPERUSERS, LOGIN),
    ("admin:django_celery_beat_clockedschedule", "*"): ("reminders.admin",         ADMIN_SUPERUSERS, LOGIN),
}
# fmt: on

_ADMIN_MODEL_VIEWS = ("changelist", "add", "change", "delete", "history", "simple_history", "redirect")
_SAMPLES = {"app_label": "reminders", "url": "no-such-page/"}  # path parameters; "1" for the others


@dataclass(frozen=True)
class Route:
    """One (name, method) the URL conf routes, with a path that reaches it and the module of its view."""

    name: str
    method: str
    path: str
    module: str
    view: Any


def _sample(piece: str) -> str:
    """A path that a `path()` or `re_path()` piece matches: each parameter replaced by a sample value."""
    piece = re.sub(r"<(?:\w+:)?(\w+)>", lambda m: _SAMPLES.get(m.group(1), "1"), piece)
    piece = re.sub(r"\(\?P<(\w+)>[^()]*\)", lambda m: _SAMPLES.get(m.group(1), "1"), piece)
    piece = re.sub(r"\([^()]*\)\?", "", piece)  # an optional group: left out
    piece = re.sub(r"\([^()]*\)", "1", piece)  # a positional group
    return piece.removeprefix("^").removesuffix("$").replace("\\.", ".").replace("/?", "/")


def _methods(callback: Any) -> list[str]:
    """A viewset route's methods, a DRF view's handlers, or "*" for any other view."""
    actions = getattr(callback, "actions", None)
    view = getattr(callback, "cls", None)
    if actions:
        methods = list(actions)
    elif view is not None and hasattr(view, "initial"):
        methods = [m for m in view.http_method_names if hasattr(view, m)]
    else:
        return ["*"]
    return [m.upper() for m in methods if m not in ("head", "options")]


def _site_routes() -> dict[tuple[str, str], Route]:
    """Every (row name, method) of config.urls, each with a sample path: API, admin, links, operations."""
    admin_models = {f"{m._meta.app_label}_{m._meta.model_name}": type(model_admin).__module__
                    for m, model_admin in admin.site._registry.items()}  # fmt: skip
    found: dict[tuple[str, str], Route] = {}

    def walk(patterns: list[Any], prefix: str, namespace: str) -> None:
        for pattern in patterns:
            piece = str(pattern.pattern)
            if "format" in piece:  # DRF's format-suffix twins of a route (`jobs.json`)
                continue
            if isinstance(pattern, URLResolver):
                inner = ":".join(filter(None, [namespace, pattern.namespace or ""]))
                walk(pattern.url_patterns, prefix + _sample(piece), inner)
                continue
            callback = pattern.callback
            path = "/" + prefix + _sample(piece)
            name = pattern.name
            model_admin = getattr(callback, "model_admin", None)
            if name is None and namespace == "admin":
                name = f"{model_admin.opts.app_label}_{model_admin.opts.model_name}_redirect" if model_admin \
                    else "catch_all"  # fmt: skip
            full = f"{namespace}:{name}" if namespace else str(name)
            view = getattr(callback, "cls", None) or getattr(callback, "view_class", None) or callback
            module = type(model_admin).__module__ if model_admin else view.__module__
            for suffix in _ADMIN_MODEL_VIEWS:
                model = str(name).removesuffix(f"_{suffix}")
                if namespace == "admin" and model in admin_models and model != name:
                    full, module = f"admin:{model}", admin_models[model]
            for method in _methods(callback):
                found.setdefault((full, method), Route(full, method, path, module, view))

    walk(get_resolver().url_patterns, "", "")
    return found


SITE_ROUTES = _site_routes()


def _row(key: tuple[str, str]) -> tuple[str, Rule, str] | None:
    if key in ROUTES:
        return ROUTES[key]
    return next((row for (name, method), row in ROUTES.items()
                 if "*" in name and fnmatch(key[0], name) and method in ("*", key[1])), None)  # fmt: skip


def test_every_route_has_a_row() -> None:
    """A route in the URL conf with no row in ROUTES, or a row naming no route, fails here (listed)."""
    assert len(SITE_ROUTES) > 120  # the walk found the admin's models and both APIs
    missing = sorted(f"{name} {method} ({route.path})" for (name, method), route in SITE_ROUTES.items()
                     if _row((name, method)) is None)  # fmt: skip
    stale = sorted(f"{name} {method}" for name, method in ROUTES if "*" not in name
                   and (name, method) not in SITE_ROUTES)  # fmt: skip
    assert missing == [], "routes without a row in ROUTES"
    assert stale == [], "rows of ROUTES without a route"


def test_every_schema_operation_has_a_row() -> None:
    """The OpenAPI schema's operations are the API a generated client calls: each one has its row."""
    schema = Client().get("/api/schema/", {"format": "json"}).json()
    missing = []
    for template, operations in schema["paths"].items():
        path = re.sub(r"\{\w+\}", "1", template)
        match = resolve(path)
        name = f"{match.namespace}:{match.url_name}" if match.namespace else str(match.url_name)
        for method in operations:
            if method in ("get", "put", "post", "patch", "delete") and _row((name, method.upper())) is None:
                missing.append(f"{method.upper()} {template} ({name})")
    assert len(schema["paths"]) > 20
    assert missing == [], "schema operations without a row in ROUTES"


def test_each_row_names_the_owner_of_its_view() -> None:
    wrong = sorted(f"{name} {method}: the view is in {route.module}"
                   for (name, method), route in SITE_ROUTES.items()
                   if (row := _row((name, method))) and not route.module.startswith(row[0]))  # fmt: skip
    assert wrong == []


@pytest.mark.parametrize("key", sorted(SITE_ROUTES), ids=lambda key: f"{key[0]}-{key[1]}")
def test_an_anonymous_caller_gets_what_the_rows_rule_says(key: tuple[str, str]) -> None:
    """From a public address, with no credentials: the row's rule decides (401 on the API, the login page in
    the admin, a refused token on the link routes)."""
    route, (_, rule, _) = SITE_ROUTES[key], _row(key) or ("", PUBLIC, "")
    if not rule.anonymous:
        pytest.skip(rule.says)
    assert resolve(route.path).func is not None
    method = "GET" if route.method == "*" else route.method
    body = "{}" if method in ("POST", "PUT", "PATCH") else ""
    response = Client(REMOTE_ADDR="203.0.113.9").generic(method, route.path, body, "application/json")
    assert response.status_code in rule.anonymous, (route.path, response.status_code)
    if rule in (STAFF_ADMIN, ADMIN_OPERATORS, ADMIN_SUPERUSERS):
        assert "/admin/login/" in response["Location"]
    _PASSED["routes"] += 1


@pytest.mark.parametrize("key", sorted(k for k in SITE_ROUTES if ROUTES.get(k, (0, 0))[1] is SCHEDULER),
                         ids=lambda key: f"{key[0]}-{key[1]}")  # fmt: skip
def test_a_signed_in_caller_without_the_scheduler_permission_gets_403(key: tuple[str, str]) -> None:
    route = SITE_ROUTES[key]
    client = APIClient()
    client.force_authenticate(UserFactory(username="a-players-login"))
    response = client.generic(route.method, route.path, "{}", "application/json")
    assert response.status_code == 403, response.content


def test_each_rows_limit_is_the_one_its_view_meets() -> None:
    """The per-address limit is met under ADDRESS_LIMITED_PATHS (the middleware), the per-token one by the
    view's throttles, an answer link's by its view's `request_limits` (counted with the address)."""
    from django.conf import settings

    from reminders.http.limits import TokenRateThrottle

    wrong = []
    for key, route in SITE_ROUTES.items():
        limit = (_row(key) or ("", PUBLIC, ""))[2]
        throttles = [cls.__name__ for cls in getattr(route.view, "throttle_classes", [])]
        counted = route.path.startswith(tuple(settings.ADDRESS_LIMITED_PATHS))
        if limit in (API, API_ADDRESS, ANSWER_LINK, EMAIL_LINK) and not counted:
            wrong.append(f"{key}: not under ADDRESS_LIMITED_PATHS, so no address limit")
        if limit not in (API, API_ADDRESS, ANSWER_LINK, EMAIL_LINK) and counted:
            wrong.append(f"{key}: under ADDRESS_LIMITED_PATHS, so an address limit its row does not name")
        if limit == API and TokenRateThrottle.__name__ not in throttles:
            wrong.append(f"{key}: no per-token throttle ({throttles})")
        if limit == ANSWER_LINK and not hasattr(route.view, "request_limits"):
            wrong.append(f"{key}: no per-link limit counted with the address")
    assert wrong == []
