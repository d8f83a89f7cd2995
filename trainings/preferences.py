"""Players' own choices per reminder kind (ReminderPreference): which channels, or muted. Writes are named
`preference_<action>`; the gateway and the fire path read them."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from trainings.kinds import rule_choices
from trainings.models import ChannelChoice, Player, ReminderPreference, ReminderRule


def preference_set(
    *, player_id: int, kind: str, channels: str | None = None, muted: bool | None = None
) -> ReminderPreference | None:
    """Set what is given of a player's preference for `kind` (the rest stays); None when the player is gone.

    One statement either way (an upsert), so a one-click unsubscribe repeated by a mail client is harmless."""
    codes = [code for code, _ in rule_choices()]
    if kind not in codes:
        raise ValueError(f"kind: one of {codes}")
    if channels is not None and channels not in ChannelChoice.values:
        raise ValueError(f"channels: one of {ChannelChoice.values}")
    if not Player.objects.filter(pk=player_id).exists():
        return None
    values: dict[str, Any] = {}
    if channels is not None:
        values["channels"] = channels
    if muted is not None:
        values["muted"] = muted
    preference, _ = ReminderPreference.objects.update_or_create(
        player_id=player_id, kind=kind, defaults=values
    )
    return preference


def preferences_read(*, player: Player) -> dict[str, Any]:
    """Every kind's preference (the default where the player set none) and the player's quiet hours."""
    stored = {p.kind: p for p in player.preferences.all()}
    kinds = [
        {"kind": kind, "channels": stored[kind].channels if kind in stored else ChannelChoice.DEFAULT,
         "muted": stored[kind].muted if kind in stored else False}
        for kind in [code for code, _ in rule_choices()]
    ]  # fmt: skip
    return {"kinds": kinds, "quiet_start": player.quiet_start, "quiet_end": player.quiet_end}


def preferences_update(*, player: Player, kinds: list[dict[str, Any]] | None = None, **quiet: Any) -> None:
    """Change the given kinds' preferences and, when given, the player's own quiet hours (both or none)."""
    with transaction.atomic():
        for item in kinds or []:
            preference_set(player_id=player.pk, kind=item["kind"], channels=item.get("channels"),
                           muted=item.get("muted"))  # fmt: skip
        if "quiet_start" in quiet:
            player.quiet_start, player.quiet_end = quiet["quiet_start"], quiet["quiet_end"]
            player.save(update_fields=["quiet_start", "quiet_end"])


def rules_critical(slugs: set[str]) -> set[str]:
    """The rules among `slugs` an operator marked critical: mute and quiet hours do not hide them."""
    return set(ReminderRule.objects.filter(slug__in=slugs, critical=True).values_list("slug", flat=True))


def preferences_of(pairs: set[tuple[int, str]]) -> dict[tuple[int, str], tuple[str, bool]]:
    """(channels, muted) per (player id, kind) that has a row: one query for a round of pushes."""
    if not pairs:
        return {}
    players = {player for player, _ in pairs}
    kinds = {kind for _, kind in pairs}
    rows = ReminderPreference.objects.filter(player_id__in=players, kind__in=kinds).values_list(
        "player_id", "kind", "channels", "muted"
    )
    return {(p, k): (c, m) for p, k, c, m in rows if (p, k) in pairs}
