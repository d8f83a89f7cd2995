"""The roster's writes (named `<row>_<action>`): teams, players, a team's members, a person's email.

A row created through the API belongs to its caller (`owner`), whose `external_id` keys it. A person's
email address is their email device (provider "email", delivery/channels/email/), the one place the email
channel reads: setting a player's `email` replaces their email devices with that one address.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Count, Model, Q

from trainings.digest.schedule import DIGEST_FIELDS, team_digests_reschedule
from trainings.models import Membership, Player, Team
from trainings.roster.emails import email_set

KEEP: Any = object()  # `email` not given: the person's addresses stay as they are


class ExternalIdTaken(Exception):
    """Another row of the same owner has this external id (a 400 on `external_id`)."""


class HeldByHistory(Exception):
    """A delete refused: rows of history hold the team or player (a 409 naming them)."""

    def __init__(self, what: str, held_by: dict[str, int]) -> None:
        self.held_by = held_by
        named = ", ".join(f"{count} {name}" for name, count in held_by.items())
        super().__init__(f"The {what} has history ({named}); it is kept. Take players off a team instead.")


@dataclass(frozen=True)
class MembersResult:
    active: list[int]
    added: int
    deactivated: int


def _saved(row: Model, *, owner: Any, fields: dict[str, Any], created: bool) -> None:
    """Save `row` with `fields` set (full_clean, its constraints); a taken external id is ExternalIdTaken."""
    for name, value in fields.items():
        setattr(row, name, value)
    if created:
        row.owner = owner  # type: ignore[attr-defined]
    elif fields.get("external_id") is not None and row.owner_id is None:  # type: ignore[attr-defined]
        row.owner = owner  # type: ignore[attr-defined]  # an unowned row keyed: the keys are its caller's
    row.full_clean(exclude=["user", "owner"])
    try:
        with transaction.atomic():
            row.save()
    except IntegrityError as exc:
        if "external_id" in str(exc):
            raise ExternalIdTaken() from None
        raise


def external_id_taken(
    model: type[Model], *, owner: Any, external_id: str | None, exclude: Any = None
) -> bool:
    if external_id is None:
        return False
    rows = model._default_manager.filter(owner=owner, external_id=external_id)
    return bool(rows.exclude(pk=exclude).exists())


def team_save(*, team: Team | None, owner: Any, **fields: Any) -> Team:
    """Create or change a team; a change of its digest times (or zone) reschedules its coaches' digests."""
    with transaction.atomic():
        created = team is None
        team = team or Team()
        before = {name: getattr(team, name) for name in DIGEST_FIELDS}
        if external_id_taken(
            Team,
            owner=team.owner if team.owner_id else owner,
            external_id=fields.get("external_id"),
            exclude=team.pk,
        ):
            raise ExternalIdTaken()
        _saved(team, owner=owner, fields=fields, created=created)
        if not created and any(getattr(team, name) != value for name, value in before.items()):
            team_digests_reschedule(team=team)
    return team


def team_history(team: Team) -> dict[str, int]:
    """What keeps a team: its trainings (their invitations, answers and pushes hang off them)."""
    trainings = team.trainings.count()
    return {"trainings": trainings} if trainings else {}


def team_delete(*, team: Team) -> None:
    """Delete a team with no history (its memberships go with it); one with trainings is refused."""
    with transaction.atomic():
        locked = Team.objects.select_for_update().get(pk=team.pk)
        held = team_history(locked)
        if held:
            raise HeldByHistory("team", held)
        locked.delete()


def player_history(player: Player) -> dict[str, int]:
    """What keeps a player: invitations to trainings, answers and pushes (what the coach's pages and the
    analytics read)."""
    counts = Player.objects.filter(pk=player.pk).aggregate(
        invitations=Count("invitations", distinct=True),
        answers=Count("answers", distinct=True),
        pushes=Count("pushes", distinct=True),
    )
    return {name: count for name, count in counts.items() if count}


def player_delete(*, player: Player) -> None:
    with transaction.atomic():
        locked = Player.objects.select_for_update().get(pk=player.pk)
        held = player_history(locked)
        if held:
            raise HeldByHistory("player", held)
        locked.delete()


def player_save(
    *, player: Player | None, owner: Any, team: Team | None = None, email: Any = KEEP, **fields: Any
) -> Player:
    """Create or change a player. A new one joins `team` (when given), in the team's zone unless
    `time_zone` says otherwise; `email`, when given, becomes their one email address (None: none)."""
    with transaction.atomic():
        created = player is None
        player = player or Player()
        if created and team is not None and "time_zone" not in fields:
            fields["time_zone"] = team.time_zone
        key_owner = player.owner if player.owner_id else owner
        if external_id_taken(
            Player, owner=key_owner, external_id=fields.get("external_id"), exclude=player.pk
        ):
            raise ExternalIdTaken()
        _saved(player, owner=owner, fields=fields, created=created)
        if team is not None:
            Membership.objects.create(team=team, player=player)
        if email is not KEEP:
            email_set(person=player, address=email)
    return player


def members_set(*, team: Team, players: Sequence[Player]) -> MembersResult:
    """Make `players` the team's active members: new ones join, former ones are active again, those not
    listed become inactive (their membership and history stay). The team's row is locked: two calls at once
    apply one after the other."""
    wanted = {player.pk for player in players}
    with transaction.atomic():
        Team.objects.select_for_update().get(pk=team.pk)
        rows = dict(Membership.objects.filter(team=team).values_list("player_id", "active"))
        new = [pk for pk in wanted if pk not in rows]
        back = [pk for pk in wanted if rows.get(pk) is False]
        gone = [pk for pk, active in rows.items() if active and pk not in wanted]
        Membership.objects.bulk_create([Membership(team=team, player_id=pk) for pk in sorted(new)])
        if back:
            Membership.objects.filter(team=team, player_id__in=back).update(active=True)
        if gone:
            Membership.objects.filter(team=team, player_id__in=gone).update(active=False)
    return MembersResult(active=sorted(wanted), added=len(new) + len(back), deactivated=len(gone))


def active_members(team: Team) -> list[int]:
    return sorted(Membership.objects.filter(team=team, active=True).values_list("player_id", flat=True))


def external_filter(queryset: Any, external_id: str | None) -> Any:
    """`?external_id=`: the rows with it (a caller's own id is one row; an operator may see several
    callers' rows with the same id). A NUL is refused: PostgreSQL text cannot hold it."""
    if external_id is None:
        return queryset
    if "\x00" in external_id:
        from rest_framework.exceptions import ValidationError

        raise ValidationError({"external_id": ["must not contain the NUL character."]})
    return queryset.filter(Q(external_id=external_id))
