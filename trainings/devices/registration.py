"""Devices: registering, removing, and who may see them. Writes are named `device_<action>`.

A player registers their own devices (the app does, after sign-in), or a platform's integration caller
does on their behalf (trainings/devices/views.py). Coaches of the player's teams and
operators read them, with the token shortened: a full token plus provider credentials is all it takes to
push to a phone.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.db import transaction
from django.db.models import Q, QuerySet

from trainings.models import Coach, Device, Guardian, Player
from trainings.selectors import players_visible_to
from trainings.transitions import device_enable


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


def device_register(
    *,
    player: Player | None = None,
    guardian: Guardian | None = None,
    coach: Coach | None = None,
    provider: str,
    platform: str,
    token: str,
    app_id: str = "",
) -> tuple[Device, bool]:
    """Register a token for `player` (or for `guardian`, or `coach`: a device is one person's); returns
    (device, created).

    A token already known (to the provider, tokens are unique) is updated in place: it moves to this person
    (the phone changed hands, or another account signed in on it) and is re-enabled, since a token the app
    hands us again is one the provider has issued again.
    """
    if [player, guardian, coach].count(None) != 2:
        raise ValueError("a device is a player's, a guardian's or a coach's")
    owners = {"player": player, "guardian": guardian, "coach": coach}
    with transaction.atomic():
        device, created = Device.objects.select_for_update().get_or_create(
            provider=provider,
            token=token,
            defaults={**owners, "platform": platform, "app_id": app_id},
        )
        if not created:
            device.player, device.guardian, device.coach = player, guardian, coach
            device.platform = platform
            device.app_id = app_id
            device.full_clean(validate_unique=False)
            device.save(update_fields=["player", "guardian", "coach", "platform", "app_id"])
            device_enable(device=device)
    return device, created


def device_remove(*, device: Device) -> None:
    """Forget a device (the app signed out). Its past sends keep their record without it."""
    device.delete()


def token_preview(token: str) -> str:
    return f"…{token[-6:]}" if len(token) > 6 else "…"
