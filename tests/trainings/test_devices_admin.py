"""The Device admin shows each device's state; a coach sees only their teams' players' devices."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from tests.factories import DeviceFactory, UserFactory
from trainings.access import coach_group_ensure

pytestmark = pytest.mark.django_db


def test_the_admin_lists_devices_with_their_state_and_reason(team: Any, coach: Any) -> None:
    coach.is_staff = True
    coach.save()
    coach.groups.add(coach_group_ensure())
    alice = team.players.get(name="Alice")
    DeviceFactory(player=alice, provider="apns", platform="ios", token="ab" * 32, disabled_at=timezone.now(),
                  disabled_reason="APNs 410 Unregistered")  # fmt: skip
    DeviceFactory(token="someone-elses")
    client = Client()
    client.force_login(coach)
    page = client.get("/admin/delivery/device/").content.decode()
    assert "APNs 410 Unregistered" in page and "enabled" in page
    assert "…-alice" in page and "…ababab" in page
    assert "…-elses" not in page  # not one of the coach's players
    disabled = client.get("/admin/delivery/device/?state=disabled").content.decode()
    assert "…ababab" in disabled and "…-alice" not in disabled


def test_the_admin_is_read_only(team: Any) -> None:
    root = UserFactory(username="root", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(root)
    assert client.get("/admin/delivery/device/add/").status_code == 403
