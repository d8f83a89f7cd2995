"""Devices: registering, removing, and who may see them. Writes are named `device_<action>`.

A player registers their own devices (the app does, after sign-in), or a platform's integration caller
does on their behalf (trainings/devices/views.py). Coaches of the player's teams and
operators read them, with the token shortened: a full token plus provider credentials is all it takes to
push to a phone.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.db.models import Q, QuerySet

from trainings.models import Guardian, Player
from trainings.selectors import players_visible_to


def player_of(user: Any) -> Player | None:
    """The player a signed-in user is, if any."""
    if not getattr(user, "is_authenticated", False):
        return None
    try:
        return user.player
    except ObjectDoesNotExist:
        return None


def guardian_of(user: Any) -> Guardian | None:
    """The guardian a signed-in user is, if any."""
    if not getattr(user, "is_authenticated", False):
        return None
    try:
        return user.guardian
    except ObjectDoesNotExist:
        return None


def device_players_visible_to(user: Any) -> QuerySet[Player]:
    """Whose devices a user may list: their own, their teams' players, everyone for operators."""
    own = player_of(user)
    visible = players_visible_to(user)
    if own is None:
        return visible
    return Player.objects.filter(Q(pk=own.pk) | Q(pk__in=visible.values("pk")))
