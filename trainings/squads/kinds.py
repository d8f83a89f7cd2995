"""The squad's two kinds, registered in the kinds table (trainings/planning/kinds.py) at start-up:

- `SHORT`, a coaches' kind: its rule's offsets before the start (default "24h",
  trainings/planning/defaults.py), only for a training with a `min_players`; the alert says how many are
  missing and who has not answered (trainings/squads/short.py). No minimum, no instant: a training
  without one has no job of this rule.
- `PROMOTED`, a notice: "you're in", to a player the waiting list gave a place
  (trainings/squads/notices.py), while they are still accepted.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import Q
from django.utils.translation import gettext_noop as _

from trainings.planning import kinds
from trainings.planning.offsets import Offset, OffsetError, parse_stored_offsets, shift


def short_instants(training: Any, rule: Any = None) -> list[tuple[datetime, Offset]]:
    """The short-squad rule's offsets before the start, for a training with a minimum (else none)."""
    if rule is None or getattr(training, "min_players", None) is None:
        return []
    try:
        offsets = parse_stored_offsets(rule.offsets)
    except (OffsetError, TypeError, ValueError):
        return []
    return sorted((shift(training.start, offset, sign=-1, zone=training.zone), offset) for offset in offsets)


SHORT = kinds.register(
    kinds.Kind(
        code="SHORT",
        label=_("Short squad alert"),
        anchor="start",
        sign=-1,
        closes=kinds.at_start,
        answer=None,
        screen="coach_digest",
        to="coaches",
        instants=short_instants,
    )
)

PROMOTED = kinds.register(
    kinds.Kind(
        code="PROMOTED",
        label=_("Place from the waiting list"),
        anchor="start",
        sign=-1,
        closes=kinds.at_start,
        answer=None,
        screen="training",
        rule=False,
        audience=Q(status="ACCEPTED"),
        notice={
            "en": (
                _("You're in: {title}"),
                _(
                    "A place opened up: you are in the squad for {title} on {start_date} at {start_time} "
                    "({time_zone})."
                ),
            ),
        },
    )
)
