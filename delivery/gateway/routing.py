"""Which of a person's addresses a push goes to now, and which wait as a fallback.

A fallback channel (email, delivery/channels/registry.py) is for when no other address reached the person: by
default a push goes to their enabled devices of the other channels, and to the fallback addresses when
they have none, or when every one of them has answered and none accepted it (failed, dead). The person's
preference for the push's kind may say otherwise: `push` (never the fallback), `email` (the fallback
only), `both`. The gateway stays channel-independent: it asks this module, and a push whose devices all
failed while a fallback waits is retried at once, its next round sending the fallback.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from common.lookups import AnyOf
from delivery.channels.registry import fallback_channel_names
from delivery.messages import PushMessage, Recipient, Target
from delivery.models import Device

Device._meta.get_field("player").register_lookup(AnyOf)  # a round's players as one array parameter

_FALLBACK = fallback_channel_names()
ACCEPTED = "accepted"


def route(
    devices: Sequence[Target], *, done: Mapping[int | None, str], channels: str = "default"
) -> tuple[list[Target], list[Target]]:
    """(addresses to send to in this round, fallback addresses if every one of them fails).

    `devices`: the person's enabled addresses; `done`: the push's recorded sends (device id -> status)."""
    primary = [d for d in devices if d.provider not in _FALLBACK]
    fallback = [d for d in devices if d.provider in _FALLBACK]
    reached = ACCEPTED in done.values()
    spare: list[Target] = []
    if channels == "email":
        chosen = fallback
    elif channels == "push":
        chosen = primary
    elif channels == "both":
        chosen = primary + fallback
    elif reached or any(d.device_id not in done for d in primary):
        chosen, spare = primary, ([] if reached else fallback)
    else:  # no other address, or every one answered without accepting: the fallback now
        chosen = primary + fallback
    return [d for d in chosen if d.device_id not in done], [d for d in spare if d.device_id not in done]


def addresses_of(pushes: Sequence[PushMessage]) -> dict[Recipient, list[Target]]:
    """The enabled addresses (devices, email) of each push's recipient, by (player, guardian, coach): the
    player's own for a push to the player, the guardian's for one to a guardian, the coach's for a coach's
    digest. One query for each kind of owner, on the enabled-owner indexes."""
    players = {p.player for p in pushes if p.player is not None and p.guardian is None and p.coach is None}
    coaches = {p.coach for p in pushes if p.coach is not None}
    wards: dict[int, set[int | None]] = {}
    for p in pushes:
        if p.guardian is not None:
            wards.setdefault(p.guardian, set()).add(p.player)
    devices: dict[Recipient, list[Target]] = {}
    columns = ("pk", "provider", "platform", "token", "app_id")
    if players:  # tuples, not model instances: a round reads hundreds
        enabled = Device.objects.enabled().filter(player_id__any=players).order_by("pk")
        for player_id, pk, service, platform, token, app_id in enabled.values_list("player_id", *columns):
            devices.setdefault((player_id, None, None), []).append(
                Target(pk, service, platform, token, app_id)
            )
    if wards:
        enabled = Device.objects.enabled().filter(guardian_id__in=wards).order_by("pk")
        for guardian_id, pk, service, platform, token, app_id in enabled.values_list("guardian_id", *columns):
            for player_id in sorted(wards[guardian_id], key=lambda p: p or 0):
                devices.setdefault((player_id, guardian_id, None), []).append(
                    Target(pk, service, platform, token, app_id)
                )
    if coaches:
        enabled = Device.objects.enabled().filter(coach_id__in=coaches).order_by("pk")
        for coach_id, pk, service, platform, token, app_id in enabled.values_list("coach_id", *columns):
            devices.setdefault((None, None, coach_id), []).append(
                Target(pk, service, platform, token, app_id)
            )
    return devices
