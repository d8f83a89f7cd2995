"""Strict input on every write route under /api/: a key of the body that names no field is a 400 naming it
(common/serializers.py), nested objects and list items included, and a JSON object that names a key twice
is a 400 (common/http/parsers.py, and the answer link's own JSON reading). Nothing is written.

The routes come from the URL conf: a write route added under /api/ without a row in ROUTES fails
`test_every_write_route_has_a_row`, so it is covered by the others as soon as it has one.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.apps import apps
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from rest_framework.test import APIClient

from reminders.models import Job, Schedule
from tests.clients import api_as
from tests.factories import (
    GuardianFactory,
    MembershipFactory,
    PlayerFactory,
    TeamFactory,
    ThrottlePolicyFactory,
    UserFactory,
    rules_seeded,
    schedule_create,
    training_made,
)
from trainings.answers.links import answer_token
from trainings.models import Guardian, Player, Training

pytestmark = pytest.mark.django_db

UNKNOWN = "zz_not_a_field"
WRITE_METHODS = ("post", "put", "patch")
START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)
HTTP_CALLBACK = {"type": "http", "data": {"url": "https://hooks.example.com/strict", "payload": {"a": 1}}}


def _write_routes() -> set[tuple[str, str]]:
    """Every (URL name, write method) the URL conf routes under /api/ to a view of this project."""
    found: set[tuple[str, str]] = set()

    def walk(patterns: list[Any], prefix: str) -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, prefix + str(pattern.pattern))
                continue
            assert isinstance(pattern, URLPattern)
            callback = pattern.callback
            view = getattr(callback, "cls", None)
            if not (prefix + str(pattern.pattern)).startswith("api/"):
                continue
            if view is None or not view.__module__.startswith(("reminders.", "trainings.", "common.")):
                continue
            actions = getattr(callback, "actions", None)
            methods = list(actions) if actions else [m for m in WRITE_METHODS if hasattr(view, m)]
            found.update((str(pattern.name), m) for m in methods if m in WRITE_METHODS)

    walk(get_resolver().url_patterns, "")
    return found


@dataclass
class World:
    root: Any
    coach: Any
    player_user: Any
    guardian_user: Any
    player: Player
    guardian: Guardian
    training: Training


def _world() -> World:
    rules_seeded()
    coach = UserFactory(username="coach-strict", is_staff=True)
    team = TeamFactory(name="Strict FC", coaches=[coach])
    player_user = UserFactory(username="player-strict")
    player = PlayerFactory(name="Pia", user=player_user)
    MembershipFactory(team=team, player=player)
    guardian_user = UserFactory(username="guardian-strict")
    guardian = GuardianFactory(name="Pia's father", user=guardian_user, player=player)
    training = training_made(team, START, title="Strict session")
    schedule_create(key="strict-schedule", expression="@hourly")
    ThrottlePolicyFactory(name="strict-policy")
    root = UserFactory(username="root-strict", is_staff=True, is_superuser=True)
    return World(root, coach, player_user, guardian_user, player, guardian, training)


@pytest.fixture
def world() -> World:
    return _world()


def _job(key: str) -> dict[str, Any]:
    return {"key": key, "schedules": ["2030-12-24T14:00:00Z"], "callback": HTTP_CALLBACK}


def _training(w: World) -> dict[str, Any]:
    team = w.training.team_id
    return {"team": team, "title": "New", "start": "2030-07-01T16:00:00Z", "end": "2030-07-01T17:30:00Z"}


def _device(token: str) -> dict[str, Any]:
    return {"platform": "android", "provider": "fcm", "token": token}


QUIET = {"quiet_start": "22:00", "quiet_end": "07:00"}
SYNCED = {"external_id": "p1", "name": "Sam"}


@dataclass(frozen=True)
class Route:
    """Who calls a route, its URL's arguments, and a body it accepts (per method where they differ)."""

    caller: str  # an attribute of World
    kwargs: Callable[[World], dict[str, Any]]
    body: Callable[[World, str], dict[str, Any]]


def _same(body: Callable[[World], dict[str, Any]]) -> Callable[[World, str], dict[str, Any]]:
    return lambda w, method: body(w)


_NONE: Callable[[World], dict[str, Any]] = lambda w: {}  # noqa: E731
_TRAINING = lambda w: {"pk": w.training.pk}  # noqa: E731

ROUTES: dict[str, Route] = {
    "job-list": Route("root", _NONE, _same(lambda w: _job("strict-job"))),
    "job-bulk": Route("root", _NONE, _same(lambda w: {"jobs": [_job("strict-bulk")]})),
    "schedule-list": Route(
        "root",
        _NONE,
        _same(lambda w: {"key": "strict-new", "expression": "@daily", "callback": HTTP_CALLBACK}),
    ),
    "schedule-detail": Route(
        "root", lambda w: {"key": "strict-schedule"}, _same(lambda w: {"expression": "@daily"})
    ),
    "schedule-pause": Route("root", lambda w: {"key": "strict-schedule"}, _same(lambda w: {})),
    "schedule-resume": Route("root", lambda w: {"key": "strict-schedule"}, _same(lambda w: {})),
    "throttle-policy-list": Route(
        "root", _NONE, _same(lambda w: {"name": "strict-new", "max_per_second": 5})
    ),
    "throttle-policy-detail": Route(
        "root",
        lambda w: {"name": "strict-policy"},
        _same(lambda w: {"name": "strict-policy", "max_per_second": 7}),
    ),
    "training-list": Route("root", _NONE, _same(_training)),
    "training-detail": Route(
        "root", _TRAINING, lambda w, method: _training(w) if method == "put" else {"title": "Renamed"}
    ),
    "training-answers": Route(
        "root", _TRAINING, _same(lambda w: {"player": w.player.pk, "phase": "POST", "answers": {"rpe": 5}})
    ),
    "training-invitation": Route(
        "root", _TRAINING, _same(lambda w: {"player": w.player.pk, "status": "ACCEPTED"})
    ),
    "reminder-rule-detail": Route(
        "root", lambda w: {"slug": "pre-questionnaire"}, _same(lambda w: {"active": True})
    ),
    "guardian-list": Route(
        "coach", _NONE, _same(lambda w: {"name": "Aunt", "players": [{"player": w.player.pk}]})
    ),
    "guardian-detail": Route(
        "coach",
        lambda w: {"pk": w.guardian.pk},
        _same(lambda w: {"name": "Pia's dad", "players": [{"player": w.player.pk}]}),
    ),
    "player-devices": Route(
        "player_user", lambda w: {"player_pk": w.player.pk}, _same(lambda w: _device("p-strict"))
    ),
    "player-preferences": Route("player_user", lambda w: {"player_pk": w.player.pk}, _same(lambda w: QUIET)),
    "coach-profile": Route("coach", _NONE, _same(lambda w: {"language": "fr"})),
    "coach-devices": Route("coach", _NONE, _same(lambda w: _device("c-strict"))),
    "guardian-devices": Route(
        "guardian_user", lambda w: {"guardian_pk": w.guardian.pk}, _same(lambda w: _device("g-strict"))
    ),
    "guardian-preferences": Route(
        "guardian_user", lambda w: {"guardian_pk": w.guardian.pk}, _same(lambda w: QUIET)
    ),
    # The roster (trainings/roster/): the superuser sees every team and player.
    "team-list": Route("root", _NONE, _same(lambda w: {"name": "New FC", "time_zone": "Europe/Paris"})),
    "team-detail": Route("root", lambda w: {"pk": w.training.team_id}, _same(lambda w: {"name": "Renamed"})),
    "team-members": Route(
        "root", lambda w: {"team_pk": w.training.team_id}, _same(lambda w: {"players": [w.player.pk]})
    ),
    "player-list": Route("root", _NONE, _same(lambda w: {"name": "Noa", "team": w.training.team_id})),
    "player-detail": Route("root", lambda w: {"pk": w.player.pk}, _same(lambda w: {"name": "Pia B."})),
    "roster-sync": Route(
        "root",
        _NONE,
        _same(lambda w: {"teams": [{"external_id": "t1", "name": "Sync FC", "players": [SYNCED]}]}),
    ),
    "webhook-list": Route(
        "root", _NONE, _same(lambda w: {"url": "https://example.com/events", "events": ["answer.recorded"]})
    ),
    "answer-link": Route(
        "anonymous",
        lambda w: {
            "token": answer_token(player_id=w.player.pk, training_id=w.training.pk, kind="INVITATION")
        },
        _same(lambda w: {"response": "accepted"}),
    ),
}

WRITES = sorted(_write_routes())


def test_every_write_route_has_a_row() -> None:
    assert {name for name, _ in WRITES} == set(ROUTES), "add the route to ROUTES (or remove its row)"
    assert len(WRITES) >= 29  # the walk found the routes (a broken walk would pass the others vacuously)


def _client(w: World, caller: str) -> APIClient:
    return APIClient() if caller == "anonymous" else api_as(getattr(w, caller))


def _send(w: World, name: str, method: str, body: str) -> Any:
    route = ROUTES[name]
    url = reverse(name, kwargs=route.kwargs(w))
    return getattr(_client(w, route.caller), method)(url, data=body, content_type="application/json")


def _state() -> dict[str, list[dict[str, Any]]]:
    """Every row of the project's tables: a refused write leaves all of them as they were (the limits'
    counts aside: every request is counted, refused or not)."""
    return {
        model._meta.label: list(model.objects.order_by("pk").values())
        for app in ("reminders", "trainings")
        for model in apps.get_app_config(app).get_models()
        if model._meta.label != "reminders.RequestCount"
    }


@pytest.mark.parametrize(("name", "method"), WRITES)
def test_an_unknown_field_is_a_400_naming_it_and_nothing_is_written(
    world: World, name: str, method: str
) -> None:
    body = ROUTES[name].body(world, method)
    before = _state()

    response = _send(world, name, method, json.dumps({**body, UNKNOWN: 1}))

    assert response.status_code == 400, response.content
    assert response.json()[UNKNOWN] == ["unknown field."], response.json()
    assert _state() == before
    # The same body without the unknown key is accepted: the key alone made the 400.
    accepted = _send(world, name, method, json.dumps(body))
    assert accepted.status_code in (200, 201), accepted.content


@pytest.mark.parametrize(("name", "method"), WRITES)
def test_a_key_given_twice_is_a_400_naming_it_and_nothing_is_written(
    world: World, name: str, method: str
) -> None:
    body = ROUTES[name].body(world, method)
    key, value = next(iter(body.items()), ("anything", 1))
    once = json.dumps(body or {key: value})
    twice = f"{once[:-1]}, {json.dumps(key)}: {json.dumps(value)}}}"
    before = _state()

    response = _send(world, name, method, twice)

    assert response.status_code == 400, response.content
    assert f"duplicate key {key!r}" in response.json()["detail"], response.json()
    assert _state() == before


def test_a_training_posted_with_timezone_is_refused_not_made_in_the_teams_zone(world: World) -> None:
    body = {**_training(world), "timezone": "America/New_York"}

    response = api_as(world.root).post("/api/trainings/", body, format="json")

    assert response.status_code == 400
    assert response.json() == {"timezone": ["unknown field; did you mean 'time_zone'?"]}
    assert Training.objects.count() == 1


def test_a_training_posted_with_player_ids_is_refused_not_sent_to_the_whole_team(world: World) -> None:
    body = {**_training(world), "player_ids": [world.player.pk]}

    response = api_as(world.root).post("/api/trainings/", body, format="json")

    assert response.status_code == 400
    assert response.json() == {"player_ids": ["unknown field; did you mean 'players'?"]}
    assert Training.objects.count() == 1


def test_unknown_keys_are_answered_beside_the_other_field_errors(world: World) -> None:
    response = api_as(world.root).post("/api/trainings/", {"title": "", "timezone": "UTC"}, format="json")

    assert response.status_code == 400
    assert {"team", "title", "start", "end", "timezone"} <= set(response.json())


def _at(errors: Any, *path: str | int) -> Any:
    for step in path:
        errors = errors[step]
    return errors


NESTED = [
    ("/api/jobs/", {**_job("n1"), "callback": {**HTTP_CALLBACK, UNKNOWN: 1}}, ("callback", UNKNOWN)),
    (
        "/api/jobs/",
        {**_job("n2"), "callback": {"type": "http", "data": {**HTTP_CALLBACK["data"], UNKNOWN: 1}}},
        ("callback", "data", UNKNOWN),
    ),
    ("/api/jobs/bulk/", {"jobs": [_job("n3"), {**_job("n4"), UNKNOWN: 1}]}, ("jobs", "1", UNKNOWN)),
    (
        "/api/schedules/",
        {"key": "n5", "expression": "@daily", "callback": {**HTTP_CALLBACK, UNKNOWN: 1}},
        ("callback", UNKNOWN),
    ),
]


@pytest.mark.parametrize(("path", "body", "where"), NESTED)
def test_an_unknown_key_of_a_nested_object_is_a_400_under_its_path(
    world: World, path: str, body: dict[str, Any], where: tuple[str, ...]
) -> None:
    response = api_as(world.root).post(path, body, format="json")

    assert response.status_code == 400, response.content
    assert _at(response.json(), *where) == ["unknown field."], response.json()
    assert not Job.objects.filter(key__startswith="n").exists()
    assert not Schedule.objects.filter(key="n5").exists()


def test_an_unknown_key_in_a_list_item_is_a_400_under_its_index(world: World) -> None:
    guardian = api_as(world.coach).post(
        "/api/guardians/",
        {"name": "Aunt", "players": [{"player": world.player.pk, UNKNOWN: 1}]},
        format="json",
    )
    preferences = api_as(world.player_user).put(
        f"/api/players/{world.player.pk}/preferences/",
        {"kinds": [{"kind": "PRE", "muted": True, UNKNOWN: 1}]},
        format="json",
    )

    assert guardian.status_code == 400 and guardian.json()["players"]["0"][UNKNOWN] == ["unknown field."]
    assert preferences.status_code == 400 and preferences.json()["kinds"]["0"][UNKNOWN] == ["unknown field."]
    assert not Guardian.objects.filter(name="Aunt").exists()


def test_the_answer_links_common_body_with_a_key_twice_records_nothing(world: World) -> None:
    token = answer_token(player_id=world.player.pk, training_id=world.training.pk, kind="INVITATION")
    before = _state()

    response = Client().post(
        f"/api/answer-links/{token}/",
        '{"response": "accepted", "response": "denied"}',
        content_type="application/json",
    )

    assert response.status_code == 400
    assert "duplicate key 'response'" in response.json()["detail"]
    assert _state() == before


def test_a_form_body_still_works_and_is_as_strict(world: World) -> None:
    """The browsable API's HTML forms post form bodies with a CSRF token: the token is no unknown field."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(world.root)
    client.get("/api/throttle-policies/", HTTP_ACCEPT="text/html")  # sets the CSRF cookie
    token = client.cookies["csrftoken"].value
    form = {"csrfmiddlewaretoken": token, "name": "strict-form", "max_per_second": "3"}

    refused = client.post("/api/throttle-policies/", {**form, UNKNOWN: "1"}, HTTP_ACCEPT="application/json")
    accepted = client.post("/api/throttle-policies/", form, HTTP_ACCEPT="application/json")

    assert refused.status_code == 400 and refused.json() == {UNKNOWN: ["unknown field."]}
    assert accepted.status_code == 201, accepted.content


def test_the_schema_says_request_bodies_take_no_other_keys(world: World) -> None:
    """Generated clients and schemathesis' negative cases learn it from the schema."""
    schema = APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    components = schema["components"]["schemas"]

    for name in ("TrainingInput", "PatchedTrainingInput", "JobInput", "Callback", "Preferences", "Ward"):
        assert components[name]["additionalProperties"] is False, name
    assert components["JobInput"]["properties"]["callback"] == {"$ref": "#/components/schemas/Callback"}
    assert components["Callback"]["properties"]["data"]["additionalProperties"] is not False  # free-form
