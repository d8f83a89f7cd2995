"""A player's or a guardian's own choice per reminder kind (the channels, or muted), read by the push
gateway and the fire path (trainings/reminding/preferences.py)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from trainings.models.channels import ChannelChoice
from trainings.planning import kinds


class ReminderPreference(models.Model):
    """A player's (or a guardian's) own choice for one reminder kind: the channels it comes through, or
    muted. No row is the default (push, and email when no device is reached, never muted)."""

    player = models.ForeignKey(
        "trainings.Player",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="preferences",
        verbose_name=_("player"),
    )
    guardian = models.ForeignKey(
        "trainings.Guardian",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="preferences",
        verbose_name=_("guardian"),
    )
    kind = models.CharField(
        max_length=kinds.CODE_MAX_LENGTH, choices=kinds.rule_choices, verbose_name=_("kind")
    )
    channels = models.CharField(
        max_length=8, choices=ChannelChoice.choices, default=ChannelChoice.DEFAULT, verbose_name=_("channels")
    )
    muted = models.BooleanField(
        default=False,
        help_text=_("No reminder of this kind (unless it is critical)."),
        verbose_name=_("muted"),
    )
    updated_at = models.DateTimeField(auto_now=True, verbose_name=_("updated at"))

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["player", "kind"], name="preference_unique_per_kind"),
            models.UniqueConstraint(fields=["guardian", "kind"], name="preference_unique_guardian_kind"),
            models.CheckConstraint(
                condition=Q(player__isnull=False, guardian__isnull=True)
                | Q(player__isnull=True, guardian__isnull=False),
                name="preference_one_owner",
            ),
            models.CheckConstraint(
                condition=Q(channels__in=ChannelChoice.values), name="preference_channels_valid"
            ),
        ]

    def __str__(self) -> str:
        muted = " (muted)" if self.muted else ""
        return f"{self.player or self.guardian}: {self.kind} via {self.channels}{muted}"
