"""Timing experiments (trainings/experiments/): a rule's alternative offset lists, tried on a share of the
players each, and who was given which.

While an experiment runs its rule names it (`ReminderRule.experiment`) and carries its variants' offsets
(`ReminderRule.variant_offsets`), so scheduling and firing read everything from the rule row they already
load. Arm 0 is the rule's own offsets; arm n is the variant at `arm = n`.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from trainings.planning.offsets import validate_offsets


class ExperimentStatus(models.TextChoices):
    RUNNING = "running", _("Running")
    STOPPED = "stopped", _("Stopped (everyone back on the rule)")
    PROMOTED = "promoted", _("Promoted (a variant's offsets became the rule's)")


class ExperimentMode(models.TextChoices):
    FIXED = "fixed", _("Fixed split (a hash of the player)")
    ADAPTIVE = "adaptive", _("Adaptive (Thompson sampling per training)")


class Experiment(models.Model):
    """One comparison of a rule's offsets against one or more variants, from `started_at` to `stopped_at`.
    `mode`: a fixed split by player, or adaptive (trainings/experiments/adaptive.py)."""

    rule = models.ForeignKey(
        "trainings.ReminderRule", on_delete=models.CASCADE, related_name="experiments", verbose_name=_("rule")
    )
    name = models.CharField(max_length=100, verbose_name=_("name"))
    status = models.CharField(
        max_length=10,
        choices=ExperimentStatus.choices,
        default=ExperimentStatus.RUNNING,
        verbose_name=_("status"),
    )
    control_offsets = models.JSONField(
        validators=[validate_offsets],
        help_text=_("The rule's offsets when the experiment started (arm 0)."),
        verbose_name=_("control offsets"),
    )
    mode = models.CharField(
        max_length=10, choices=ExperimentMode.choices, default=ExperimentMode.FIXED, verbose_name=_("mode")
    )
    started_at = models.DateTimeField(verbose_name=_("started at"))
    stopped_at = models.DateTimeField(null=True, blank=True, verbose_name=_("stopped at"))
    promoted = models.ForeignKey(
        "trainings.Variant",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        verbose_name=_("promoted"),
    )

    class Meta:
        ordering = ["-started_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["rule"], condition=Q(status="running"), name="experiment_one_running_per_rule"
            ),
            models.CheckConstraint(
                condition=Q(status__in=ExperimentStatus.values), name="experiment_status_valid"
            ),
            models.CheckConstraint(condition=Q(mode__in=ExperimentMode.values), name="experiment_mode_valid"),
            models.CheckConstraint(
                condition=Q(status="running", stopped_at__isnull=True)
                | (~Q(status="running") & Q(stopped_at__isnull=False)),
                name="experiment_stopped_when_not_running",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.rule_id and self.rule.slug})"


class Variant(models.Model):
    """An alternative offset list of an experiment's rule; `arm` numbers it from 1 (0 is the rule)."""

    experiment = models.ForeignKey(
        Experiment, on_delete=models.CASCADE, related_name="variants", verbose_name=_("experiment")
    )
    arm = models.PositiveSmallIntegerField(verbose_name=_("arm"))
    label = models.CharField(max_length=50, blank=True, verbose_name=_("label"))
    offsets = models.JSONField(
        validators=[validate_offsets], help_text=_('e.g. ["120m", "45m", "15m"]'), verbose_name=_("offsets")
    )

    class Meta:
        ordering = ["experiment", "arm"]
        constraints = [
            models.UniqueConstraint(fields=["experiment", "arm"], name="variant_unique_arm"),
            models.CheckConstraint(condition=Q(arm__gte=1), name="variant_arm_from_one"),
        ]

    def __str__(self) -> str:
        return self.label or f"variant {self.arm}"


class ExperimentAssignment(models.Model):
    """Which arm of an experiment a player is in: recorded for the team members when it starts and for
    anyone it reminds later. Always `arm_of(experiment, player)` (trainings/experiments/assignment.py)."""

    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="assignments")
    player = models.ForeignKey("trainings.Player", on_delete=models.CASCADE, related_name="+")
    arm = models.PositiveSmallIntegerField()
    assigned_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["experiment", "player"], name="assignment_unique_player"),
        ]

    def __str__(self) -> str:
        return f"{self.player_id} in arm {self.arm} of {self.experiment_id}"


class AdaptiveAssignment(models.Model):
    """An adaptive experiment's arm for one player on one training, drawn by Thompson sampling when its
    reminders first met the player and never changed after (trainings/experiments/adaptive.py)."""

    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="adaptive_assignments")
    training = models.ForeignKey("trainings.Training", on_delete=models.CASCADE, related_name="+")
    player = models.ForeignKey("trainings.Player", on_delete=models.CASCADE, related_name="+")
    arm = models.PositiveSmallIntegerField()
    assigned_at = models.DateTimeField()
    snapshot = models.ForeignKey(
        "trainings.AdaptiveSnapshot", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )  # the posterior it was drawn from (None: the flat prior, before any)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["experiment", "training", "player"], name="adaptive_assignment_unique_player"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.player_id} in arm {self.arm} of {self.experiment_id} on {self.training_id}"


class AdaptiveSnapshot(models.Model):
    """An adaptive experiment's posterior at one moment: per arm (in arm order) the units and answers in
    time so far, the probability of being best, and the leader's chance that no arm beats it by more
    than the margin (the stopping rule); `decided`: this snapshot met the rule and ended the experiment."""

    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="snapshots")
    taken_at = models.DateTimeField()
    trainings = models.PositiveIntegerField()
    asked = models.JSONField()  # [units per arm]
    in_time = models.JSONField()  # [answers in time per arm]
    best = models.JSONField()  # [P(arm is best) per arm]
    leader = models.PositiveSmallIntegerField()
    leader_within = models.FloatField()  # P(max of the others - leader <= margin)
    decided = models.BooleanField(default=False)

    class Meta:
        ordering = ["experiment", "taken_at", "id"]
        indexes = [models.Index(fields=["experiment", "-taken_at"], name="adaptive_snapshot_latest")]

    def __str__(self) -> str:
        return f"{self.experiment_id} at {self.taken_at:%Y-%m-%d %H:%M}"


def rule_change_check(rule: Any) -> None:
    """A rule running an experiment keeps the kind and offsets its variants are compared with: stop the
    experiment, or promote a variant, first. (`ReminderRule.clean`, so the API and the admin both ask.)"""
    if rule.experiment_id is None:
        return
    experiment = Experiment.objects.filter(pk=rule.experiment_id).select_related("rule").first()
    if experiment is None or experiment.rule_id != rule.pk:
        return
    if rule.offsets != experiment.control_offsets:
        raise ValidationError({"offsets": f"experiment {experiment.name!r} compares these; stop it first."})
    if rule.kind != experiment.rule.kind:
        raise ValidationError({"kind": f"experiment {experiment.name!r} runs on this rule; stop it first."})
