"""`manage.py analytics_rebuild [--since DAY] [--until DAY]`: recompute the analytics summaries of a range
of training days whose pushes are still kept (trainings/analytics/summary.py; docs/analytics.md)."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from trainings.analytics.summary import summaries_rebuild


class Command(BaseCommand):
    help = "Recompute the analytics summaries of a range of training days (default: every day still kept)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--since", type=date.fromisoformat, help="First training day (YYYY-MM-DD).")
        parser.add_argument("--until", type=date.fromisoformat, help="Last training day, included.")

    def handle(self, *args: Any, **options: Any) -> None:
        today = timezone.localdate()
        since = options["since"] or today - timedelta(days=settings.TRAININGS_PUSH_RETENTION_DAYS - 1)
        until = options["until"] or today + timedelta(days=31)
        if until < since:
            raise CommandError(f"--until {until} is before --since {since}")
        try:
            done = summaries_rebuild(since=since, until=until, today=today)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"{done} team day(s) recomputed from {since} to {until}")
