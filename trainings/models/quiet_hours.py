"""The check every owner of quiet hours (a team, a player, a guardian) has on its `quiet_start` and
`quiet_end`: both ends or neither. trainings/quiet.py reads them."""

from __future__ import annotations

from datetime import time

from django.db import models
from django.db.models import Q

# A new team's window (docs/quiet-hours.md): a late training's post-questionnaire waits for the morning.
QUIET_START_DEFAULT = time(22, 0)
QUIET_END_DEFAULT = time(7, 0)


def quiet_hours_both_or_none(owner: str) -> models.CheckConstraint:
    """The check, named `<owner>_quiet_hours_both_or_none`."""
    return models.CheckConstraint(
        condition=Q(quiet_start__isnull=True, quiet_end__isnull=True)
        | Q(quiet_start__isnull=False, quiet_end__isnull=False),
        name=f"{owner}_quiet_hours_both_or_none",
    )
