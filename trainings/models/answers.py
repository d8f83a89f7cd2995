"""What players owe for a training and what they gave: questionnaire answers and invitation responses, each
with how it came in (models of the trainings app, re-exported by trainings.models)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from trainings.planning import kinds


class AnswerSource(models.TextChoices):
    """How an answer or an invitation response came in (the coach's page says so)."""

    PUSH_ACTION = "push_action", "from the notification"
    EMAIL_LINK = "email_link", "from the email"
    APP = "app", "in the app"
    ADMIN = "admin", "recorded by a coach"


class QuestionnaireAnswer(models.Model):
    training = models.ForeignKey(
        "trainings.Training", on_delete=models.CASCADE, related_name="answers", verbose_name=_("training")
    )
    player = models.ForeignKey(
        "trainings.Player", on_delete=models.CASCADE, related_name="answers", verbose_name=_("player")
    )
    phase = models.CharField(
        max_length=kinds.CODE_MAX_LENGTH, choices=kinds.questionnaire_choices, verbose_name=_("phase")
    )
    answered_at = models.DateTimeField(verbose_name=_("answered at"))
    answers = models.JSONField(default=dict, blank=True, verbose_name=_("answers"))
    source = models.CharField(
        max_length=12,
        choices=AnswerSource.choices,
        default=AnswerSource.ADMIN,
        db_default=AnswerSource.ADMIN,
        verbose_name=_("source"),
    )
    answered_by = models.ForeignKey(
        "trainings.Guardian",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text=_("The guardian who answered for the player (none: the player, or a coach)."),
        verbose_name=_("answered by"),
    )

    class Meta:
        verbose_name = _("questionnaire answer")
        verbose_name_plural = _("questionnaire answers")
        constraints = [
            models.UniqueConstraint(fields=["training", "player", "phase"], name="answer_unique_per_phase"),
            models.CheckConstraint(condition=Q(source__in=AnswerSource.values), name="answer_source_valid"),
        ]
        # The analytics' refresh: answers given lately (trainings/analytics/summary.py).
        indexes = [models.Index(fields=["answered_at"], name="answer_answered_at_idx")]

    def __str__(self) -> str:
        return f"{self.player}: {self.get_phase_display()}"  # names, never the training's UUID


class InvitationStatus(models.TextChoices):
    PENDING = "PENDING", _("Pending")
    ACCEPTED = "ACCEPTED", _("Accepted")
    DENIED = "DENIED", _("Denied")


class Invitation(models.Model):
    """A player on a training's list. The list is the invitations; their status is the RSVP."""

    training = models.ForeignKey(
        "trainings.Training", on_delete=models.CASCADE, related_name="invitations", verbose_name=_("training")
    )
    player = models.ForeignKey(
        "trainings.Player", on_delete=models.CASCADE, related_name="invitations", verbose_name=_("player")
    )
    status = models.CharField(
        max_length=8,
        choices=InvitationStatus.choices,
        default=InvitationStatus.PENDING,
        verbose_name=_("status"),
    )
    responded_at = models.DateTimeField(null=True, blank=True, verbose_name=_("responded at"))
    # db_default: the members' invitations are inserted by plain SQL (trainings/planning/writes.py).
    response_source = models.CharField(
        max_length=12,
        choices=AnswerSource.choices,
        blank=True,
        default="",
        db_default="",
        verbose_name=_("response source"),
    )
    responded_by = models.ForeignKey(
        "trainings.Guardian",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text=_("The guardian who responded for the player (none: the player, or a coach)."),
        verbose_name=_("responded by"),
    )

    class Meta:
        verbose_name = _("invitation")
        verbose_name_plural = _("invitations")
        constraints = [
            models.UniqueConstraint(fields=["training", "player"], name="invitation_unique"),
            models.CheckConstraint(
                condition=Q(status__in=InvitationStatus.values), name="invitation_status_valid"
            ),
            models.CheckConstraint(
                condition=Q(response_source="") | Q(response_source__in=AnswerSource.values),
                name="invitation_response_source_valid",
            ),
        ]
        # The analytics' refresh: responses given lately (trainings/analytics/summary.py).
        indexes = [
            models.Index(
                fields=["responded_at"],
                name="invitation_responded_idx",
                condition=Q(responded_at__isnull=False),
            )
        ]

    def __str__(self) -> str:
        return f"{self.player}: {self.get_status_display()}"  # names, never the training's UUID
