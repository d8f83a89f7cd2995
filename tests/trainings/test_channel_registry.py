"""Delivery channels are one table (delivery/channels/registry.py): a channel added as a folder and one line
in the table takes addresses through the API and gets pushes through the gateway, whose handling of the
service's answers (accepted, dead address) knows nothing of any channel."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection

from delivery.channels import registry as channels
from delivery.channels.providers import providers_from_settings
from delivery.channels.registry import Channel
from delivery.gateway.consumer import Outcome, push_handle
from delivery.models import Device, PushSend, SendStatus, channel_constraints
from tests.clients import api_as
from tests.factories import UserFactory
from tests.trainings import sms_channel
from trainings.models import Player, Team

# The device checks change with the table, in the database: PostgreSQL rolls that DDL back with the test.
pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

SMS = Channel("sms", "SMS (tests)", "tests.trainings.sms_channel", platforms=("sms",),
              address="a phone number (E.164)")  # fmt: skip


@pytest.fixture
def sms(monkeypatch: pytest.MonkeyPatch) -> Iterator[Channel]:
    before = channel_constraints()
    # Its line in the table (BY_NAME and the new platform's label are read from the same module).
    monkeypatch.setattr(channels, "CHANNELS", (*channels.CHANNELS, SMS))
    monkeypatch.setitem(channels.BY_NAME, SMS.name, SMS)
    monkeypatch.setitem(channels.PLATFORMS, "sms", "SMS")
    # What the migration `manage.py makemigrations` writes for it does: the device checks built again.
    with connection.schema_editor() as editor:
        for constraint in before:
            editor.remove_constraint(Device, constraint)
        for constraint in channel_constraints():
            editor.add_constraint(Device, constraint)
    sms_channel.OUTBOX.clear()
    sms_channel.DEAD_NUMBERS.clear()
    yield SMS


def _player(team: Team, name: str) -> Player:
    player = team.players.get(name=name)
    player.user = UserFactory(username=name.lower())
    player.save()
    return player


def _register(player: Player, **device: str) -> Any:
    return api_as(player.user).post(f"/api/players/{player.pk}/devices/", device, format="json")


def _push(player: Player, key: str) -> dict[str, Any]:
    return {
        "schema": "trainings.push/2", "idempotency_key": key, "player": player.pk, "language": "en",
        "title": "Pre-training questionnaire", "body": "Speed session starts at 6 p.m.",
        "training": "7d0c0a4e-0000-4000-8000-000000000000", "kind": "PRE", "rule": "pre-questionnaire",
        "fire_at": "2030-06-11T14:30:00+00:00",
    }  # fmt: skip


def test_its_addresses_are_registered_through_the_api_and_checked_by_its_folder(
    sms: Channel, team: Team
) -> None:
    alice = _player(team, "Alice")

    not_a_number = _register(alice, platform="sms", provider="sms", token="0612345678")
    assert not_a_number.status_code == 400 and "E.164" in not_a_number.json()["token"][0]
    elsewhere = _register(alice, platform="android", provider="sms", token="+33612345678")
    assert elsewhere.status_code == 400 and "sms devices are sms" in elsewhere.json()["platform"][0]
    created = _register(alice, platform="sms", provider="sms", token="+33612345678")
    assert created.status_code == 201, created.json()
    device = Device.objects.get(pk=created.json()["id"])
    assert (device.get_provider_display(), device.get_platform_display()) == ("SMS (tests)", "SMS")


def test_the_gateway_sends_to_it_and_records_each_answer_as_for_any_channel(sms: Channel, team: Team) -> None:
    alice, bruno = _player(team, "Alice"), _player(team, "Bruno")
    assert _register(alice, platform="sms", provider="sms", token="+33612345678").status_code == 201
    assert _register(bruno, platform="sms", provider="sms", token="+33700000000").status_code == 201
    sms_channel.DEAD_NUMBERS.add("+33700000000")
    providers = providers_from_settings()
    assert "sms=sms" in providers.describe()

    assert push_handle(_push(alice, "occ-1.alice"), providers=providers) == Outcome.DELIVERED
    assert push_handle(_push(bruno, "occ-1.bruno"), providers=providers) == Outcome.DELIVERED

    assert sms_channel.OUTBOX == [
        ("+33612345678", "Pre-training questionnaire: Speed session starts at 6 p.m.")
    ]
    sent = {s.push_key: s for s in PushSend.objects.filter(provider="sms")}
    assert (sent["occ-1.alice"].status, sent["occ-1.alice"].provider_message_id) == (
        SendStatus.ACCEPTED,
        "sms-1",
    )
    assert sent["occ-1.bruno"].status == SendStatus.TOKEN_DEAD
    dead = Device.objects.get(provider="sms", token="+33700000000")
    assert dead.disabled_at is not None and "number no longer exists" in dead.disabled_reason
    # Their other devices were served as before, beside it (the logging stand-in here).
    others = PushSend.objects.exclude(provider="sms").filter(push_key__in=["occ-1.alice", "occ-1.bruno"])
    assert {s.status for s in others} == {SendStatus.ACCEPTED}
