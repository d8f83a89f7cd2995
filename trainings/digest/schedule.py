"""A team's digest times changed: its trainings not over yet get their coaches' jobs again (the instants
come from the team's settings, trainings/digest/timing.py), in the caller's transaction."""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from trainings.models import ReminderRule, Team, Training
from trainings.planning import kinds
from trainings.planning.scheduling import training_reminders_schedule

# The team fields that say when its coaches' kinds fire.
DIGEST_FIELDS = ("digest_before", "digest_morning_at", "time_zone")


def team_digests_reschedule(*, team: Team, now: datetime | None = None) -> int:
    """Reschedule the coaches' rules for the team's trainings that have not started; returns how many
    instants they now want. The trainings' rows are locked in id order, as a rule's rescan does."""
    now = now or timezone.now()
    rules = list(ReminderRule.objects.filter(kind__in=[kind.code for kind in kinds.coach_kinds()]))
    if not rules:
        return 0
    trainings = Training.objects.filter(team=team, start__gt=now).order_by("pk").select_for_update()
    wanted = 0
    for training in trainings:
        training.team = team  # the settings just saved, not a second read per training
        wanted += training_reminders_schedule(training=training, rules=rules, now=now)
    return wanted
