"""Which channels a person wants a kind of reminder through (a player's, a guardian's or a coach's choice;
delivery/gateway/routing.py applies it)."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class ChannelChoice(models.TextChoices):
    DEFAULT = "default", _("Push; email when no device is reached")
    PUSH = "push", _("Push only, never email")
    EMAIL = "email", _("Email instead of push")
    BOTH = "both", _("Push and email")
