"""A training's squad size: how many players it needs (`min_players`) and has places for (`max_players`),
both optional (trainings/squads/ decides the waiting list and the short-squad alert from them)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext_lazy as _


class SquadSize(models.Model):
    """The two limits, on `Training` (abstract: the training's own module stays about trainings)."""

    min_players = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text=_("The coaches are alerted when fewer have accepted (empty: no minimum)."),
        verbose_name=_("minimum players"),
    )
    max_players = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text=_("Places: further players who accept go on the waiting list (empty: no limit)."),
        verbose_name=_("maximum players"),
    )

    class Meta:
        abstract = True

    def clean(self) -> None:
        super().clean()
        if self.min_players and self.max_players and self.min_players > self.max_players:
            raise ValidationError({"min_players": _("The minimum is more than the maximum.")})


def squad_size_valid() -> models.CheckConstraint:
    """Both limits at least 1, the minimum not above the maximum (either may be empty)."""
    return models.CheckConstraint(
        condition=(Q(min_players__isnull=True) | Q(min_players__gte=1))
        & (Q(max_players__isnull=True) | Q(max_players__gte=1))
        & (Q(min_players__isnull=True) | Q(max_players__isnull=True) | Q(min_players__lte=F("max_players"))),
        name="training_squad_size_valid",
    )
