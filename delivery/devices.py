"""A device's state and the writes of a device: registering a token (for a player, a guardian or a coach:
the domain decides who may), forgetting it, and the moves between enabled and disabled. The one module
that writes a device's `disabled_at` and `disabled_reason` (tests/test_status_owners.py), as
trainings/transitions.py is for pushes.

A move is one conditional UPDATE (the `disabled_at` test) that sets only the columns the move owns, so a row
another worker moved meanwhile is left as that worker left it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import models, transaction
from django.db.models import QuerySet
from django.utils import timezone

from delivery.models import Device


class DeviceState(models.TextChoices):
    """A device's state, kept in `disabled_at` (NULL: enabled) with `disabled_reason`."""

    ENABLED = "enabled", "Enabled"
    DISABLED = "disabled", "Disabled (token dead)"


DEVICE_TRANSITIONS: dict[str, frozenset[str]] = {
    # The provider called its token dead.
    DeviceState.ENABLED: frozenset({DeviceState.DISABLED}),
    # The app registered the token again: the provider issued it again.
    DeviceState.DISABLED: frozenset({DeviceState.ENABLED}),
}


def _device_move(rows: QuerySet[Device], *, source: str, to: str, **fields: Any) -> int:
    if to not in DEVICE_TRANSITIONS[source]:
        raise ValueError(f"a device cannot move from {source} to {to}")
    return rows.filter(disabled_at__isnull=source == DeviceState.ENABLED).update(**fields)


def devices_disable(*, device_ids: Sequence[int], reason: str, now: datetime | None = None) -> int:
    """enabled -> disabled: the provider called these tokens dead (kept for the record)."""
    return _device_move(
        Device.objects.filter(pk__in=device_ids),
        source=DeviceState.ENABLED,
        to=DeviceState.DISABLED,
        disabled_at=now or timezone.now(),
        disabled_reason=reason[:200] or "disabled",
    )


def device_enable(*, device: Device) -> bool:
    """disabled -> enabled: the app handed this token in again. Returns whether it was disabled."""
    moved = _device_move(
        Device.objects.filter(pk=device.pk),
        source=DeviceState.DISABLED,
        to=DeviceState.ENABLED,
        disabled_at=None,
        disabled_reason="",
    )
    device.disabled_at, device.disabled_reason = None, ""
    return bool(moved)


def device_register(
    *,
    player: Any = None,  # a trainings Player (delivery knows it by its foreign key only)
    guardian: Any = None,
    coach: Any = None,
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
