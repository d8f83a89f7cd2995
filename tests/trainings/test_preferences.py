"""Players' own preferences: channels and mute per reminder kind and their own quiet hours, through the
API for the app; a muted reminder is a recorded outcome `muted`; a rule an operator marks critical goes
through mute and quiet hours."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from rest_framework.test import APIClient

from reminders.models import Occurrence
from reminders.transports import Delivery
from tests.factories import DeviceFactory, PlayerFactory, UserFactory
from tests.trainings.push_fixtures import message
from trainings.models import (
    Player,
    Push,
    PushSend,
    PushStatus,
    ReminderPreference,
    ReminderRule,
    SendStatus,
    Team,
)
from trainings.push.gateway import Outcome, PushSender
from trainings.push.peers import ApnsPeer, FcmPeer
from trainings.selectors import job_key
from trainings.services import HANDLER_NAME, reminder_fire, rule_update, training_create

pytestmark = pytest.mark.django_db


def _owner() -> tuple[Player, APIClient]:
    user = UserFactory()
    player = PlayerFactory(user=user, devices=[])
    client = APIClient()
    client.force_authenticate(user)
    return player, client


def test_the_app_reads_every_kinds_preference_and_the_player_changes_them() -> None:
    player, client = _owner()
    path = f"/api/players/{player.pk}/preferences/"
    body = client.get(path).json()
    assert body["quiet_start"] is None
    assert {k["kind"]: (k["channels"], k["muted"]) for k in body["kinds"]} == {
        "PRE": ("default", False), "POST": ("default", False), "INVITATION": ("default", False),
    }  # fmt: skip
    kinds = [{"kind": "POST", "muted": True}, {"kind": "PRE", "channels": "email"}]
    body = {"kinds": kinds, "quiet_start": "22:30", "quiet_end": "07:00"}
    changed = client.put(path, body, format="json")
    assert changed.status_code == 200, changed.content
    kinds = {k["kind"]: (k["channels"], k["muted"]) for k in changed.json()["kinds"]}
    assert kinds["POST"] == ("default", True) and kinds["PRE"] == ("email", False)
    player.refresh_from_db()
    assert (player.quiet_start, player.quiet_end) == (dt.time(22, 30), dt.time(7))


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"quiet_start": "22:00"}, "quiet_end"),
        ({"kinds": [{"kind": "LINEUP"}]}, "kinds"),
        ({"kinds": [{"kind": "PRE", "channels": "sms"}]}, "kinds"),
        ({"kinds": [{"kind": "PRE"}, {"kind": "PRE"}]}, "kinds"),
    ],
)
def test_a_bad_preference_is_a_400_naming_the_field(body: dict[str, Any], field: str) -> None:
    player, client = _owner()
    response = client.put(f"/api/players/{player.pk}/preferences/", body, format="json")
    assert response.status_code == 400
    assert field in response.json()
    assert not ReminderPreference.objects.exists()


def test_only_the_player_changes_their_preferences(coach: Any, team: Team) -> None:
    player = team.players.get(name="Alice")
    client = APIClient()
    client.force_authenticate(coach)
    path = f"/api/players/{player.pk}/preferences/"
    assert client.get(path).status_code == 200  # the coach of the team reads them
    assert client.put(path, {"kinds": [{"kind": "PRE", "muted": True}]}, format="json").status_code == 403
    stranger = APIClient()
    stranger.force_authenticate(UserFactory())
    assert stranger.get(path).status_code == 404


def test_a_muted_kind_is_a_recorded_outcome_and_a_critical_rule_still_comes(
    apns: ApnsPeer, fcm: FcmPeer, sender: PushSender, rules: dict[str, ReminderRule]
) -> None:
    player = PlayerFactory(devices=[])
    DeviceFactory(player=player, provider="fcm", platform="android", token="phone")
    ReminderPreference.objects.create(player=player, kind="PRE", muted=True)

    assert sender.handle([message("occ.1", player.pk, kind="PRE")])[0].outcome == Outcome.MUTED
    send = PushSend.objects.get(push_key="occ.1")
    assert (send.status, send.device_id) == (SendStatus.MUTED, None)
    assert fcm.received == []

    rule_update(rule=rules["pre-questionnaire"], critical=True)
    assert sender.handle([message("occ.2", player.pk, kind="PRE")])[0].outcome == Outcome.DELIVERED
    assert len(fcm.received) == 1


@pytest.mark.rabbitmq
def test_a_critical_rule_goes_through_quiet_hours(
    team: Team, rules: dict[str, ReminderRule], push_queue: str
) -> None:
    team.quiet_start, team.quiet_end = dt.time(0), dt.time(23, 59)  # quiet almost all day
    team.save()
    rule = rules["pre-questionnaire"]
    start = dt.datetime(2030, 6, 11, 16, tzinfo=dt.UTC)
    training = training_create(team=team, title="Session", start=start, end=start + dt.timedelta(hours=1),
                               time_zone="Europe/Paris")  # fmt: skip

    def fire_at(minutes: int) -> None:
        at = start - dt.timedelta(minutes=minutes)
        occurrence = Occurrence.objects.get(job__key=job_key(training_id=training.pk, rule=rule), fire_at=at)
        payload = {"training": str(training.pk), "rule": rule.pk}
        reminder_fire(delivery=Delivery(occurrence.pk, occurrence.idempotency_key, occurrence.job.key, at, 1,
                                        HANDLER_NAME, payload))  # fmt: skip

    fire_at(90)
    assert set(Push.objects.values_list("status", flat=True)) == {PushStatus.SKIPPED}  # quiet: no use after
    rule_update(rule=rule, critical=True)
    rule.refresh_from_db()
    fire_at(75)
    at_75 = Push.objects.filter(offset="75m")
    assert at_75.count() == 3 and set(at_75.values_list("status", flat=True)) == {PushStatus.SENT}
