"""The committed migrations describe the models exactly (no model change without its migration)."""

from __future__ import annotations

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_it_has_no_pending_model_changes() -> None:
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)
