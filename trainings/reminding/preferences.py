"""Players' (and guardians') own choices per reminder kind (ReminderPreference): which channels, or muted.
Writes are named `preference_<action>`; the gateway and the fire path read them."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Q

from common.lookups import AnyOf
from trainings.models import ChannelChoice, Coach, Guardian, Player, ReminderPreference, ReminderRule
from trainings.planning.kinds import rule_choices
from trainings.reminding.critical import CriticalOffsets

# The push gateway asks for a round of players at once: one array parameter, not an IN list.
ReminderPreference._meta.get_field("player").register_lookup(AnyOf)


def preference_set(
    *,
    kind: str,
    player_id: int | None = None,
    guardian_id: int | None = None,
    channels: str | None = None,
    muted: bool | None = None,
) -> ReminderPreference | None:
    """Set what is given of a player's (or, with `guardian_id`, a guardian's) preference for `kind` (the
    rest stays); None when that person is gone.

    One statement either way (an upsert), so a one-click unsubscribe repeated by a mail client is harmless."""
    codes = [code for code, _ in rule_choices()]
    if kind not in codes:
        raise ValueError(f"kind: one of {codes}")
    if channels is not None and channels not in ChannelChoice.values:
        raise ValueError(f"channels: one of {ChannelChoice.values}")
    if (player_id is None) == (guardian_id is None):
        raise ValueError("one of player_id and guardian_id")
    owner: dict[str, Any] = {"player_id": player_id} if guardian_id is None else {"guardian_id": guardian_id}
    if guardian_id is not None:
        exists = Guardian.objects.filter(pk=guardian_id).exists()
    else:
        exists = Player.objects.filter(pk=player_id or 0).exists()
    if not exists:
        return None
    values: dict[str, Any] = {}
    if channels is not None:
        values["channels"] = channels
    if muted is not None:
        values["muted"] = muted
    preference, _ = ReminderPreference.objects.update_or_create(**owner, kind=kind, defaults=values)
    return preference


def preferences_read(*, person: Player | Guardian) -> dict[str, Any]:
    """Every kind's preference (the default where the person set none) and their own quiet hours."""
    stored = {p.kind: p for p in person.preferences.all()}
    kinds = [
        {"kind": kind, "channels": stored[kind].channels if kind in stored else ChannelChoice.DEFAULT,
         "muted": stored[kind].muted if kind in stored else False}
        for kind in [code for code, _ in rule_choices()]
    ]  # fmt: skip
    return {"kinds": kinds, "quiet_start": person.quiet_start, "quiet_end": person.quiet_end}


def preferences_update(
    *, person: Player | Guardian, kinds: list[dict[str, Any]] | None = None, **quiet: Any
) -> None:
    """Change the given kinds' preferences and, when given, the person's own quiet hours (both or none)."""
    owner = {"guardian_id": person.pk} if isinstance(person, Guardian) else {"player_id": person.pk}
    with transaction.atomic():
        for item in kinds or []:
            preference_set(**owner, kind=item["kind"], channels=item.get("channels"),
                           muted=item.get("muted"))  # fmt: skip
        if "quiet_start" in quiet:
            person.quiet_start, person.quiet_end = quiet["quiet_start"], quiet["quiet_end"]
            person.save(update_fields=["quiet_start", "quiet_end"])


def rules_critical(slugs: set[str]) -> dict[str, CriticalOffsets]:
    """The critical offsets (trainings/reminding/critical.py) of the rules among `slugs` that have some: mute
    and quiet hours do not hide those reminders."""
    rows = ReminderRule.objects.filter(slug__in=slugs).exclude(critical_offsets=[])
    return dict(rows.values_list("slug", "critical_offsets"))


# A push's recipient (player, guardian, coach; delivery/messages.py) and kind.
_Asked = tuple[int | None, int | None, int | None, str]


def preferences_of(asked: set[_Asked]) -> dict[_Asked, tuple[str, bool]]:
    """(channels, muted) per (player id, guardian id, coach id, kind) that has a choice: the player's own
    preference for a push to the player, the guardian's for one to a guardian (one query for a round of
    pushes), and a coach's channels for their digests (one more, when the round has one)."""
    if not asked:
        return {}
    players = {player for player, guardian, coach, _ in asked if guardian is None and coach is None}
    guardians = {guardian for _, guardian, _, _ in asked if guardian is not None}
    coaches = {coach for _, _, coach, _ in asked if coach is not None}
    kinds = {kind for *_, kind in asked}
    found: dict[_Asked, tuple[str, bool]] = {}
    if coaches:
        chosen = dict(Coach.objects.filter(pk__in=coaches).values_list("pk", "channels"))
        found.update(
            (key, (chosen[key[2]], False)) for key in asked if key[2] is not None and key[2] in chosen
        )
    if not players and not guardians:
        return found
    rows = ReminderPreference.objects.filter(
        Q(player_id__any=players) | Q(guardian_id__in=guardians), kind__in=kinds
    ).values_list("player_id", "guardian_id", "kind", "channels", "muted")
    wards: dict[int, set[int | None]] = {}  # a guardian's pushes of this round, by player
    for player, guardian, _, _ in asked:
        if guardian is not None:
            wards.setdefault(guardian, set()).add(player)
    for player_id, guardian_id, kind, channels, muted in rows:
        keys: list[_Asked] = (
            [(player_id, None, None, kind)]
            if guardian_id is None
            else [(p, guardian_id, None, kind) for p in wards[guardian_id]]
        )
        found.update((key, (channels, muted)) for key in keys if key in asked)
    return found
