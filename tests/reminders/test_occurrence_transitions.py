"""An occurrence moves only along OCCURRENCE_TRANSITIONS, and reminders/engine/occurrences.py enforces it."""

from __future__ import annotations

import pytest

from reminders.engine import occurrences
from reminders.models import OCCURRENCE_TRANSITIONS, TERMINAL_STATUSES, Occurrence, OccurrenceStatus
from tests.factories import OccurrenceFactory

pytestmark = pytest.mark.django_db


def test_every_status_has_its_moves_written_down_and_finished_ones_stay_finished() -> None:
    assert set(OCCURRENCE_TRANSITIONS) == set(OccurrenceStatus.values)
    assert not OCCURRENCE_TRANSITIONS[OccurrenceStatus.DELIVERED]
    assert not OCCURRENCE_TRANSITIONS[OccurrenceStatus.SKIPPED]
    # Only a claim reaches `delivered`, and only `scheduled` rows are claimed.
    assert {s for s, moves in OCCURRENCE_TRANSITIONS.items() if OccurrenceStatus.DELIVERED in moves} == {
        OccurrenceStatus.CLAIMED
    }
    assert {s for s, moves in OCCURRENCE_TRANSITIONS.items() if OccurrenceStatus.CLAIMED in moves} == {
        OccurrenceStatus.SCHEDULED
    }
    assert all(status in OCCURRENCE_TRANSITIONS for status in TERMINAL_STATUSES)


def test_a_move_the_table_does_not_allow_is_refused_before_it_touches_a_row() -> None:
    row = OccurrenceFactory(status=OccurrenceStatus.DELIVERED)

    with pytest.raises(ValueError, match="cannot move from delivered to scheduled"):
        occurrences._move(
            Occurrence.objects.filter(id=row.id),
            source=OccurrenceStatus.DELIVERED,
            to=OccurrenceStatus.SCHEDULED,
        )

    row.refresh_from_db()
    assert row.status == OccurrenceStatus.DELIVERED
