from __future__ import annotations

import pytest
from django.core.management import call_command
from django_celery_beat.models import PeriodicTask

from reminders.beat import PURGE_TASK, SCAN_TASK, SCAN_TASK_NAME

pytestmark = pytest.mark.django_db


def test_migrations_create_the_every_second_scan_and_the_hourly_purge() -> None:
    scan = PeriodicTask.objects.get(task=SCAN_TASK)
    assert scan.enabled
    assert (scan.interval.every, scan.interval.period) == (1, "seconds")
    assert scan.expire_seconds == 5
    purge = PeriodicTask.objects.get(task=PURGE_TASK)
    assert (purge.interval.every, purge.interval.period) == (1, "hours")


def test_ensure_beat_repairs_a_disabled_task_and_is_idempotent() -> None:
    PeriodicTask.objects.filter(name=SCAN_TASK_NAME).update(enabled=False)
    call_command("ensure_beat")
    call_command("ensure_beat")
    assert PeriodicTask.objects.filter(task=SCAN_TASK).count() == 1
    assert PeriodicTask.objects.get(task=SCAN_TASK).enabled
