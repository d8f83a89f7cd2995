from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from trainings.defaults import RULES


@pytest.mark.django_db
def test_the_trainings_migrations_match_the_models() -> None:
    out = StringIO()
    call_command("makemigrations", "trainings", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()


def test_the_seeded_rules_are_seed_000s() -> None:
    """Migration 0002 seeds `trainings.defaults.RULES` (the autouse fixture re-seeds it after flushes)."""
    rules = {spec["slug"]: (spec["kind"], spec["offsets"], sorted(spec["templates"])) for spec in RULES}
    assert rules == {
        "pre-questionnaire": ("PRE", ["90m", "75m", "60m", "45m", "30m", "15m"], ["en", "fr"]),
        "post-questionnaire": (
            "POST",
            [f"{m}m" for m in (15, 30, 45, 60, 75, 90, 105, 120, 135, 150, 165, 180)],
            ["en", "fr"],
        ),
        "invitation": ("INVITATION", ["3d", "2d", "1d", "6h"], ["en", "fr"]),
    }
