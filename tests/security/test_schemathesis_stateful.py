"""Schemathesis's stateful run over every operation of the schema, with every check, as an operator.

The links between operations (a created training's id to its PATCH, DELETE, answers and timeline; a job's
key to its GET and DELETE; a schedule's key to pause, resume, preview; a webhook's id to its DELETE, ...)
are inferred by schemathesis from the schema. A scenario creates, reads, changes and deletes through them,
so the requests reach the code behind a real row, not only a 404, and every answer must be documented,
never a 5xx, and never refuse valid data or accept invalid data. The operator's token sees every team:
the seeded team, its players and a guardian are there to be named (the roster's routes too: teams,
players, members, the sync).
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import schemathesis
from django.db import transaction
from django.test import override_settings
from django.utils import timezone
from hypothesis import HealthCheck, Phase, settings
from rest_framework.authtoken.models import Token

from config.wsgi import application
from tests.factories import GuardianFactory, MembershipFactory, PlayerFactory, TeamFactory, UserFactory
from tests.security.schemathesis_checks import TOKEN, excluded_checks, schema_authenticated

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("wsgi_keeps_the_test_connection")]

# The per-address limit counts in the database, which collection may not touch: off while the schema loads
# (the middleware reads the setting per request; the tests' own requests are counted).
with override_settings(ADDRESS_LIMITED_PATHS=[]):
    schema = schemathesis.openapi.from_wsgi("/api/schema/", application)
schema_authenticated(schema)

# Scenarios, and at most this many steps in each: about 700 requests in all, on top of the per-operation
# run in test_schemathesis.py. SCHEMATHESIS_STATEFUL_EXAMPLES=300 digs deeper on demand.
SCENARIOS = int(os.environ.get("SCHEMATHESIS_STATEFUL_EXAMPLES", "30"))
STEPS = 20


# The rows the fixture made, for the bodies below.
SEEDED: dict[str, Any] = {}


def _valid_body(operation: str, body: dict[str, Any]) -> dict[str, Any] | None:
    """A body that names the seeded rows and instants the API accepts, keeping the generated rest: random
    ids and instants almost never name a row or fall in the accepted range, so without these few the
    scenarios would never create a training, a job or a schedule to follow the links of."""
    soon = timezone.now() + timedelta(days=3)
    instants = {"start": soon.isoformat(), "end": (soon + timedelta(hours=1)).isoformat()}
    if operation in ("POST /api/trainings/", "PUT /api/trainings/{id}/"):
        return {**body, "team": SEEDED["team"], "time_zone": "Europe/Paris", **instants,
                "players": SEEDED["players"]}  # fmt: skip
    if operation == "POST /api/teams/":
        return {**body, "time_zone": "Europe/Paris"}
    if operation in ("POST /api/players/", "PATCH /api/players/{id}/"):
        person = {
            "time_zone": "Europe/Paris",
            "language": "fr",
            "email": f"p{zlib.crc32(repr(body).encode())}@example.com",
        }
        return {**body, **person, **({"team": SEEDED["team"]} if operation.startswith("POST") else {})}
    if operation == "PUT /api/teams/{id}/members/":
        return {"players": SEEDED["players"]}
    if operation == "POST /api/roster/":
        player = {
            "external_id": "p1",
            "name": "P",
            "language": "en",
            "guardians": [{"external_id": "g1", "name": "G"}],
        }
        return {"teams": [{"external_id": "t1", "name": "T", "time_zone": "UTC", "players": [player]}]}
    if operation == "POST /api/jobs/":
        queue = {"type": "rabbitmq", "data": {"queue": "q.schemathesis", "payload": body.get("key", "")}}
        return {**body, "schedules": [instants["start"]], "callback": queue}
    if operation == "POST /api/schedules/":
        queue = {"type": "rabbitmq", "data": {"queue": "q.schemathesis", "payload": {}}}
        return {**body, "expression": "@every 1h", "timezone": "UTC", "callback": queue, "throttle": None}
    if operation == "POST /api/webhooks/":  # a public URL (the SSRF guard refuses the rest with a 400)
        return {**body, "url": "https://example.com/events", "events": ["answer.recorded", "push.outcome"]}
    return None


@schema.hook
def map_case(context: Any, case: Any) -> Any:
    """Every other positive JSON body of the creating operations made valid by `_valid_body` (chosen by a
    checksum of the drawn body, so a replay chooses the same)."""
    meta = case.meta
    positive = meta is None or not meta.generation.mode.is_negative
    json_dict = case.media_type == "application/json" and isinstance(case.body, dict)
    if positive and json_dict and zlib.crc32(repr(sorted(case.body.items(), key=str)).encode()) % 2:
        valid = _valid_body(f"{case.method.upper()} {case.operation.path}", case.body)
        if valid is not None:
            case.body = valid
    return case


@pytest.fixture
def operator_token() -> Iterator[str]:
    user = UserFactory(is_staff=True, is_superuser=True, queues=["*"])
    team = TeamFactory(coaches=[user])
    players = [PlayerFactory() for _ in range(3)]
    for player in players:
        MembershipFactory(team=team, player=player)
    GuardianFactory()
    SEEDED.update(team=team.pk, players=[player.pk for player in players])
    TOKEN["key"] = Token.objects.create(user=user).key
    yield TOKEN["key"]
    TOKEN.clear()
    SEEDED.clear()


def test_it_answers_every_stateful_scenario_as_documented(operator_token: str) -> None:
    machine: Any = schema.as_state_machine()

    class Workflow(machine):
        """Each scenario starts from the fixture's rows: what one created is rolled back after it, so that
        the same draws meet the same state (Hypothesis refuses generation that depends on state)."""

        def setup(self) -> None:
            self.savepoint = transaction.savepoint()

        def teardown(self) -> None:
            transaction.savepoint_rollback(self.savepoint)

        def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
            case.validate_response(
                response,
                excluded_checks=excluded_checks(case),
                transport_kwargs=kwargs or None,
                recorder=self.recorder,
            )

    Workflow.run(
        settings=settings(
            max_examples=SCENARIOS,
            stateful_step_count=STEPS,
            phases=[Phase.generate],
            deadline=None,
            suppress_health_check=list(HealthCheck),
        )
    )
