"""The permissions backend gives Django's ModelBackend's answers, in one query instead of two."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import Group, Permission

from reminders.http.permissions_backend import OneQueryModelBackend
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def _permission(codename: str) -> Permission:
    return Permission.objects.get(content_type__app_label="trainings", codename=codename)


def _fresh(user: Any) -> Any:
    """The user as a request would have it: a new object, nothing cached."""
    return get_user_model().objects.get(pk=user.pk)


def test_it_answers_as_djangos_backend_for_own_group_both_none_inactive_and_superusers() -> None:
    own, grouped, both = _permission("manage_all_teams"), _permission("add_team"), _permission("change_team")
    coaches = Group.objects.create(name="coaches")
    coaches.permissions.add(grouped, both)
    with_own, with_group, with_both, without = (UserFactory() for _ in range(4))
    with_own.user_permissions.add(own)
    with_group.groups.add(coaches)
    with_both.user_permissions.add(own, both)
    with_both.groups.add(coaches, Group.objects.create(name="empty"))
    inactive = UserFactory(is_active=False)
    inactive.user_permissions.add(own)
    superuser = UserFactory(is_superuser=True)

    expected = {
        with_own: {"trainings.manage_all_teams"},
        with_group: {"trainings.add_team", "trainings.change_team"},
        with_both: {"trainings.manage_all_teams", "trainings.add_team", "trainings.change_team"},
        without: set(),
        inactive: set(),
    }
    for user, permissions in expected.items():
        ours = OneQueryModelBackend().get_all_permissions(_fresh(user))
        assert ours == ModelBackend().get_all_permissions(_fresh(user)) == permissions, user
    everything = OneQueryModelBackend().get_all_permissions(_fresh(superuser))
    assert everything == ModelBackend().get_all_permissions(_fresh(superuser))
    assert len(everything) == Permission.objects.count()


def test_a_fresh_user_asks_has_perm_in_one_query_then_none(django_assert_num_queries: Any) -> None:
    user = UserFactory()
    user.user_permissions.add(_permission("manage_all_teams"))
    user.groups.add(Group.objects.create(name="coaches"))
    fresh = _fresh(user)
    with django_assert_num_queries(1):
        assert fresh.has_perm("trainings.manage_all_teams")
    with django_assert_num_queries(0):
        assert not fresh.has_perm("trainings.add_team")
    assert not OneQueryModelBackend().has_perm(fresh, "trainings.manage_all_teams", obj=object())
