"""A player's devices over the API: the player registers and removes their own; coaches of the player's
teams and operators read (tokens shortened); re-registering a known token re-enables it."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.utils import timezone
from rest_framework.test import APIClient

from delivery.models import Device
from tests.clients import api_as
from tests.factories import DeviceFactory, MembershipFactory, TeamFactory, UserFactory

pytestmark = pytest.mark.django_db

APNS_TOKEN = "ab" * 32


@pytest.fixture
def alice(team: Any) -> Any:
    player = team.players.get(name="Alice")
    player.user = UserFactory(username="alice")
    player.save()
    return player


def _url(player: Any) -> str:
    return f"/api/players/{player.pk}/devices/"


def test_a_player_registers_lists_and_removes_their_own_devices(alice: Any) -> None:
    api = api_as(alice.user)
    created = api.post(
        _url(alice), {"platform": "ios", "provider": "apns", "token": APNS_TOKEN}, format="json"
    )
    assert created.status_code == 201, created.json()
    assert created.json()["token"] == APNS_TOKEN and created.json()["enabled"] is True

    listed = api.get(_url(alice)).json()
    assert [(d["provider"], d["token"]) for d in listed] == [("fcm", "fcm-alice"), ("apns", APNS_TOKEN)]

    assert api.delete(f"{_url(alice)}{created.json()['id']}/").status_code == 204
    assert not Device.objects.filter(token=APNS_TOKEN).exists()


def test_registering_a_known_token_re_enables_it_and_moves_it_to_the_caller(alice: Any) -> None:
    old = DeviceFactory(provider="fcm", platform="android", token="shared", disabled_at=timezone.now(),
                        disabled_reason="FCM 404 UNREGISTERED")  # fmt: skip
    answer = api_as(alice.user).post(
        _url(alice), {"platform": "android", "provider": "fcm", "token": "shared"}, format="json"
    )
    assert answer.status_code == 200
    device = Device.objects.get(pk=old.pk)
    assert (device.player_id, device.disabled_at, device.disabled_reason) == (alice.pk, None, "")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"platform": "phone", "provider": "fcm", "token": "t"}, "platform"),
        ({"platform": "ios", "provider": "gcm", "token": "t"}, "provider"),
        ({"platform": "ios", "provider": "fcm"}, "token"),
        ({"platform": "android", "provider": "fcm", "token": "two words"}, "token"),
        ({"platform": "android", "provider": "apns", "token": APNS_TOKEN}, "platform"),
        ({"platform": "ios", "provider": "apns", "token": "not-hex"}, "token"),
    ],
)
def test_a_bad_registration_is_a_400_naming_the_field(alice: Any, body: dict[str, str], field: str) -> None:
    answer = api_as(alice.user).post(_url(alice), body, format="json")
    assert answer.status_code == 400
    assert field in answer.json()
    assert list(alice.devices.values_list("token", flat=True)) == ["fcm-alice"]  # only the factory's


def test_the_coach_reads_with_tokens_shortened_but_cannot_register(alice: Any, coach: Any) -> None:
    api = api_as(coach)
    [device] = api.get(_url(alice)).json()
    assert device["token"] == "…-alice" and device["provider"] == "fcm"
    answer = api.post(_url(alice), {"platform": "android", "provider": "fcm", "token": "x"}, format="json")
    assert answer.status_code == 403
    assert api.delete(f"{_url(alice)}{device['id']}/").status_code == 403


def test_an_operator_reads_any_players_devices(alice: Any) -> None:
    operator = UserFactory(username="operator")
    operator.user_permissions.add(Permission.objects.get(codename="manage_all_teams"))
    assert len(api_as(operator).get(_url(alice)).json()) == 1


def test_other_players_and_other_coaches_get_a_404(alice: Any) -> None:
    other = MembershipFactory(team=TeamFactory(coaches=[UserFactory(username="coach-b")])).player
    other.user = UserFactory(username="bob")
    other.save()
    assert api_as(other.user).get(_url(alice)).status_code == 404
    assert api_as(other.user).post(_url(alice), {}, format="json").status_code == 404
    assert api_as(UserFactory(username="coach-b")).get(_url(alice)).status_code == 404
    assert APIClient().get(_url(alice)).status_code == 401
