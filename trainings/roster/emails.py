"""A person's email address: their email device (provider "email", delivery/channels/email/), the one place
the email channel reads. Setting a player's (a guardian's) `email` replaces their email devices with that
one address; an address already another person's moves only when the caller manages that person (device
tokens are unique: taking it moves their reminders)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Q

from delivery.api import device_register
from delivery.models import Device
from trainings.models import Guardian, Player
from trainings.selectors import guardians_visible_to, players_visible_to

EMAIL = "email"
BATCH = 2_000
Holder = tuple[str, int]  # whose a device is: ("player_id", id) or ("guardian_id", id)


def emails_of(people: Iterable[Player | Guardian]) -> dict[int, str]:
    """Each person's email address (their oldest email device), by id: one query for the lot."""
    people = list(people)
    if not people:
        return {}
    column = "player_id" if isinstance(people[0], Player) else "guardian_id"
    rows = (
        Device.objects.filter(provider=EMAIL, **{f"{column}__in": [p.pk for p in people]})
        .order_by("-created_at", "-id")
        .values_list(column, "token")
    )
    return dict(rows)  # the oldest last: it wins


def email_set(*, person: Player | Guardian, address: str | None) -> None:
    """Make `address` the person's only email device (kept as is when it already is one of theirs)."""
    owner = {"player": person} if isinstance(person, Player) else {"guardian": person}
    mine = Device.objects.filter(provider=EMAIL, **owner)
    if address is None:
        mine.delete()
        return
    mine.exclude(token=address).delete()
    if not mine.filter(token=address).exists():
        device_register(**owner, provider=EMAIL, platform=EMAIL, token=address)


def email_held_elsewhere(*, address: str, person: Player | Guardian | None, visible: Any) -> bool:
    """The address is another person's email device, someone the caller does not manage: taking it would
    move their reminders to this person (device tokens are unique), so it is refused."""
    device = Device.objects.filter(provider=EMAIL, token=address).first()
    if device is None:
        return False
    if isinstance(person, Player) and device.player_id == person.pk:
        return False
    if isinstance(person, Guardian) and device.guardian_id == person.pk:
        return False
    return device.player_id is None or not visible.filter(pk=device.player_id).exists()


def emails_sync(
    *, owner: Any, wanted: dict[Holder, tuple[str | None, str]], synced: set[Holder]
) -> tuple[set[Holder], dict[str, list[str]]]:
    """The bulk sync's addresses: each person of `wanted` ((column, id) -> (address or None, the row's
    path)) gets exactly that email device; a device moves from another person the caller manages (`synced`
    are theirs without asking); one held by someone outside the caller's roster is an error on the row
    (nothing written). Returns the people whose addresses changed, and the errors by path."""
    tokens = {address for address, _ in wanted.values() if address is not None}
    players = [pk for column, pk in wanted if column == "player_id"]
    guardians = [pk for column, pk in wanted if column == "guardian_id"]
    # Three reads of bare values, each on its own index (one OR of the three lists scanned far more).
    found: dict[int, tuple[str, Holder | None]] = {}
    for where in (Q(token__in=tokens), Q(player_id__in=players), Q(guardian_id__in=guardians)):
        read = Device.objects.filter(where, provider=EMAIL).values_list(
            "pk", "token", "player_id", "guardian_id"
        )
        for device_pk, token, player, guardian in read:
            found[device_pk] = (token, _holder(player, guardian))
    old = {device_pk: whose for device_pk, (_, whose) in found.items()}
    holder = dict(old)
    by_token = {token: device_pk for device_pk, (token, _) in found.items()}
    outsiders = _outside_holders(owner, {old[d] for d in by_token.values() if old[d] not in synced})
    errors: dict[str, list[str]] = {}
    moved: list[Device] = []
    new: list[Device] = []
    for (column, pk), (address, path) in wanted.items():
        if address is None:
            continue
        device = by_token.get(address)
        if device is None:
            new.append(Device(provider=EMAIL, platform=EMAIL, token=address, **{column: pk}))
        elif holder[device] != (column, pk):
            if old[device] in outsiders:
                errors[f"{path}.email"] = ["the address of someone outside your roster."]
                continue
            holder[device] = (column, pk)
            moved.append(Device(pk=device, player_id=pk if column == "player_id" else None,
                                guardian_id=pk if column == "guardian_id" else None, coach_id=None,
                                disabled_at=None, disabled_reason=""))  # fmt: skip
    if errors:
        return set(), errors
    gone = [pk for pk, (token, _) in found.items() if (h := holder[pk]) in wanted and wanted[h][0] != token]
    if gone:
        Device.objects.filter(pk__in=gone).delete()
    if moved:
        Device.objects.bulk_update(moved, ["player", "guardian", "coach", "disabled_at", "disabled_reason"])
    Device.objects.bulk_create(new, batch_size=BATCH)
    touched = {holder[d.pk] for d in moved} | {old[d.pk] for d in moved} | {old[pk] for pk in gone}
    touched |= {_holder(d.player_id, d.guardian_id) for d in new}
    return {h for h in touched if h is not None}, {}


def _holder(player: int | None, guardian: int | None) -> Holder | None:
    """Whose a device is, as (column, id); None for a coach's."""
    if player is not None:
        return ("player_id", player)
    if guardian is not None:
        return ("guardian_id", guardian)
    return None


def _outside_holders(owner: Any, holders: set[Holder | None]) -> set[Holder | None]:
    """Of these people holding addresses, those the caller does not manage (a coach's: None, never theirs).
    The people this sync names are the caller's and are not asked about."""
    players = {pk for h in holders if h and h[0] == "player_id" for pk in [h[1]]}
    guardians = {pk for h in holders if h and h[0] == "guardian_id" for pk in [h[1]]}
    mine: set[Holder | None] = set()
    if players:
        mine |= {
            ("player_id", pk)
            for pk in players_visible_to(owner).filter(pk__in=players).values_list("pk", flat=True)
        }
    if guardians:
        seen = guardians_visible_to(owner).filter(pk__in=guardians).values_list("pk", flat=True)
        mine |= {("guardian_id", pk) for pk in seen}
    return holders - mine
