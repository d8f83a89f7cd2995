"""Which channels a person wants a kind of reminder through (a player's, a guardian's or a coach's choice;
trainings/push/routing.py applies it)."""

from __future__ import annotations

from django.db import models


class ChannelChoice(models.TextChoices):
    DEFAULT = "default", "Push; email when no device is reached"
    PUSH = "push", "Push only, never email"
    EMAIL = "email", "Email instead of push"
    BOTH = "both", "Push and email"
