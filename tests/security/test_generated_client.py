"""A client generated from /api/schema/ by openapi-python-client, as an integrating platform makes one: every
module it generates imports, and it drives a platform's day against a live server (register a player's
device, create a training, retry the create with its Idempotency-Key, move it, read its timeline with a
`?status=` filter, record an answer, delete it), every answer parsed into the generated models.

The client is generated into the test's tmp dir on each run, from the schema the live server serves.
"""

from __future__ import annotations

import datetime as dt
import importlib
import importlib.util
import pkgutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import Permission
from rest_framework.authtoken.models import Token

from tests.factories import WELLNESS, UserFactory, rules_seeded

pytestmark = pytest.mark.django_db(transaction=True)

PACKAGE = "reminders_client"
START = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)


@pytest.fixture
def generated(live_server: Any, tmp_path: Path) -> Iterator[ModuleType]:
    """The generated package, imported from tmp_path (and forgotten afterwards)."""
    schema = tmp_path / "schema.json"
    answer = httpx.get(f"{live_server.url}/api/schema/?format=json", timeout=30)
    assert answer.status_code == 200
    schema.write_bytes(answer.content)
    config = tmp_path / "config.yml"
    config.write_text("post_hooks: []\n")  # no formatter run over the generated code
    generator = Path(sys.executable).with_name("openapi-python-client")
    run = subprocess.run(
        [str(generator), "generate", "--path", str(schema), "--meta", "none", "--config", str(config),
         "--output-path", str(tmp_path / PACKAGE)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    # A schema the generator had to skip a part of says so ("Warning(s) encountered"): none may be.
    assert run.returncode == 0 and "Warning" not in run.stdout + run.stderr, run.stdout + run.stderr
    sys.path.insert(0, str(tmp_path))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(tmp_path))
        for name in [name for name in sys.modules if name == PACKAGE or name.startswith(f"{PACKAGE}.")]:
            del sys.modules[name]


def _platform_token() -> str:
    """The platform's service account: the integration permission, its token."""
    user = UserFactory(username="club-platform")
    user.user_permissions.add(Permission.objects.get(codename="use_integration_api"))
    return str(Token.objects.create(user=user).key)


def _roster(client: Any, models: ModuleType) -> tuple[int, list[int]]:
    """team -> players -> members through the generated client: the team's id and its players'."""

    def run(module: str, **kwargs: Any) -> Any:
        return importlib.import_module(f"{PACKAGE}.api.{module}").sync_detailed(client=client, **kwargs)

    made = run("teams.teams_create", body=models.TeamInput(name="U15", time_zone="Europe/Paris",
                                                           external_id="t-u15"),
               idempotency_key="team-t-u15")  # fmt: skip
    assert made.status_code == 201
    team = made.parsed.id
    players = []
    for external_id, name in (("m-1", "Alice"), ("m-2", "Bruno")):
        player = run("players.players_create", body=models.PlayerInput(name=name, external_id=external_id))
        assert player.status_code == 201
        players.append(player.parsed.id)
    members = run("teams.teams_members_update", team_pk=team, body=models.Members(players=players))
    assert members.status_code == 200
    found = run("teams.teams_list", external_id="t-u15")
    assert [row.id for row in found.parsed.results] == [team]
    return team, players


def _every_module_imports(generated: ModuleType) -> None:
    names = [info.name for info in pkgutil.walk_packages(generated.__path__, f"{PACKAGE}.")]
    failed = {}
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as exc:  # every failure is reported at once
            failed[name] = repr(exc)
    assert len(names) > 100 and failed == {}


def test_every_module_imports_and_a_platforms_day_runs_through_it(
    generated: ModuleType, live_server: Any
) -> None:
    """One test: generating the client is most of its time."""
    _every_module_imports(generated)
    rules_seeded()  # the transactional test's flush removed them
    token = _platform_token()
    # Any answer the schema does not document raises.
    client = generated.AuthenticatedClient(base_url=live_server.url, token=token, prefix="Token",
                                           raise_on_unexpected_status=True)  # fmt: skip
    api = importlib.import_module(f"{PACKAGE}.api.trainings")
    models = importlib.import_module(f"{PACKAGE}.models")

    def call(module: str, **kwargs: Any) -> Any:
        return importlib.import_module(f"{api.__name__}.{module}").sync_detailed(client=client, **kwargs)

    team, players = _roster(client, models)
    # Devices on the player's behalf.
    devices = importlib.import_module(f"{PACKAGE}.api.players.players_devices_create")
    device = devices.sync_detailed(
        players[0],
        client=client,
        body=models.DeviceInput(platform=models.PlatformEnum.ANDROID, provider=models.ProviderEnum.FCM,
                                token="fcm-alice-from-the-platform"),
    )  # fmt: skip
    assert device.status_code == 201 and isinstance(device.parsed, models.Device)

    # Create, and retry the create with the same key: one training.
    body = models.TrainingInput(team=team, title="Speed session", start=START,
                                end=START + dt.timedelta(minutes=90))  # fmt: skip
    created = call("trainings_create", body=body, idempotency_key="platform-training-81")
    assert created.status_code == 201 and isinstance(created.parsed, models.Training)
    training = created.parsed
    assert training.time_zone == "Europe/Paris"  # the team's, as the schema says
    retried = call("trainings_create", body=body, idempotency_key="platform-training-81")
    assert (retried.status_code, retried.parsed.id, retried.headers["Idempotent-Replayed"]) == (
        201, training.id, "true",
    )  # fmt: skip
    other = models.TrainingInput(team=team, title="Another", start=START, end=START + dt.timedelta(hours=1))
    reused = call("trainings_create", body=other, idempotency_key="platform-training-81")
    assert reused.status_code == 422 and "another request" in reused.parsed.detail

    # Move it an hour later.
    moved = call(
        "trainings_partial_update",
        id=training.id,
        body=models.PatchedTrainingInput(start=START + dt.timedelta(hours=1),
                                         end=START + dt.timedelta(hours=2)),
    )  # fmt: skip
    assert moved.status_code == 200 and moved.parsed.start == START + dt.timedelta(hours=1)

    timeline = call("trainings_timeline_list", id=training.id)
    assert timeline.status_code == 200 and timeline.parsed
    assert all(isinstance(entry, models.TimelineEntry) for entry in timeline.parsed)
    scheduled = call(
        "trainings_timeline_list", id=training.id, status=models.TrainingsTimelineListStatus.SCHEDULED
    )
    assert scheduled.parsed and {entry.status for entry in scheduled.parsed} == {"scheduled"}
    assert (
        call(
            "trainings_timeline_list", id=training.id, status=models.TrainingsTimelineListStatus.DELIVERED
        ).parsed
        == []
    )

    answer = call(
        "trainings_answers_create",
        id=training.id,
        body=models.AnswerInput(
            player=players[1],
            phase=models.PhaseEnum.PRE,
            answers=models.AnswerInputAnswers.from_dict(WELLNESS),
        ),
    )
    assert answer.status_code == 201 and isinstance(answer.parsed, models.Answer)

    assert call("trainings_destroy", id=training.id).status_code == 204
    gone = call("trainings_timeline_list", id=training.id)
    assert gone.status_code == 404 and isinstance(gone.parsed, models.TrainingsTimelineListResponse404)
