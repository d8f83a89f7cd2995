"""Every response is the one the OpenAPI schema documents: its status code, content type, headers and body.

`test_schemathesis` digs for 5xx with many random requests; this test holds every operation to the schema
with a few derandomized requests each (the same every run, so it stays fast and a failure reproduces),
with a valid token, with no token (401) and with a bad one, and on rows that exist, so the documented
200 shapes are compared with real data (e.g. a schedule without a throttle answers `"throttle": null`).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import schemathesis
from django.test import override_settings
from django.utils import timezone
from hypothesis import HealthCheck, Phase, settings
from rest_framework.authtoken.models import Token
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from config.wsgi import application
from tests.factories import UserFactory

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("wsgi_keeps_the_test_connection")]

# The per-address limit counts in the database, which collection may not touch: off while the schema loads
# (the middleware reads the setting per request; the tests' own requests are counted).
with override_settings(ADDRESS_LIMITED_PATHS=[]):
    schema = schemathesis.openapi.from_wsgi("/api/schema/", application)

CONFORMANCE = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


@pytest.fixture
def token() -> str:
    return Token.objects.create(user=UserFactory(queues=["*"])).key


@schema.parametrize()
@settings(
    max_examples=8,
    derandomize=True,
    phases=[Phase.generate],
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
    ],
)
def test_every_operation_answers_as_documented(case: Any, token: str) -> None:
    for headers in ({"Authorization": f"Token {token}"}, {}, {"Authorization": "Token not-a-token"}):
        case.call_and_validate(headers=headers, checks=CONFORMANCE)


def _call(token: str, path: str, method: str, *, body: Any = None, **parameters: Any) -> Any:
    kwargs: dict[str, Any] = {"path_parameters": parameters} if parameters else {}
    if body is not None:
        kwargs.update(body=body, media_type="application/json")
    case = schema[path][method].Case(**kwargs)
    return case.call_and_validate(headers={"Authorization": f"Token {token}"}, checks=CONFORMANCE)


def test_schedules_and_throttle_policies_with_data_answer_as_documented(token: str) -> None:
    """A schedule with no throttle answers `"throttle": null`, which the schema declared a string."""
    callback = {"type": "rabbitmq", "data": {"queue": "documented", "payload": {"a": 1}}}
    body = {
        "key": "documented",
        "expression": "*/5 * * * *",
        "timezone": "Europe/Paris",
        "callback": callback,
    }
    assert _call(token, "/api/schedules/", "POST", body=body).status_code == 201
    assert _call(token, "/api/schedules/", "GET").status_code == 200
    for path, method in [
        ("/api/schedules/{key}/", "GET"),
        ("/api/schedules/{key}/preview/", "GET"),
        ("/api/schedules/{key}/pause/", "POST"),
        ("/api/schedules/{key}/resume/", "POST"),
    ]:
        assert _call(token, path, method, key="documented").status_code == 200, path
    patch = {"expression": "@daily"}
    assert _call(token, "/api/schedules/{key}/", "PATCH", body=patch, key="documented").status_code == 200
    policy = {"name": "documented", "max_per_second": 10}
    assert _call(token, "/api/throttle-policies/", "POST", body=policy).status_code == 201
    assert _call(token, "/api/throttle-policies/", "GET").status_code == 200
    throttled = {**body, "key": "throttled", "throttle": "documented"}
    assert _call(token, "/api/schedules/", "POST", body=throttled).status_code == 201
    assert _call(token, "/api/schedules/{key}/", "DELETE", key="documented").status_code in (200, 204)


def test_trainings_with_data_answer_as_documented() -> None:
    """A coach's training with its players, its timeline and a player's devices, read and changed."""
    from tests.factories import MembershipFactory, PlayerFactory, TeamFactory, rules_seeded

    rules_seeded()
    coach = UserFactory()
    token = Token.objects.create(user=coach).key
    team = TeamFactory(coaches=[coach])
    player = PlayerFactory()
    MembershipFactory(team=team, player=player)
    body = {
        "team": team.pk,
        "title": "Speed session",
        "start": "2030-06-11T18:00:00+02:00",
        "end": "2030-06-11T19:30:00+02:00",
        "time_zone": "Europe/Paris",
        "location": "Stadium",
    }
    created = _call(token, "/api/trainings/", "POST", body=body)
    assert created.status_code == 201
    training = created.json()["id"]
    assert _call(token, "/api/trainings/", "GET").status_code == 200
    for path in ("/api/trainings/{id}/", "/api/trainings/{id}/timeline/"):
        assert _call(token, path, "GET", id=training).status_code == 200, path
    moved = {"start": "2030-06-11T18:30:00+02:00", "end": "2030-06-11T20:00:00+02:00"}
    assert _call(token, "/api/trainings/{id}/", "PATCH", body=moved, id=training).status_code == 200
    assert _call(token, "/api/reminder-rules/", "GET").status_code == 200
    assert _call(token, "/api/players/{player_pk}/devices/", "GET", player_pk=player.pk).status_code in (
        200,
        403,
    )
    assert _call(token, "/api/trainings/{id}/", "DELETE", id=training).status_code in (200, 204)


def test_experiments_with_results_answer_as_documented() -> None:
    """An experiment with a past training whose answers are known: its list entry and its results, with
    every arm's interval, median and verdict filled, match the schema."""
    from tests.factories import rules_seeded
    from tests.trainings.experiment_data import known_training
    from trainings.experiments.control import experiment_start
    from trainings.models import Experiment

    pre = rules_seeded()["pre-questionnaire"]
    token = Token.objects.create(user=UserFactory(is_staff=True, is_superuser=True)).key
    experiment = experiment_start(rule=pre, name="documented", variants=[("early", ["120m", "45m", "15m"])])
    start = timezone.now().replace(microsecond=0) - dt.timedelta(days=1)
    Experiment.objects.filter(pk=experiment.pk).update(started_at=start - dt.timedelta(days=1))
    experiment.refresh_from_db()
    known_training(experiment, pre, start, {0: ["before", "second", "never"], 1: ["second", "never"]})
    assert _call(token, "/api/experiments/", "GET").status_code == 200
    assert _call(token, "/api/experiments/{id}/", "GET", id=experiment.pk).status_code == 200
    results = _call(token, "/api/experiments/{id}/results/", "GET", id=experiment.pk)
    assert results.status_code == 200 and results.json()["trainings"] == 1
