"""Guardians: the parents or carers of (youth) players, reminded for them and answering for them (models of
the trainings app, re-exported by trainings.models).

A guardian is a person of their own: a login for the app, devices and an email address (`Device` rows
owned by the guardian), a language, a zone and quiet hours. `Guardianship` says whose guardian they are and
what they are to the player ("mother"): the coach's page reads "answered by Anna's mother". A team's
`reminds` says who a pending player's reminders go to (trainings/reminding/recipients.py).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy
from django.utils.translation import gettext_lazy as _

from common.i18n import validate_spoken_language
from trainings.models.external import external_id_field, external_id_unique, owner_field
from trainings.models.quiet_hours import quiet_hours_both_or_none
from trainings.planning.offsets import validate_time_zone


class Reminds(models.TextChoices):
    """Who a team's reminders go to for a player who still owes an answer."""

    PLAYER = "player", _("The player")
    GUARDIANS = "guardians", _("The player's guardians")
    BOTH = "both", _("The player and their guardians (youth teams)")


class Guardian(models.Model):
    """A parent or carer: reminded for their players (when their team says so), and may answer for them."""

    name = models.CharField(max_length=200, verbose_name=_("name"))
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="guardian",
        help_text=_("The guardian's own login (for the app)."),
        verbose_name=_("user"),
    )
    time_zone = models.CharField(
        max_length=64, default="UTC", validators=[validate_time_zone], verbose_name=_("time zone")
    )
    language = models.CharField(
        max_length=10,
        default="en",
        validators=[validate_spoken_language],
        help_text=_("Language of the guardian's pushes."),
        verbose_name=_("language"),
    )
    quiet_start = models.TimeField(
        null=True,
        blank=True,
        help_text=_("The guardian's own quiet hours (else the player's team's)."),
        verbose_name=_("quiet start"),
    )
    quiet_end = models.TimeField(null=True, blank=True, verbose_name=_("quiet end"))
    players = models.ManyToManyField(
        "trainings.Player", through="Guardianship", related_name="guardians", verbose_name=_("players")
    )
    created_at = models.DateTimeField(auto_now_add=True, verbose_name=_("created at"))
    owner = owner_field("guardians")
    external_id = external_id_field()

    class Meta:
        verbose_name = gettext_lazy("guardian")
        verbose_name_plural = gettext_lazy("guardians")
        constraints = [quiet_hours_both_or_none("guardian"), external_id_unique("guardian")]

    def __str__(self) -> str:
        return self.name


class Guardianship(models.Model):
    """One guardian of one player, and what they are to the player ("mother", "father", "carer")."""

    guardian = models.ForeignKey(
        Guardian, on_delete=models.CASCADE, related_name="guardianships", verbose_name=_("guardian")
    )
    player = models.ForeignKey(
        "trainings.Player", on_delete=models.CASCADE, related_name="guardianships", verbose_name=_("player")
    )
    relation = models.CharField(
        max_length=50,
        blank=True,
        help_text=_('What they are to the player: "mother".'),
        verbose_name=_("relation"),
    )
    created_at = models.DateTimeField(auto_now_add=True, verbose_name=_("created at"))

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["player", "guardian"], name="guardianship_unique"),
        ]
        # The recipients' expansion: player_id IN (...) (the unique index leads with player).

    def __str__(self) -> str:
        return f"{self.guardian} ({self.relation or 'guardian'} of {self.player})"

    def answered_by(self, player_name: str) -> str:
        """How the coach reads who answered: "Anna's mother (Maria)"."""
        return f"{player_name}'s {self.relation or 'guardian'} ({self.guardian.name})"
