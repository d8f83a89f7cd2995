from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from reminders.beat import ensure_periodic_tasks


class Command(BaseCommand):
    help = "Create or repair the beat periodic tasks that kick the due scan and the retention purge."

    def handle(self, *args: Any, **options: Any) -> None:
        ensure_periodic_tasks(IntervalSchedule, PeriodicTask)
        self.stdout.write("beat periodic tasks are in place")
