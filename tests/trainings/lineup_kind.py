"""A kind added as a new one is, for the tests only: its entry in the kinds table and its default rule.

"Match-day lineup confirmation, 2 h before the start": players who accepted the invitation confirm their
place; the reminder chases those who have not confirmed yet.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q

from trainings.planning import kinds

LINEUP = kinds.Kind(
    code="LINEUP",
    label="Match-day lineup confirmation",
    anchor="start",
    sign=-1,
    closes=kinds.at_start,
    answer=kinds.Questionnaire("LINEUP"),
    screen="lineup",
    audience=Q(status="ACCEPTED"),
)

RULE: dict[str, Any] = {
    "slug": "lineup-confirmation",
    "kind": "LINEUP",
    "offsets": ["2h"],
    "templates": {"en": ("Lineup: {title}", "Please confirm your place for {title} at {start_time}.")},
}
