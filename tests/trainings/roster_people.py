"""The callers of the roster tests: integration service accounts, an operator, a coach."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Permission

from tests.factories import UserFactory
from trainings.access import coach_group_ensure


def integration_caller(username: str = "platform") -> Any:
    """A platform's service account: `trainings.use_integration_api`, no team, not staff."""
    user = UserFactory(username=username)
    user.user_permissions.add(Permission.objects.get(codename="use_integration_api"))
    return user


def operator(username: str = "operator") -> Any:
    user = UserFactory(username=username, is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="manage_all_teams"))
    return user


def coach(username: str = "coach") -> Any:
    user = UserFactory(username=username, is_staff=True)
    user.groups.add(coach_group_ensure())
    return user
