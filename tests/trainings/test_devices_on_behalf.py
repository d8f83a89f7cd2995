"""Devices on a player's (or a guardian's) behalf: a platform's integration caller, one token holding
`trainings.use_integration_api`, registers and removes the devices of the people it can read through the
same routes the apps use; the player's own token keeps working for its own; nobody else gains anything."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from delivery.models import Device
from tests.clients import api_as
from tests.factories import GuardianFactory, MembershipFactory, PlayerFactory, TeamFactory, UserFactory
from trainings.models import Team

pytestmark = pytest.mark.django_db

FCM = {"platform": "android", "provider": "fcm", "token": "fcm-token-from-the-platform"}


def _integration_caller(username: str = "club-platform") -> Any:
    """A service account: no staff flag, no password use, the integration permission (as docs/api.md says
    an operator makes one)."""
    user = UserFactory(username=username)
    user.user_permissions.add(Permission.objects.get(codename="use_integration_api"))
    return user


@pytest.fixture
def platform(team: Team) -> APIClient:
    """The platform's client, over its real token; it reads `team` (its roster)."""
    user = _integration_caller()
    team.coaches.add(user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def test_the_platform_registers_lists_and_removes_a_players_device(platform: APIClient, team: Team) -> None:
    alice = team.players.get(name="Alice")
    url = f"/api/players/{alice.pk}/devices/"
    created = platform.post(url, FCM, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["token"] == FCM["token"]  # the caller's own token, given back whole
    assert Device.objects.get(pk=created.json()["id"]).player == alice

    # Registered again (a retry, or the app's own registration of the same token): 200, still one row.
    assert platform.post(url, FCM, format="json").status_code == 200
    listed = platform.get(url).json()
    assert [d["token"] for d in listed if d["id"] == created.json()["id"]] == ["…atform"]  # shortened

    assert platform.delete(f"{url}{created.json()['id']}/").status_code == 204
    assert not Device.objects.filter(token=FCM["token"]).exists()


def test_the_platform_registers_and_removes_a_guardians_device(platform: APIClient, team: Team) -> None:
    guardian = GuardianFactory(player=team.players.get(name="Bruno"), devices=[])
    url = f"/api/guardians/{guardian.pk}/devices/"
    created = platform.post(url, {"platform": "ios", "provider": "apns", "token": "cd" * 32}, format="json")
    assert created.status_code == 201, created.content
    assert Device.objects.get(pk=created.json()["id"]).guardian == guardian
    assert platform.delete(f"{url}{created.json()['id']}/").status_code == 204
    assert not guardian.devices.exists()


def test_the_players_own_token_keeps_working_for_its_own_devices(platform: APIClient, team: Team) -> None:
    alice = team.players.get(name="Alice")
    alice.user = UserFactory(username="alice")
    alice.save()
    url = f"/api/players/{alice.pk}/devices/"
    by_platform = platform.post(url, FCM, format="json").json()
    own = api_as(alice.user)
    assert own.post(url, {**FCM, "token": "alices-own"}, format="json").status_code == 201
    # The player removes the one the platform registered too: both are hers.
    assert own.delete(f"{url}{by_platform['id']}/").status_code == 204
    assert list(alice.devices.values_list("token", flat=True)) == ["fcm-alice", "alices-own"]


def test_people_the_platform_cannot_read_are_404_and_nothing_changes(platform: APIClient) -> None:
    elsewhere = TeamFactory(name="Another club")
    zoe = PlayerFactory(name="Zoe")
    MembershipFactory(team=elsewhere, player=zoe)
    guardian = GuardianFactory(player=zoe)
    before = set(Device.objects.values_list("pk", flat=True))
    assert platform.post(f"/api/players/{zoe.pk}/devices/", FCM, format="json").status_code == 404
    assert platform.post(f"/api/guardians/{guardian.pk}/devices/", FCM, format="json").status_code == 404
    device = guardian.devices.get()
    assert platform.delete(f"/api/guardians/{guardian.pk}/devices/{device.pk}/").status_code == 404
    assert set(Device.objects.values_list("pk", flat=True)) == before


def test_the_permission_is_what_allows_it_and_preferences_stay_the_persons(team: Team, coach: Any) -> None:
    alice = team.players.get(name="Alice")
    url = f"/api/players/{alice.pk}/devices/"
    refused = api_as(coach).post(url, FCM, format="json")  # the team's coach, without the permission
    assert refused.status_code == 403
    assert "integration caller" in refused.json()["detail"]

    platform = _integration_caller()
    team.coaches.add(platform)
    assert api_as(platform).post(url, FCM, format="json").status_code == 201
    # It acts for the person's devices only: their preferences are theirs to change.
    preferences = {"kinds": [{"kind": "PRE", "muted": True}]}
    answer = api_as(platform).put(f"/api/players/{alice.pk}/preferences/", preferences, format="json")
    assert answer.status_code == 403
