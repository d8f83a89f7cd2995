from __future__ import annotations

import datetime as dt
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from reminders.models import Occurrence, OccurrenceStatus


def test_the_demo_schedules_a_reminder_of_each_kind_within_minutes(settings) -> None:
    settings.DEBUG = True
    out = StringIO()
    call_command("demo_trainings", stdout=out)
    soon = Occurrence.objects.filter(
        status=OccurrenceStatus.SCHEDULED, fire_at__lte=timezone.now() + dt.timedelta(minutes=5)
    )
    assert sorted(key.rsplit("-", 1)[-1] for key in soon.values_list("job__key", flat=True)) == [
        "invitation",
        "invitation",  # the pre-training one, created 17 minutes ahead: its invitation goes at creation
        "questionnaire",
        "questionnaire",
    ]
    assert min(soon.values_list("fire_at", flat=True)) <= timezone.now() + dt.timedelta(minutes=2)
    # The pushes it promises come from the gateway `make run` starts beside the worker and beat.
    assert "PUSH line" in out.getvalue()
    run_all = Path(__file__).resolve().parents[2] / "scripts" / "supervise.py"
    assert '"manage.py", "push_gateway"' in run_all.read_text()


def test_the_demo_refuses_to_run_without_debug(settings) -> None:
    settings.DEBUG = False
    with pytest.raises(CommandError):
        call_command("demo_trainings")
