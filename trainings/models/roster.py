"""Who a club has: teams, players and the memberships that join them (a roster).

Guardians and coaches hang off these (guardians.py, coaches.py); the platform's API keeps them in step
with the club's own records.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy
from django.utils.translation import gettext_lazy as _

from common.i18n import validate_spoken_language
from trainings.models.coaches import DigestTimes
from trainings.models.external import external_id_field, external_id_unique, owner_field
from trainings.models.guardians import Reminds
from trainings.models.quiet_hours import QUIET_END_DEFAULT, QUIET_START_DEFAULT, quiet_hours_both_or_none
from trainings.planning.offsets import validate_time_zone

_QUIET_END_HELP = _("...until (local time), then held pushes go. Exception: news of a move to before then.")


class Team(DigestTimes, models.Model):
    name = models.CharField(max_length=200, verbose_name=_("name"))
    time_zone = models.CharField(
        max_length=64, default="UTC", validators=[validate_time_zone], verbose_name=_("time zone")
    )
    coaches = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="coached_teams", verbose_name=_("coaches")
    )
    created_at = models.DateTimeField(auto_now_add=True, verbose_name=_("created at"))
    owner = owner_field("teams")
    external_id = external_id_field()
    # Quiet hours, wall-clock time in each player's zone (trainings/quiet.py); new teams: 22:00-07:00.
    quiet_start = models.TimeField(
        null=True,
        blank=True,
        default=QUIET_START_DEFAULT,
        help_text=_("Players get no push from (local time)..."),
        verbose_name=_("quiet start"),
    )
    quiet_end = models.TimeField(
        null=True,
        blank=True,
        default=QUIET_END_DEFAULT,
        help_text=_QUIET_END_HELP,
        verbose_name=_("quiet end"),
    )
    reminds = models.CharField(
        max_length=10,
        choices=Reminds.choices,
        default=Reminds.PLAYER,
        db_default=Reminds.PLAYER,
        help_text=_("Who a player's reminders go to: youth teams remind the player and their guardians."),
        verbose_name=_("reminds"),
    )

    class Meta:
        verbose_name = gettext_lazy("team")
        verbose_name_plural = gettext_lazy("teams")
        permissions = [
            ("manage_all_teams", "Can see and change every team's trainings (operators)"),
            ("use_integration_api", "Can use the platform integration API (roster, devices, webhooks)"),
        ]
        constraints = [
            quiet_hours_both_or_none("team"),
            models.CheckConstraint(condition=Q(reminds__in=Reminds.values), name="team_reminds_valid"),
            external_id_unique("team"),
        ]

    def __str__(self) -> str:
        return self.name


class Player(models.Model):
    name = models.CharField(max_length=200, verbose_name=_("name"))
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="player",
        verbose_name=_("user"),
    )
    time_zone = models.CharField(
        max_length=64, default="UTC", validators=[validate_time_zone], verbose_name=_("time zone")
    )
    language = models.CharField(
        max_length=10,
        default="en",
        validators=[validate_spoken_language],
        help_text=_("Language of the player's pushes."),
        verbose_name=_("language"),
    )
    teams = models.ManyToManyField(
        Team, through="Membership", related_name="players", verbose_name=_("teams")
    )
    quiet_start = models.TimeField(
        null=True,
        blank=True,
        help_text=_("The player's own quiet hours (else the team's)."),
        verbose_name=_("quiet start"),
    )
    quiet_end = models.TimeField(null=True, blank=True, verbose_name=_("quiet end"))
    owner = owner_field("players")
    external_id = external_id_field()

    class Meta:
        verbose_name = gettext_lazy("player")
        verbose_name_plural = gettext_lazy("players")
        constraints = [quiet_hours_both_or_none("player"), external_id_unique("player")]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    team = models.ForeignKey(
        Team, on_delete=models.CASCADE, related_name="memberships", verbose_name=_("team")
    )
    player = models.ForeignKey(
        Player, on_delete=models.CASCADE, related_name="memberships", verbose_name=_("player")
    )
    active = models.BooleanField(default=True, verbose_name=_("active"))
    joined_at = models.DateTimeField(auto_now_add=True, verbose_name=_("joined at"))

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "player"], name="membership_unique")]

    def __str__(self) -> str:
        return f"{self.player} in {self.team}"
