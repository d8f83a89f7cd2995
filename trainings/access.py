"""Who may do what in the admin: the coaches' group and its permissions."""

from __future__ import annotations

from typing import Any

COACH_GROUP = "Coaches"
_COACH_PERMISSIONS = {
    "training": ("view", "add", "change", "delete"),
    "invitation": ("view", "add", "change", "delete"),
    "questionnaireanswer": ("view", "add", "change", "delete"),
    "membership": ("view", "add", "change", "delete"),
    "player": ("view", "add", "change"),
    "team": ("view", "change"),
    "reminderrun": ("view",),
    "push": ("view",),
    "device": ("view",),
}


def coach_group_ensure() -> Any:
    """Create or repair the admin group for coaches: their teams' trainings, players and answers; no rules.

    What a coach can reach inside those models is limited to their teams by the admin's querysets.
    """
    from django.contrib.auth.models import Group, Permission

    group, _ = Group.objects.get_or_create(name=COACH_GROUP)
    codenames = [f"{action}_{model}" for model, actions in _COACH_PERMISSIONS.items() for action in actions]
    group.permissions.set(
        Permission.objects.filter(content_type__app_label="trainings", codename__in=codenames)
    )
    return group
