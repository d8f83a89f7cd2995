"""Django's ModelBackend, reading a user's permissions in one statement instead of two ORM queries.

Every API request by a coach asks `has_perm` once (trainings/selectors.py: may they see every team?), on
a user object fresh from the token, so the backend's per-object cache never helps: Django's backend then
builds two queries through the user's related managers, reading their own permissions and their groups'
apart. This one runs one statement (reminders/queries.py). Answers, caches (`_perm_cache`) and
the inactive, anonymous, superuser and per-object rules are Django's.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import Permission
from django.db import connection

from reminders.queries import USER_PERMISSIONS


class OneQueryModelBackend(ModelBackend):
    def get_all_permissions(self, user_obj: Any, obj: Any = None) -> set[str]:
        if not user_obj.is_active or user_obj.is_anonymous or obj is not None:
            return set()
        if not hasattr(user_obj, "_perm_cache"):
            user_obj._perm_cache = _permissions_of(user_obj)
        cached: set[str] = user_obj._perm_cache
        return cached


def _permissions_of(user: Any) -> set[str]:
    """`app_label.codename` of every permission the user holds, their own and their groups'."""
    if user.is_superuser:
        rows: Any = Permission.objects.values_list("content_type__app_label", "codename").order_by()
    else:
        with connection.cursor() as cursor:
            cursor.execute(USER_PERMISSIONS, {"user": user.pk})
            rows = cursor.fetchall()
    return {f"{app_label}.{codename}" for app_label, codename in rows}
