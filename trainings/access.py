"""Who may do what in the admin: the coaches' group and its permissions, and the accounts a player's
(or a guardian's) login may be linked to."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db.models import Q, QuerySet

if TYPE_CHECKING:
    from trainings.models import Guardian, Player

COACH_GROUP = "Coaches"
_COACH_PERMISSIONS = {
    "training": ("view", "add", "change", "delete"),
    "invitation": ("view", "add", "change", "delete"),
    "questionnaireanswer": ("view", "add", "change", "delete"),
    "questionnaire": ("view", "add", "change", "delete"),  # their teams' own (the admin's queryset)
    "question": ("view", "add", "change", "delete"),
    "membership": ("view", "add", "change", "delete"),
    "player": ("view", "add", "change"),
    "team": ("view", "change"),
    "reminderrun": ("view",),
    "push": ("view",),
    "guardian": ("view", "add", "change", "delete"),  # the admin: only guardians of their players alone
    "guardianship": ("view", "add", "change", "delete"),
    "coach": ("view", "change"),  # their own profile (the admin's queryset)
    "coachpush": ("view",),
}

# The same for delivery's tables (delivery/models.py): a coach reads their players' devices.
_COACH_DELIVERY_PERMISSIONS = {"device": ("view",)}


def coach_group_ensure() -> Any:
    """Create or repair the admin group for coaches: their teams' trainings, players and answers; no rules.

    What a coach can reach inside those models is limited to their teams by the admin's querysets.
    """
    from django.contrib.auth.models import Group, Permission

    group, _ = Group.objects.get_or_create(name=COACH_GROUP)
    wanted = Q()
    for app_label, permissions in (
        ("trainings", _COACH_PERMISSIONS),
        ("delivery", _COACH_DELIVERY_PERMISSIONS),
    ):
        codenames = [f"{action}_{model}" for model, actions in permissions.items() for action in actions]
        wanted |= Q(content_type__app_label=app_label, codename__in=codenames)
    group.permissions.set(Permission.objects.filter(wanted))
    return group


def users_linkable_to_player(player: Player | None) -> QuerySet[Any]:
    """The accounts a player's `user` may be set to: active, not staff or superuser (coaches and operators
    are staff), coaching no team, and linked to no other player. Linking gives the player's app login
    the player's data, so a coach must never bind a staff account or take another player's (or a
    guardian's: `trainings.admin.guardians` offers these same accounts, unlinked, for a guardian's login)."""
    from django.contrib.auth import get_user_model

    accounts = get_user_model().objects.filter(is_active=True, is_staff=False, is_superuser=False)
    accounts = accounts.filter(coached_teams__isnull=True, guardian__isnull=True)
    free = Q(player__isnull=True)
    if player is not None and player.pk is not None:
        free |= Q(player=player)
    return accounts.filter(free).distinct()


def users_linkable_to_guardian(guardian: Guardian | None) -> QuerySet[Any]:
    """The accounts a guardian's `user` may be set to: the free ones a player's may be, or the guardian's
    own login. One filter over a subquery: the free accounts are a `distinct()` query, which Django cannot
    `|` with another."""
    from django.contrib.auth import get_user_model

    free = users_linkable_to_player(None)
    if guardian is None or guardian.user_id is None:
        return free
    return get_user_model().objects.filter(Q(pk__in=free.values("pk")) | Q(pk=guardian.user_id))


def users_linkable_search(term: str, *, limit: int = 10) -> QuerySet[Any]:
    """Free accounts (see `users_linkable_to_player`) whose username or email is exactly `term`, case
    apart. An exact match only: the field must not let a coach list or guess through the accounts."""
    term = term.strip()
    if len(term) < 3:
        return users_linkable_to_player(None).none()
    matches = Q(username__iexact=term) | Q(email__iexact=term)
    return users_linkable_to_player(None).filter(matches).order_by("username")[:limit]
