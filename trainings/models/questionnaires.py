"""A team's own questionnaire for a phase (before or after training): its questions, in order. A team
without one asks the built-in questions (trainings/answers/presets.py); trainings/answers/questionnaires.py
reads either as one definition and checks every answer against it (models of the trainings app,
re-exported by trainings.models)."""

from __future__ import annotations

import secrets
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from trainings.answers.presets import PRESETS, SCALE, TEXT, preset_choices
from trainings.planning import kinds


def fresh_revision() -> int:
    """A new revision number: any edit gives the questionnaire one no process has seen (a process keeps
    the definitions it read by revision, trainings/answers/questionnaires.py)."""
    return secrets.randbelow(2**62) + 1


class Questionnaire(models.Model):
    team = models.ForeignKey(
        "trainings.Team", on_delete=models.CASCADE, related_name="questionnaires", verbose_name=_("team")
    )
    phase = models.CharField(
        max_length=kinds.CODE_MAX_LENGTH, choices=kinds.questionnaire_choices, verbose_name=_("phase")
    )
    revision = models.PositiveBigIntegerField(
        default=fresh_revision, editable=False, verbose_name=_("revision")
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "phase"], name="questionnaire_unique")]

    def __str__(self) -> str:
        return f"{self.team}: {self.get_phase_display()}"

    def revise(self) -> None:
        """Its questions changed: a new revision, so no process checks an answer against the old ones."""
        self.revision = fresh_revision()
        if self.pk is not None:
            Questionnaire.objects.filter(pk=self.pk).update(revision=self.revision)


class Question(models.Model):
    """A built-in question (`preset`: its text and scale, translated) or the coach's own (its text shown
    as typed, a scale of `minimum`..`maximum` with words at the ends, or a text)."""

    questionnaire = models.ForeignKey(
        Questionnaire, on_delete=models.CASCADE, related_name="questions", verbose_name=_("questionnaire")
    )
    position = models.PositiveSmallIntegerField(default=0, verbose_name=_("position"))
    key = models.SlugField(
        max_length=40,
        help_text=_("The answer's id for apps and exports (letters, digits, _ or -)."),
        verbose_name=_("key"),
    )
    preset = models.CharField(
        max_length=40,
        blank=True,
        choices=preset_choices,
        help_text=_("A built-in question, or empty for your own."),
        verbose_name=_("preset"),
    )
    text = models.CharField(
        max_length=200, blank=True, help_text=_("Your own question, shown as typed."), verbose_name=_("text")
    )
    type = models.CharField(
        max_length=8, choices=[(SCALE, "scale"), (TEXT, "text")], default=SCALE, verbose_name=_("type")
    )
    minimum = models.SmallIntegerField(null=True, blank=True, verbose_name=_("minimum"))
    maximum = models.SmallIntegerField(null=True, blank=True, verbose_name=_("maximum"))
    minimum_label = models.CharField(
        max_length=60,
        blank=True,
        help_text=_("The words at the lowest value."),
        verbose_name=_("minimum label"),
    )
    maximum_label = models.CharField(
        max_length=60,
        blank=True,
        help_text=_("The words at the highest value."),
        verbose_name=_("maximum label"),
    )
    required = models.BooleanField(default=True, verbose_name=_("required"))

    class Meta:
        ordering = ["position", "id"]
        constraints = [
            models.UniqueConstraint(fields=["questionnaire", "key"], name="question_key_unique"),
            models.CheckConstraint(
                condition=Q(minimum__isnull=True)
                | Q(maximum__isnull=True)
                | Q(minimum__lt=models.F("maximum")),
                name="question_range_ordered",
            ),
        ]

    def __str__(self) -> str:
        return self.key

    def save(self, *args: Any, **kwargs: Any) -> None:
        super().save(*args, **kwargs)
        self.questionnaire.revise()

    def delete(self, *args: Any, **kwargs: Any) -> Any:
        questionnaire = self.questionnaire
        deleted = super().delete(*args, **kwargs)
        questionnaire.revise()
        return deleted

    def clean(self) -> None:
        if self.preset:
            if self.preset not in PRESETS:
                raise ValidationError({"preset": "Not a built-in question."})
            return
        errors: dict[str, str] = {}
        if not self.text.strip():
            errors["text"] = "Type the question, or choose a built-in one."
        if self.type == SCALE:
            if self.minimum is None or self.maximum is None:
                errors["minimum"] = "A scale needs its lowest and highest value."
            elif not -1000 <= self.minimum < self.maximum <= 1000 or self.maximum - self.minimum > 100:
                errors["maximum"] = "The highest value must be above the lowest, at most 100 steps apart."
        if errors:
            raise ValidationError(errors)
