"""A coach's profile made on demand, so a coach switches the digest on alone: the digest's recipients are
the team's coaches (active accounts), and a coach who has no profile yet gets one when it is needed (the
digest fires, the team's digest times are saved, the coach opens their profile), with the team's zone
and, as its address, the account's email if it has one and no other person holds that address already.

And whether a team's settings reach anybody: the team page warns when the coaches' messages are on and no
coach has a device or an email, or when no player (nor a guardian) has one.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.utils.translation import gettext

from delivery.models import Device
from trainings.models import Coach, Team

EMAIL = "email"  # the email channel's provider and platform (delivery/channels/registry.py)
# The team's settings that send the coaches something (trainings/models/coaches.py, `DigestTimes`).
COACH_SETTINGS = ("digest_before", "digest_morning_at", "decline_alert_within")


def _email_of(user: Any) -> str | None:
    address = (getattr(user, "email", "") or "").strip()
    try:
        validate_email(address)
    except ValidationError:
        return None
    return address


def coach_profile_ensure(user: Any, *, time_zone: str) -> Coach:
    """The user's coach profile, made now if there is none: `time_zone` (their team's), the default
    language, and the account's email as its address (when valid and nobody's address yet)."""
    coach = Coach.objects.filter(user=user.pk).first()
    if coach is not None:
        return coach
    with transaction.atomic():
        coach, made = Coach.objects.get_or_create(user_id=user.pk, defaults={"time_zone": time_zone})
        address = _email_of(user) if made else None
        if address and not Device.objects.filter(provider=EMAIL, token=address).exists():
            try:
                with transaction.atomic():  # another owner taking the address meanwhile: no address
                    Device.objects.create(coach=coach, provider=EMAIL, platform=EMAIL, token=address)
            except IntegrityError:
                pass
    return coach


def team_coaches(team_ids: set[Any]) -> dict[Any, list[Coach]]:
    """Each team's coaches with an active account, by team, each with their profile (made for those who
    had none: `coach_profile_ensure`). Queries: two, plus a few per profile made."""
    pairs = sorted(
        Team.coaches.through.objects.filter(team_id__in=team_ids, user__is_active=True).values_list(
            "team_id", "user_id", "team__time_zone"
        )
    )
    profiles = {c.user_id: c for c in Coach.objects.filter(user_id__in={u for _, u, _ in pairs})}
    users = get_user_model().objects.in_bulk({u for _, u, _ in pairs if u not in profiles})
    found: dict[Any, list[Coach]] = {team_id: [] for team_id in team_ids}
    for team_id, user_id, time_zone in pairs:
        if user_id not in profiles:
            profiles[user_id] = coach_profile_ensure(users[user_id], time_zone=time_zone)
        found[team_id].append(profiles[user_id])
    for coaches in found.values():
        coaches.sort(key=lambda coach: coach.pk)
    return found


def team_unreached(team: Team) -> list[str]:
    """What of the team's settings reaches nobody now, in words (empty: all of them reach someone)."""
    warnings = []
    said = [str(getattr(team._meta.get_field(name), "verbose_name", name)) for name in COACH_SETTINGS
            if getattr(team, name)]  # fmt: skip
    if said:
        users = team.coaches.filter(is_active=True)
        reached = Device.objects.enabled().filter(coach__user__in=users).exists() or any(
            _email_of(user) and not Coach.objects.filter(user=user).exists() for user in users
        )
        if not reached:
            warnings.append(
                gettext(
                    "The coaches' messages (%(settings)s) reach nobody: no coach of this team has a device "
                    "or an email address. Give yours on your coach profile (Coaches: Email for your digests)."
                )
                % {"settings": ", ".join(said)}
            )
    members = team.memberships.filter(active=True)
    if members.exists():
        players = members.values("player_id")
        reached = (
            Device.objects.enabled().filter(player_id__in=players).exists()
            or Device.objects.enabled().filter(guardian__guardianships__player_id__in=players).exists()
        )
        if not reached:
            warnings.append(
                gettext(
                    "Reminders reach no player: none of the team's players (nor a guardian) has a device "
                    "or an email address."
                )
            )
    return warnings
