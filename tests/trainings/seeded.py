"""The `rules` fixture both trainings packages use (tests/trainings, tests/trainings_faults) autouse."""

from __future__ import annotations

import pytest

from tests.factories import rules_seeded
from trainings.models import ReminderRule


@pytest.fixture(autouse=True)
def rules(db: None) -> dict[str, ReminderRule]:
    """Seed 000's rules by slug (migration 0002 seeds them; a transactional test's flush removes them)."""
    return rules_seeded()
