"""The daily summaries the analytics read (trainings/analytics/): kept by trainings/analytics/summary.py,
never by hand, and kept when pushes and answers are purged (they are the only record left then)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from trainings.planning import kinds


class OffsetDay(models.Model):
    """One rule offset's reminders for the trainings of one team (or, team empty, of every team) whose start
    falls on `day` in the training's own zone. Rule and offset empty: answers nobody was reminded for."""

    day = models.DateField()
    team = models.ForeignKey("trainings.Team", null=True, blank=True, on_delete=models.CASCADE)
    kind = models.CharField(max_length=kinds.CODE_MAX_LENGTH)
    rule = models.CharField(max_length=50, blank=True, help_text="The rule's slug (slugs never change).")
    offset = models.CharField(max_length=10, blank=True)
    sent = models.PositiveIntegerField(default=0)
    reached = models.PositiveIntegerField(default=0)
    answered = models.PositiveIntegerField(default=0)
    within_15 = models.PositiveIntegerField(default=0)
    within_60 = models.PositiveIntegerField(default=0)
    in_window = models.PositiveIntegerField(default=0)
    bands = models.JSONField(default=dict, help_text="Time-to-answer band -> answers (attribution.py).")

    class Meta:
        constraints = [
            # A team's period: team = t AND day BETWEEN a AND b.
            models.UniqueConstraint(
                fields=["team", "day", "kind", "rule", "offset"],
                condition=Q(team__isnull=False),
                name="offsetday_unique_team",
            ),
            # Every team's period: team IS NULL AND day BETWEEN a AND b.
            models.UniqueConstraint(
                fields=["day", "kind", "rule", "offset"],
                condition=Q(team__isnull=True),
                name="offsetday_unique_all",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.day} {self.kind} {self.rule} {self.offset}: {self.answered}/{self.reached}"


class PlayerDay(models.Model):
    """How one player answered one kind for one team's trainings starting on `day` (local)."""

    day = models.DateField()
    team = models.ForeignKey("trainings.Team", on_delete=models.CASCADE)
    player = models.ForeignKey("trainings.Player", on_delete=models.CASCADE)
    kind = models.CharField(max_length=kinds.CODE_MAX_LENGTH)
    before_reminder = models.PositiveIntegerField(default=0)
    after_reminder = models.PositiveIntegerField(default=0)
    after_last = models.PositiveIntegerField(default=0)
    never = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            # A team's players over a period: team = t AND day BETWEEN a AND b, grouped by player.
            models.UniqueConstraint(fields=["team", "day", "player", "kind"], name="playerday_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.day} {self.player_id} {self.kind}"


class SummaryMark(models.Model):
    """The one row that says up to when the summaries were brought up to date. Locked by every refresh, so
    two never interleave their writes to the every-team rows."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    refreshed_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(id=1), name="summarymark_single_row")]

    def __str__(self) -> str:
        return f"summaries up to {self.refreshed_until}"
